//! What fairlock reports about itself: with the `metrics` feature, through
//! the `metrics` facade to whatever exporter the service installed; without
//! it, nothing (every function here is empty and [`Labels`] holds nothing,
//! so the calls compile away).
//!
//! Metric names, units and labels (docs/observing.md lists them
//! too); every metric has `primitive` (`mutex`, `semaphore`, `rwlock`,
//! `election`) and, when the client asks for it
//! ([`ClientBuilder::metrics_lock_names`](crate::ClientBuilder::metrics_lock_names)),
//! `name`:
//! - `fairlock_wait_seconds` (histogram): how long an acquire call waited,
//!   with `outcome` `acquired`, `timed_out`, `cancelled` or `failed`;
//! - `fairlock_hold_seconds` (histogram): from a hold's grant to its last
//!   guard's release;
//! - `fairlock_handoff_seconds` (histogram): from this client learning that
//!   a waiter was handed the lock (a push message, or a release reply) to
//!   the waiter's call returning with it;
//! - `fairlock_acquisitions_total` (counter): holds taken (a re-entry joins
//!   one), `fairlock_leases_lost_total` (counter);
//! - `fairlock_waiting_threads`, `fairlock_held_locks` (gauges);
//! - `fairlock_reconnects_total` (counter, `connection`: `subscriber` or
//!   `pool`) and `fairlock_script_reloads_total` (counter), without the
//!   lock's labels.
//!
//! Without the feature, what a function would report goes unused.
#![cfg_attr(not(feature = "metrics"), allow(unused_variables))]

use std::time::Duration;

#[cfg(feature = "metrics")]
use metrics::{counter, gauge, histogram, Label};

use crate::protocol::LockKind;

/// The labels of one lock's metrics: its primitive, and its name when the
/// client opted in (names can be unbounded). Empty without the `metrics`
/// feature.
#[derive(Debug, Clone)]
pub(crate) struct Labels {
    #[cfg(feature = "metrics")]
    list: Vec<Label>,
}

impl Labels {
    pub(crate) fn new(kind: LockKind, name: Option<&str>) -> Self {
        Labels {
            #[cfg(feature = "metrics")]
            list: std::iter::once(Label::new("primitive", kind.label()))
                .chain(name.map(|name| Label::new("name", name.to_owned())))
                .collect(),
        }
    }
}

/// Describes every metric to the installed recorder (names, units, help).
pub(crate) fn describe() {
    #[cfg(feature = "metrics")]
    {
        use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
        describe_histogram!(
            "fairlock_wait_seconds",
            Unit::Seconds,
            "how long an acquire call waited, by outcome"
        );
        describe_histogram!(
            "fairlock_hold_seconds",
            Unit::Seconds,
            "from a hold's grant to its release"
        );
        describe_histogram!(
            "fairlock_handoff_seconds",
            Unit::Seconds,
            "from this client learning of a handoff to the waiter's call returning"
        );
        describe_counter!("fairlock_acquisitions_total", "holds taken");
        describe_counter!("fairlock_leases_lost_total", "holds whose lease was lost");
        describe_gauge!("fairlock_waiting_threads", "threads waiting in a queue now");
        describe_gauge!("fairlock_held_locks", "holds with live guards now");
        describe_counter!(
            "fairlock_reconnects_total",
            "connections made again after the server closed one"
        );
        describe_counter!(
            "fairlock_script_reloads_total",
            "script cache reloads after the server lost its scripts"
        );
    }
}

/// An acquire call of the lock `labels` names ended after `waited`, as
/// `outcome` says (`acquired`, `timed_out`, `cancelled` or `failed`).
pub(crate) fn wait_ended(labels: &Labels, outcome: &'static str, waited: Duration) {
    #[cfg(feature = "metrics")]
    {
        let mut list = labels.list.clone();
        list.push(Label::new("outcome", outcome));
        histogram!("fairlock_wait_seconds", list).record(waited.as_secs_f64());
    }
}

/// A waiter's call returned `latency` after this client learned of its
/// grant.
pub(crate) fn handed_over(labels: &Labels, latency: Duration) {
    #[cfg(feature = "metrics")]
    histogram!("fairlock_handoff_seconds", labels.list.clone()).record(latency.as_secs_f64());
}

/// A hold got its first guard (a re-entry's joins a hold: no acquisition).
pub(crate) fn hold_began(labels: &Labels) {
    #[cfg(feature = "metrics")]
    {
        counter!("fairlock_acquisitions_total", labels.list.clone()).increment(1);
        gauge!("fairlock_held_locks", labels.list.clone()).increment(1.0);
    }
}

/// A hold's last guard went, `held` after its grant.
pub(crate) fn hold_ended(labels: &Labels, held: Duration) {
    #[cfg(feature = "metrics")]
    {
        histogram!("fairlock_hold_seconds", labels.list.clone()).record(held.as_secs_f64());
        gauge!("fairlock_held_locks", labels.list.clone()).decrement(1.0);
    }
}

/// A hold's lease was found lost (once per hold).
pub(crate) fn lease_lost(labels: &Labels) {
    #[cfg(feature = "metrics")]
    counter!("fairlock_leases_lost_total", labels.list.clone()).increment(1);
}

/// A thread started (`+1.0`) or stopped (`-1.0`) waiting in a queue.
pub(crate) fn waiting(labels: &Labels, delta: f64) {
    #[cfg(feature = "metrics")]
    gauge!("fairlock_waiting_threads", labels.list.clone()).increment(delta);
}

/// A connection was made again after the server closed one: a
/// `subscriber`'s pub/sub connection, or a `pool`ed one.
pub(crate) fn reconnected(connection: &'static str) {
    #[cfg(feature = "metrics")]
    counter!("fairlock_reconnects_total", "connection" => connection).increment(1);
}

/// The scripts were loaded again after the server lost them.
pub(crate) fn scripts_reloaded() {
    #[cfg(feature = "metrics")]
    counter!("fairlock_script_reloads_total").increment(1);
}
