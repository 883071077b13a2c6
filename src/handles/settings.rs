//! What every lock handle has, a multi-lock's too: the client's engine, the
//! lease settings and the ownership its acquisitions are taken with.
//! [`FairLock`](crate::FairLock) and [`FairMultiLock`](crate::FairMultiLock)
//! share nothing else, so this is their one common core.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::error::Result;
use crate::handles::guard::Guard;
use crate::handles::kind::HoldKind;
use crate::handles::ownership::Ownership;
use crate::machinery::engine::Engine;
use crate::machinery::lease_policy::LeasePolicy;
use crate::machinery::target::Target;
use crate::machinery::wait::Wait;
use crate::protocol::Ask;

/// A handle's engine, lease policy and ownership `O`.
#[derive(Clone)]
pub(crate) struct Settings<O> {
    engine: Arc<Engine>,
    pub(crate) policy: LeasePolicy,
    owner: PhantomData<O>,
}

impl<O: Ownership> Settings<O> {
    pub(crate) fn new(engine: Arc<Engine>, policy: LeasePolicy) -> Self {
        let owner = PhantomData;
        Settings {
            engine,
            policy,
            owner,
        }
    }

    /// The same settings, owned as `P`.
    pub(crate) fn owned_as<P: Ownership>(&self) -> Settings<P> {
        Settings::new(Arc::clone(&self.engine), self.policy)
    }

    /// The same settings, with a fixed lease that no watchdog renews.
    pub(crate) fn fixed_lease(&self, lease: Duration) -> Self {
        Settings::new(Arc::clone(&self.engine), LeasePolicy::Fixed(lease))
    }

    /// The same settings, each hold renewed for at most `max_hold`.
    pub(crate) fn max_hold(&self, max_hold: Duration) -> Self {
        let max_hold = Some(max_hold);
        Settings::new(Arc::clone(&self.engine), LeasePolicy::Renewed { max_hold })
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    /// One acquire call on `target` asking for `ask` under these settings,
    /// its unbound owner id tagged with `tag` (an election's value),
    /// waiting as `wait` says; the guard of what it got.
    pub(crate) fn request<H: HoldKind>(
        &self,
        target: &Target,
        ask: Ask,
        tag: Option<&str>,
        wait: &Wait,
    ) -> Result<Option<Guard<H, O>>> {
        let got = (self.engine).acquire(target, ask, self.policy, O::UNBOUND, tag, wait)?;
        Ok(got.map(Guard::new))
    }
}

impl<O: Ownership> std::fmt::Debug for Settings<O> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let unbound = O::UNBOUND;
        f.debug_struct("Settings")
            .field("lease", &self.policy)
            .field("unbound", &unbound)
            .finish()
    }
}
