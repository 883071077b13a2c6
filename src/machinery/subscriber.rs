//! The `fairlock-subscriber` thread: one connection of its own, subscribed
//! to this client's wake channel, turning messages into condvar wake-ups.
//! On Redis Cluster there is one such thread per node (see
//! [`Backend::listen_targets`](crate::connections::Backend::listen_targets)); a
//! message then arrives once per node, and the later copies find nothing
//! left to wake.
//!
//! Messages (see `lua/lib.lua`): `G <wait id> <token> <ttl ms>` hands the
//! lock to a waiter; `H <wait id> <pttl ms>` tells a waiter it heads the
//! queue; `R <token> <lock key>` asks this client's holds of that lock
//! with tokens up to that one to let go (a revocation: the holds' renewals
//! say it too, so a lost message is made up for at the next renewal);
//! `L <token> <lock key>` says those holds were freed by a force release
//! (a lost one is found at the next renewal as well); `S`
//! asks the thread to notice that the client is stopping.
//! Messages published while the connection is down are lost, so after every
//! reconnect all waiters poll once.
//!
//! Its checked `SUBSCRIBE` and its test for a read cut short by a signal
//! also serve an election's watch, which reads a channel of its own on the
//! caller's thread.

use std::sync::mpsc::Sender;
use std::time::Duration;

use crate::connections::Listen;
use crate::error::Result;
use crate::machinery::holds::Hold;
use crate::machinery::shared::Shared;
use crate::machinery::waiters::poll_time;
use crate::protocol::WakeMessage;

/// How long a read blocks before the thread checks whether to stop.
const READ_TIMEOUT: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(1);

/// Listens at `target` until the client stops. The first subscription's
/// outcome goes to `ready`; after a failed first try the thread keeps
/// trying (the client gives up on it only if no thread could subscribe).
pub(crate) fn run(shared: &Shared, target: &Listen, ready: Sender<Result<()>>) {
    let mut ready = Some(ready);
    let mut backoff = Duration::from_millis(50);
    while !shared.is_stopping() {
        let Err(err) = listen(shared, target, &mut ready) else {
            return;
        };
        if let Some(ready) = ready.take() {
            let _ = ready.send(Err(err));
        } else {
            log::warn!(
                "fairlock: wake-up subscription on {} lost, reconnecting: {err}",
                target.describe()
            );
        }
        if shared.sleep_unless_stopping(backoff) {
            return;
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Subscribes and dispatches messages until the client stops (Ok) or the
/// connection fails (Err). `ready` is there until the first subscription's
/// outcome is told: a later one is a reconnect.
fn listen(shared: &Shared, target: &Listen, ready: &mut Option<Sender<Result<()>>>) -> Result<()> {
    let channel = shared.wake_channel();
    let mut conn = shared.caller.backend.subscription(target, &channel)?;
    let mut pubsub = conn.as_pubsub();
    pubsub
        .set_read_timeout(Some(READ_TIMEOUT))
        .map_err(crate::Error::from_redis)?;
    if let Some(ready) = ready.take() {
        let _ = ready.send(Ok(()));
    } else {
        // Handoffs published while we were away were lost: everyone asks.
        log::info!(
            "fairlock: wake-up subscription on {} is back",
            target.describe()
        );
        crate::machinery::observe::reconnected(crate::machinery::observe::Reconnect::Subscriber);
        shared.waiters.repoll_all();
    }
    let mut interruptions = 0;
    loop {
        if shared.is_stopping() {
            return Ok(());
        }
        match pubsub.get_message() {
            Ok(msg) => {
                interruptions = 0;
                dispatch(shared, msg.get_payload_bytes());
            }
            Err(err) if err.is_timeout() => interruptions = 0,
            // A read cut short by a signal (a process stopped and continued
            // returns EINTR from a read with a timeout): the connection is
            // fine and a message may be waiting; read again.
            Err(err) if interrupted(&err) && interruptions < MAX_INTERRUPTIONS => {
                interruptions += 1;
            }
            Err(err) => return Err(crate::Error::from_redis(err)),
        }
    }
}

/// Reads in a row cut short without a sign of a closed connection before the
/// subscription is opened afresh.
const MAX_INTERRUPTIONS: u32 = 3;

/// True for an I/O error that does not show the connection closed and that
/// redis-rs would retry at once, such as EINTR.
pub(crate) fn interrupted(err: &redis::RedisError) -> bool {
    err.is_io_error()
        && !err.is_connection_dropped()
        && matches!(err.retry_method(), redis::RetryMethod::RetryImmediately)
}

/// Why a hold told of a force release was lost.
const FORCE_RELEASED: &str =
    "a force release (Client::force_unlock, `fairlock unlock --force`) freed it";

fn dispatch(shared: &Shared, payload: &[u8]) {
    match WakeMessage::parse(payload) {
        Some(WakeMessage::Granted {
            wait_id,
            token,
            ttl_ms,
        }) => shared.grant_waiter(wait_id, token, ttl_ms),
        Some(WakeMessage::Head { wait_id, pttl_ms }) => {
            if let Some(waiter) = shared.waiters.get(wait_id) {
                waiter.poll_by(poll_time(pttl_ms));
            }
        }
        Some(WakeMessage::Revoke { up_to, lock_key }) => {
            shared
                .holds
                .each_up_to(&lock_key, up_to, Hold::mark_revoked);
        }
        Some(WakeMessage::Freed { up_to, lock_key }) => {
            shared
                .holds
                .each_up_to(&lock_key, up_to, |hold| hold.mark_lost(FORCE_RELEASED));
        }
        Some(WakeMessage::Stop) => {}
        None => log::debug!(
            "fairlock: ignoring wake message {:?}",
            String::from_utf8_lossy(payload)
        ),
    }
}
