//! How a handle's holds are leased: renewed by the watchdog (for at most a
//! maximum hold, if one is set) or fixed. One value, so that a fixed lease
//! and a maximum hold, which exclude each other, cannot both be set.

use std::time::Duration;

use crate::connections::config::{check_lease, Config};
use crate::error::Result;
use crate::protocol::Lease;

/// The lease policy of a handle's acquisitions: the last of
/// `with_fixed_lease` and `with_max_hold` decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeasePolicy {
    /// The client's lease, renewed while a guard lives, for at most this
    /// long from the grant (the maximum hold) when set.
    Renewed(Option<Duration>),
    /// A lease nobody renews: the hold ends by itself this long after its
    /// grant.
    Fixed(Duration),
}

impl LeasePolicy {
    /// The lease an acquisition takes under this policy with the client's
    /// settings; a lease or maximum hold out of bounds is an error before
    /// any I/O.
    pub(crate) fn lease(self, config: &Config) -> Result<Lease> {
        match self {
            // The grant's own lease reaches no further than the maximum
            // hold and a watchdog period (what a handed-over grant's count
            // may start before it): a holder that hangs before any renewal
            // passes the lock on by then, not a whole lease later.
            LeasePolicy::Renewed(Some(max)) => {
                check_lease("a maximum hold", max)?;
                let lasting = (config.clock_drift).lease_lasting(max + config.watchdog_period());
                Ok(Lease::Renewed(config.lease.min(lasting)))
            }
            LeasePolicy::Renewed(None) => Ok(Lease::Renewed(config.lease)),
            LeasePolicy::Fixed(lease) => {
                check_lease("a fixed lease", lease)?;
                config.clock_drift.check_against("a fixed lease", lease)?;
                Ok(Lease::Fixed(lease))
            }
        }
    }

    /// The longest a hold is renewed for, if capped.
    pub(crate) fn max_hold(self) -> Option<Duration> {
        match self {
            LeasePolicy::Renewed(max_hold) => max_hold,
            LeasePolicy::Fixed(_) => None,
        }
    }
}
