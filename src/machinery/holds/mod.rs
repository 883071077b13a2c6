//! Locks this client holds, as seen by their guards and by the watchdog.
//!
//! Beside them, the other registries a call leaves behind: the calls to
//! abandon (`abandons`), the permits in force a call saw (`permits_seen`),
//! and how a handle's holds are leased (`lease_policy`).

pub(crate) mod abandons;
pub(crate) mod lease_policy;
pub(crate) mod permits_seen;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, MutexGuard};

use crate::connections::config::ClockDrift;
use crate::error::{Error, ErrorKind};
use crate::machinery::observe::{self, Labels};
use crate::protocol::{Ask, Call, Renew, RenewReply};
use rustc_hash::FxBuildHasher;

/// How a hold ended, as its [`LeaseSignal`](crate::LeaseSignal) reports it.
/// Non-exhaustive: a match needs a `_` arm.
///
/// ```no_run
/// use std::time::Duration;
/// use fairlock::LeaseEnd;
/// # fn main() -> fairlock::Result<()> {
/// let client = fairlock::Client::open("redis://127.0.0.1:6379")?;
/// let mutex = client.fair_mutex("nightly-export").with_max_hold(Duration::from_secs(600));
/// let guard = mutex.lock()?;
/// let signal = guard.lease_signal();
/// std::thread::spawn(move || match signal.wait() {
///     LeaseEnd::Released => {}                                     // done in time
///     LeaseEnd::MaxHold => eprintln!("10 min up: finish the batch"), // the lease still runs a while
///     LeaseEnd::Lost => eprintln!("lost: stop writing now"),       // another may hold it
///     _ => {}
/// });
/// # drop(guard);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseEnd {
    /// The lease is gone while a guard still stood for it: Redis said the
    /// lock was no longer this hold's (expired, force-unlocked), or no
    /// renewal confirmed the lease before this client's own count of it ran
    /// out. Side effects must stop: another client may hold the lock now.
    Lost,
    /// Every guard of the hold was released (unlocked or dropped) while the
    /// lease was still held as far as this client knew.
    Released,
    /// The hold reached its maximum hold (`with_max_hold`): the watchdog
    /// no longer renews it, and the lock passes on when the lease it has
    /// runs out (then the end becomes [`Lost`](Self::Lost) unless the
    /// guard was released first). Side effects should wind down now.
    MaxHold,
}

/// How a wait on a [`RevocationSignal`](crate::RevocationSignal) ended.
/// Non-exhaustive: a match needs a `_` arm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Revocation {
    /// Someone asked the hold to let go: release it when you can. The
    /// lease is still renewed meanwhile; nothing was taken away.
    Requested,
    /// The hold ended (released, or lost: see its
    /// [`LeaseSignal`](crate::LeaseSignal)) without anyone asking.
    HoldEnded,
}

/// Why a hold that a call found gone was lost, when nothing else told
/// this client why (an evicted key of several, the others kept, reads as
/// a lease run out).
pub(crate) const GONE: &str = "redis says it is no longer this hold's (its lease ran out there, a \
                               force release freed it, or an eviction: see docs/failures.md)";

/// The error of `call`'s hold of its lock (named by its keys), granted
/// with `token`, found gone, for the reason `why`.
pub(crate) fn lease_lost(call: &Call, token: u64, why: &str) -> Error {
    let (what, token_word) = (call.describe(), call.keys.kind().token_word());
    let message = format!("{what} ({token_word} {token}) was no longer held: {why}");
    Error::new(ErrorKind::LeaseLost, message)
}

/// Why a hold told of a force release (its message, or a renewal's reply)
/// was lost.
pub(crate) const FORCE_RELEASED: &str =
    "a force release (Client::force_unlock, `fairlock unlock --force`) freed it";

/// Why a hold whose lease this client counted out was lost.
const RAN_OUT: &str = "its lease ran out before a renewal confirmed it (by this client's count: \
                       a stalled or unreachable redis, a paused process, or renewals too few \
                       replicas acknowledged: sync_replicas)";

/// Why a hold of a fixed lease, which is never renewed, was lost once
/// this client counted it out: no renewal was ever due, nor Redis at fault.
const FIXED_RAN_OUT: &str = "its lease ran out: a fixed lease, never renewed, that the hold \
                             outlasted (by this client's count)";

/// Why a hold was lost whose lease ran out after its maximum hold, when
/// the watchdog no longer renewed it: an end its owner asked for, not a
/// fault.
const PAST_MAX_HOLD: &str = "it reached its maximum hold (with_max_hold, `--max-hold`), after \
                             which its lease was not renewed and ran out";

/// Why a hold was lost whose release found the lock's keys gone while this
/// client still counted its lease (which, and a fence life after, the keys
/// outlive).
pub(crate) const KEYS_GONE: &str = "redis lost it: its keys were gone before its lease ran out (a \
                                    restart or a failover without its data, a flush, or an \
                                    eviction: see docs/failures.md)";

/// Why a hold found gone after the client's connection to Redis came back
/// from a gap was lost.
const SERVER_LOST_IT: &str = "redis lost it: it was gone when this client's connection to redis \
                              came back from a gap (a restart or a failover without its data)";

/// One acquisition of one lock: shared by the guard and its re-entrant
/// guards (same token), by the watchdog when the lease is renewed, and by
/// every lease signal taken from them.
pub(crate) struct Hold {
    /// The acquire call that made the hold: its release names it, and so
    /// does a semaphore's renewal (a mutex's renewal names only the owner).
    pub(crate) call: Call,
    /// Its fencing token: a reader-writer lock's upgrade or downgrade
    /// gives the same hold a new one ([`changed`](Self::changed)).
    token: AtomicU64,
    /// The token it was granted with: a revocation or a force release up
    /// to a token asks or frees it when this is up to it, whatever its
    /// access became since.
    pub(crate) first_token: u64,
    /// The units the hold takes now (a rwlock's write all of them, its
    /// upgradable read more than half, a read one): a thread re-enters a
    /// rwlock through its write hold when it has one, and is refused a
    /// write as the holder of its upgradable read when it has that.
    units: AtomicU32,
    /// An upgrade or downgrade of it is under way: a renewal that fails
    /// meanwhile may have named the token the change replaced, so it is
    /// not taken for a loss (the change's own reply says if the hold lives).
    changing: AtomicBool,
    /// Its metrics' labels (nothing without the `metrics` feature).
    pub(crate) labels: Labels,
    /// How many live guards stand for it (re-entries of a thread's hold
    /// share it), counted under the lock of the registry ([`Holds`]).
    guards: AtomicUsize,
    /// When this client got it (the acquire call's answer or wake-up): hold
    /// time counts from here to its last guard's release. (Its lease counts
    /// from earlier, a request sent before the grant.)
    granted_at: Instant,
    drift: ClockDrift,
    state: Mutex<HoldState>,
    /// Signalled when the hold ends (lost or released) or is revoked.
    changed: Condvar,
}

struct HoldState {
    /// When this client counts the lease as over: set by each renewal,
    /// counted from when it asked for its lease (before its request was
    /// sent), less the clock-drift allowance.
    expires_at: Instant,
    /// Never cleared: a hold that was lost stays lost even if a late
    /// renewal succeeds. Only a maximum hold reached may end later as lost
    /// or released.
    end: Option<LeaseEnd>,
    /// When the watchdog stops renewing it (`with_max_hold`), if ever.
    max_end: Option<Instant>,
    /// When the hold was lost (its local count's end, or when Redis said
    /// so) and why, as the first who knew said it.
    lost: Option<(Instant, &'static str)>,
    /// Someone asked the hold to let go (a revocation): never cleared.
    revoked: bool,
    /// When the client's connection to Redis came back from a gap while it
    /// was held, until a renewal sent after that confirms it: a loss found
    /// meanwhile is the server's (a restart, a failover).
    gap_at: Option<Instant>,
}

/// What a hold is made of: the grant an acquire call got, as this client
/// learned it.
pub(crate) struct NewHold {
    /// The acquire call that made it.
    pub(crate) call: Call,
    pub(crate) token: u64,
    pub(crate) labels: Labels,
    /// Its lease counts from here (the send time of a request that ran
    /// before the grant) and lasts `lease_left` by Redis's clock.
    pub(crate) since: Instant,
    pub(crate) lease_left: Duration,
    /// The watchdog stops renewing it this long after the grant, if set.
    pub(crate) max_hold: Option<Duration>,
}

impl Hold {
    /// The hold of `granted`, its lease counted locally less the `drift`
    /// allowance.
    pub(crate) fn new(granted: NewHold, drift: ClockDrift) -> Self {
        let granted_at = Instant::now();
        Hold {
            units: AtomicU32::new(granted.call.ask.units()),
            call: granted.call,
            token: AtomicU64::new(granted.token),
            first_token: granted.token,
            changing: AtomicBool::new(false),
            labels: granted.labels,
            guards: AtomicUsize::new(1),
            granted_at,
            drift,
            state: Mutex::new(HoldState {
                expires_at: drift.local_end(granted.since, granted.lease_left),
                end: None,
                max_end: granted.max_hold.and_then(|max| granted_at.checked_add(max)),
                lost: None,
                revoked: false,
                gap_at: None,
            }),
            changed: Condvar::new(),
        }
    }

    /// Its fencing token, as of its last change.
    pub(crate) fn token(&self) -> u64 {
        self.token.load(Ordering::Acquire)
    }

    /// A renewal of it as it is now (its token), asking for `lease`
    /// (`None`: the hold written again as it is, a check).
    pub(crate) fn renewal(&self, lease: Option<Duration>) -> Renew<'_> {
        Renew {
            owner: &self.call.owner,
            token: self.token(),
            first: self.first_token,
            call: self.call.id,
            lease,
        }
    }

    /// A change of its access (an upgrade, a downgrade) starts, and ends
    /// when what this returns is dropped: see
    /// [`renewal_answered`](Self::renewal_answered).
    pub(crate) fn changing(&self) -> Changing<'_> {
        self.changing.store(true, Ordering::Release);
        Changing(self)
    }

    /// Redis says the hold is now `token`, asking for `now`: its upgrade or
    /// downgrade went through. The lease, its end and its maximum hold
    /// stay the hold's, as Redis keeps its lease end.
    pub(crate) fn changed(&self, token: u64, now: Ask) {
        self.units.store(now.units(), Ordering::Release);
        self.token.store(token, Ordering::Release);
    }

    /// What a renewal of `token` asked at `asked` was told: asked to let
    /// go (said by the reply as well as by a message, so a lost message is
    /// made up for); still held, its lease counted anew for `lease`
    /// ([`renewed`](Self::renewed); `None`: not counted, as too few
    /// replicas acknowledged it and a failover could bring back the old
    /// expiry); gone (freed by a force release, as the lock's mark said;
    /// its keys gone), lost with the reply's reason, unless the hold
    /// changed since (its token is another) or a change is under way, which
    /// the renewal may have raced.
    pub(crate) fn renewal_answered(
        &self,
        token: u64,
        reply: RenewReply,
        asked: Instant,
        lease: Option<Duration>,
    ) {
        if reply == RenewReply::Revoked {
            self.mark_revoked();
        }
        match (reply.is_held(), lease) {
            (true, Some(lease)) => self.renewed(asked, lease),
            (true, None) => {}
            (false, _) if token != self.token() || self.changing.load(Ordering::Acquire) => {}
            (false, _) => {
                let gap = self.state.lock().gap_at.is_some();
                self.mark_lost(match reply {
                    RenewReply::ForceReleased => FORCE_RELEASED,
                    _ if gap => SERVER_LOST_IT,
                    RenewReply::Gone => KEYS_GONE,
                    _ => GONE,
                })
            }
        }
    }

    /// The hold's state, settled as of `now`: whoever looks first (a
    /// guard, a lease signal, the watchdog) finds a lease whose local count
    /// ran out lost from then on (why: its maximum hold, a fixed lease that
    /// is never renewed, or no renewal in time), and that loss is reported
    /// once, there; one past its maximum hold is no longer renewed. Either
    /// end wakes the threads waiting for it.
    fn settled(&self, now: Instant) -> MutexGuard<'_, HoldState> {
        let mut state = self.state.lock();
        if matches!(state.end, None | Some(LeaseEnd::MaxHold)) && now >= state.expires_at {
            state.end = Some(LeaseEnd::Lost);
            let capped = state.max_end.is_some_and(|end| end <= state.expires_at);
            let why = match (capped, self.call.lease.is_fixed()) {
                (true, _) => PAST_MAX_HOLD,
                (false, true) => FIXED_RAN_OUT,
                (false, false) => RAN_OUT,
            };
            state.lost = Some((state.expires_at, why));
            self.report_lost(why);
            self.changed.notify_all();
        } else if state.end.is_none() && state.max_end.is_some_and(|end| now >= end) {
            state.end = Some(LeaseEnd::MaxHold);
            self.changed.notify_all();
        }
        state
    }

    /// Whether the watchdog renews the hold: its lease is not fixed, and it
    /// is not past its maximum hold.
    pub(crate) fn is_renewable(&self) -> bool {
        let now = Instant::now();
        !self.call.lease.is_fixed() && self.settled(now).max_end.is_none_or(|end| now < end)
    }

    /// Whether the client's connection to Redis came back from a gap
    /// since the hold's last confirmed renewal, and the hold is not known
    /// to be over: the watchdog then checks it even when it does not renew
    /// it (a fixed lease, a maximum hold reached), so that a hold the
    /// server lost is told now, not when its lease would have run out.
    pub(crate) fn is_unconfirmed_after_gap(&self) -> bool {
        let state = self.settled(Instant::now());
        state.gap_at.is_some() && !matches!(state.end, Some(LeaseEnd::Lost | LeaseEnd::Released))
    }

    /// The lease a renewal asked at `asked` requests: `lease`, but no
    /// longer than this client needs to count it from `asked` up to the
    /// maximum hold (the drift allowance added), so the lock passes on when
    /// that is reached and the guard hears [`LeaseEnd::MaxHold`] just before
    /// its lease runs out. Its count ([`renewed`](Self::renewed)) must start
    /// at the same `asked`: counted from earlier (a connection opened in
    /// between), it would end before the maximum hold, heard as a loss.
    pub(crate) fn renewal_lease(&self, asked: Instant, lease: Duration) -> Duration {
        let max_end = self.state.lock().max_end;
        let left = max_end.map(|end| end.saturating_duration_since(asked));
        left.map_or(lease, |left| lease.min(self.drift.lease_lasting(left)))
    }

    /// When this client counts the lease as over, as of now.
    pub(crate) fn local_end(&self) -> Instant {
        self.state.lock().expires_at
    }

    /// The end of the lease as this client counts it
    /// ([`local_end`](Self::local_end)), when that count surely ends
    /// before Redis's (by the drift allowance): `None` once the hold is
    /// counted lost, or with a maximum hold, whose last renewal may cut the
    /// lease at Redis below an end counted before it.
    pub(crate) fn sure_end(&self) -> Option<Instant> {
        let state = self.settled(Instant::now());
        (state.end != Some(LeaseEnd::Lost) && state.max_end.is_none()).then_some(state.expires_at)
    }

    /// Lost when Redis said so, or when no renewal confirmed it in time.
    pub(crate) fn is_lost(&self) -> bool {
        self.end_as_of(Instant::now()) == Some(LeaseEnd::Lost)
    }

    /// How the hold ended, if it did by `now`.
    pub(crate) fn end_as_of(&self, now: Instant) -> Option<LeaseEnd> {
        self.settled(now).end
    }

    /// Redis said the lock is no longer this hold's; `why` (e.g. [`GONE`])
    /// for the log and for the error of a later call on the hold
    /// ([`lost`](Self::lost)).
    pub(crate) fn mark_lost(&self, why: &'static str) {
        // A lease this client counted out first was lost that way.
        let mut state = self.settled(Instant::now());
        if matches!(state.end, None | Some(LeaseEnd::MaxHold)) {
            state.end = Some(LeaseEnd::Lost);
            state.lost = Some((Instant::now(), why));
            self.report_lost(why);
        }
        drop(state);
        self.changed.notify_all();
    }

    /// Someone asked the hold to let go (a revocation's message, or a
    /// renewal's reply); said once, and kept.
    pub(crate) fn mark_revoked(&self) {
        if std::mem::replace(&mut self.state.lock().revoked, true) {
            return;
        }
        log::info!("fairlock: asked to let go of {}", self.named());
        self.changed.notify_all();
    }

    /// The client's connection to Redis came back from a gap while the
    /// hold was held (see [`SERVER_LOST_IT`]).
    pub(crate) fn note_gap(&self) {
        self.state.lock().gap_at = Some(Instant::now());
    }

    /// Marks the hold lost (`why`, when nothing told this client else) and
    /// returns the error of `call` (a guard's) finding it gone: why it was
    /// lost as far as this client knows, and whether it had been revoked
    /// before. Its release that found it gone leaves it `Released` (no
    /// loss was known before), its loss reported all the same.
    pub(crate) fn lost(&self, call: &Call, why: &'static str) -> Error {
        self.mark_lost(why);
        let mut state = self.settled(Instant::now());
        let (_, why) = *state.lost.get_or_insert_with(|| {
            self.report_lost(why);
            (Instant::now(), why)
        });
        let why = if state.revoked {
            format!("{why}; it had been revoked (asked to let go) before")
        } else {
            why.to_owned()
        };
        lease_lost(call, self.token(), &why)
    }

    /// Whether someone asked the hold to let go.
    pub(crate) fn is_revoked(&self) -> bool {
        self.state.lock().revoked
    }

    /// The last guard of the hold was released; a hold already lost stays
    /// lost.
    pub(crate) fn mark_released(&self) {
        let mut state = self.settled(Instant::now());
        if matches!(state.end, None | Some(LeaseEnd::MaxHold)) {
            state.end = Some(LeaseEnd::Released);
        }
        drop(state);
        observe::hold_ended(&self.labels, self.granted_at.elapsed());
        self.changed.notify_all();
    }

    /// Logs (warn, with the lock's key, which ends with its name, and the
    /// owner) and counts the loss of this hold's lease: once per hold.
    fn report_lost(&self, why: &str) {
        observe::lease_lost(&self.labels);
        log::warn!("fairlock: lease lost on {}: {why}", self.named());
    }

    /// The hold as a log line names it: its lock's key (which ends with
    /// the lock's name), its owner and its token.
    fn named(&self) -> String {
        let (key, owner, token) = (self.call.keys.lock(), &self.call.owner, self.token());
        format!("{key:?} (owner {owner}, token {token})")
    }

    /// A renewal asked at `asked` (its request went out after) succeeded
    /// for `lease`: the server set the lease to `lease` from when it ran,
    /// shorter too (the last renewal before a maximum hold asks only for
    /// what is left of it), and it is counted so, from `asked`. One asked
    /// after the lease had already run out by this client's count does not
    /// revive it. (A check of a hold the watchdog does not renew succeeds
    /// for a `lease` of zero: it sets nothing.)
    pub(crate) fn renewed(&self, asked: Instant, lease: Duration) {
        let mut state = self.settled(asked);
        // The server still had it after the gap: not lost with a restart.
        state.gap_at = state.gap_at.filter(|&gap| asked < gap);
        if state.end.is_some() || lease.is_zero() {
            return;
        }
        let end = self.drift.local_end(asked, lease);
        if end < state.expires_at {
            // Sooner than a waiter may sleep to: it counts again.
            self.changed.notify_all();
        }
        state.expires_at = end;
    }

    /// Blocks until the hold ends or `deadline` passes (`None`: no limit);
    /// returns the end, or `None` at the deadline. A lease whose local
    /// count runs out wakes the caller at that moment. The end is the first
    /// that came while it waited: a maximum hold reached before the lease
    /// ran out is reported as such even to a waiter woken after both (the
    /// lease is capped at the maximum hold, so the two are moments apart,
    /// and a busy machine may wake a waiter later than that).
    pub(crate) fn wait_end(&self, deadline: Option<Instant>) -> Option<LeaseEnd> {
        let started = Instant::now();
        self.wait_for(deadline, |state| {
            let max_hold_first = state.max_end.is_some_and(|max_end| {
                started < max_end && state.lost.is_some_and(|(lost_at, _)| max_end <= lost_at)
            });
            match state.end? {
                LeaseEnd::Lost if max_hold_first => Some(LeaseEnd::MaxHold),
                end => Some(end),
            }
        })
    }

    /// Blocks until the hold is asked to let go (`Requested`), ends without
    /// being asked (lost or released: `HoldEnded`; a maximum hold reached
    /// is no end here, the hold may still be asked), or `deadline` passes
    /// (`None`: no limit).
    pub(crate) fn wait_revoked(&self, deadline: Option<Instant>) -> Option<Revocation> {
        self.wait_for(deadline, |state| match state.end {
            _ if state.revoked => Some(Revocation::Requested),
            Some(LeaseEnd::Lost | LeaseEnd::Released) => Some(Revocation::HoldEnded),
            _ => None,
        })
    }

    /// Blocks until `look` finds what it waits for in the settled state,
    /// or `deadline` passes (`None`); every change of the hold (an end, a
    /// revocation) and its local end of the lease wake it to look again.
    fn wait_for<T>(
        &self,
        deadline: Option<Instant>,
        look: impl Fn(&HoldState) -> Option<T>,
    ) -> Option<T> {
        loop {
            let now = Instant::now();
            let mut state = self.settled(now);
            if let Some(found) = look(&state) {
                return Some(found);
            }
            if deadline.is_some_and(|d| now >= d) {
                return None;
            }
            // The next moment `settled` may change the end.
            let next = match (state.end, state.max_end) {
                (None, Some(max_end)) => max_end.min(state.expires_at),
                _ => state.expires_at,
            };
            let wake_at = deadline.map_or(next, |d| d.min(next));
            self.changed.wait_until(&mut state, wake_at);
        }
    }
}

/// A change of a hold's access under way ([`Hold::changing`]): renewals
/// that fail meanwhile may have named the token it replaces.
pub(crate) struct Changing<'h>(&'h Hold);

impl Drop for Changing<'_> {
    fn drop(&mut self) {
        self.0.changing.store(false, Ordering::Release);
    }
}

/// The holds of one client that have live guards, by lock key. They are
/// what the watchdog renews, and the only holds a thread may re-enter: a
/// hold in Redis with no live guard here is an orphan (see acquire.lua).
#[derive(Default)]
pub(crate) struct Holds {
    by_lock: Mutex<HashMap<Arc<str>, Vec<Arc<Hold>>, FxBuildHasher>>,
}

impl Holds {
    /// Registers a guard on `hold`; a re-entrant guard joins the existing
    /// hold of the same lock and token.
    pub(crate) fn register(&self, hold: Hold) -> Arc<Hold> {
        let mut by_lock = self.by_lock.lock();
        let holds = by_lock.entry(Arc::clone(&hold.call.keys.lock)).or_default();
        if let Some(known) = holds.iter().find(|h| h.token() == hold.token()) {
            known.guards.fetch_add(1, Ordering::Relaxed);
            return Arc::clone(known);
        }
        let hold = Arc::new(hold);
        observe::hold_began(&hold.labels);
        holds.push(Arc::clone(&hold));
        hold
    }

    /// Drops one guard's registration; the watchdog stops renewing the hold
    /// once its last guard is gone.
    pub(crate) fn unregister(&self, hold: &Hold) {
        let mut by_lock = self.by_lock.lock();
        let Some(holds) = by_lock.get_mut(hold.call.keys.lock()) else {
            return;
        };
        if let Some(at) = holds.iter().position(|h| h.token() == hold.token()) {
            if holds[at].guards.fetch_sub(1, Ordering::Relaxed) == 1 {
                holds.swap_remove(at).mark_released();
            }
        }
        if holds.is_empty() {
            by_lock.remove(hold.call.keys.lock());
        }
    }

    /// How many holds of `lock_key` by `owner` have live guards (an
    /// upgrade of a thread that holds others would wait for itself), and
    /// the token of its newest exclusive one, else of its newest
    /// upgradable read, else of its newest shared one, else 0 (no token is
    /// 0), but a mutex's counted lost (re-entered,
    /// it would be returned lost; Redis gives it back instead): a rwlock's
    /// write in write and read in write re-enter through the write hold
    /// (each re-entry a hold of its own, which a thread whose hold was
    /// counted lost gets rather than waiting for itself); a write asked
    /// over reads only names a read, which the script refuses (over an
    /// upgradable read and reads, the upgradable read: the refusal says to
    /// upgrade it). A rwlock's
    /// hold counted lost is named only when the thread has no other: Redis
    /// may have lost it (a restart), and the script ignores a token it
    /// does not find, so a write asked beside a lost write and a live read
    /// would queue behind that read, the thread waiting for itself; named,
    /// the read has the script refuse it.
    pub(crate) fn held_by(&self, lock_key: &str, owner: &str) -> (usize, u64) {
        let by_lock = self.by_lock.lock();
        let own = (by_lock.get(lock_key).into_iter().flatten()).filter(|h| *h.call.owner == *owner);
        let newest = (own.clone())
            .filter(|h| h.call.ask != Ask::Mutex || !h.is_lost())
            .map(|h| (!h.is_lost(), h.units.load(Ordering::Acquire), h.token()))
            .max();
        (own.count(), newest.map_or(0, |(_, _, token)| token))
    }

    /// Runs `tell` on this client's holds of `lock_key` granted with tokens
    /// up to `up_to` (a revocation's or a force release's message: later
    /// holds are not the ones it speaks of, whatever token a change of
    /// access gave one since), outside the registry's lock.
    pub(crate) fn each_up_to(&self, lock_key: &str, up_to: u64, tell: impl Fn(&Hold)) {
        let told = self.all(|h| h.call.keys.lock() == lock_key && h.first_token <= up_to);
        told.iter().for_each(|hold| tell(hold));
    }

    /// Tells every hold with live guards that the client's connection to
    /// Redis came back from a gap ([`Hold::note_gap`]).
    pub(crate) fn note_gap(&self) {
        self.all(|_| true).iter().for_each(|hold| hold.note_gap());
    }

    /// Every hold to renew now, and every other one to check after a gap
    /// ([`Hold::is_unconfirmed_after_gap`]).
    pub(crate) fn snapshot(&self) -> Vec<Arc<Hold>> {
        // A hold counted lost is still renewed while its guard lives:
        // Redis may still have it (a renewal too few replicas saw, a
        // partition that healed in time), and its owner may still be
        // stopping; the guard's release frees it.
        self.all(|h| h.is_renewable() || h.is_unconfirmed_after_gap())
    }

    /// Every hold with live guards that `keep` keeps, taken out of the
    /// registry's lock.
    fn all(&self, keep: impl Fn(&Hold) -> bool) -> Vec<Arc<Hold>> {
        let by_lock = self.by_lock.lock();
        let kept = by_lock.values().flatten().filter(|r| keep(r));
        kept.cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hold granted now for `lease_ms` with no clock-drift allowance,
    /// renewed for at most `max_hold_ms` if set.
    fn hold(lease_ms: u64, max_hold_ms: Option<u64>) -> Arc<Hold> {
        let call = crate::machinery::test_call(1, "n");
        let granted = NewHold {
            labels: Labels::new(call.keys.kind(), None),
            call,
            token: 5,
            since: Instant::now(),
            lease_left: Duration::from_millis(lease_ms),
            max_hold: max_hold_ms.map(Duration::from_millis),
        };
        Arc::new(Hold::new(granted, NO_DRIFT))
    }

    /// A thread blocked on `h` until it ends.
    fn end_in_thread(h: &Arc<Hold>) -> std::thread::JoinHandle<Option<LeaseEnd>> {
        let h = Arc::clone(h);
        std::thread::spawn(move || h.wait_end(None))
    }

    const NO_DRIFT: ClockDrift = ClockDrift {
        rate: 0.0,
        margin: Duration::ZERO,
    };

    #[test]
    fn the_local_end_comes_the_drift_allowance_before_the_lease() {
        let since = Instant::now();
        let drift = ClockDrift::default();
        let end = drift.local_end(since, Duration::from_secs(10));
        assert_eq!(end, since + Duration::from_millis(10_000 - 100 - 2));
        // An allowance larger than the lease: over at once, never before `since`.
        let tiny = drift.local_end(since, Duration::from_millis(1));
        assert_eq!(tiny, since);
    }

    #[test]
    fn a_waiter_woken_after_both_ends_hears_the_max_hold_that_came_first() {
        // The lease (300 ms) is capped 100 ms after the maximum hold (200
        // ms), as the watchdog's renewals cap it; the waiter's thread is
        // held off (the state's lock taken) until both have passed. It
        // must start its wait before the maximum hold: 200 ms for a busy
        // machine to start a thread (40 ms once did not do).
        let h = hold(300, Some(200));
        let busy = h.state.lock();
        let waiter = end_in_thread(&h);
        std::thread::sleep(Duration::from_millis(500));
        drop(busy);
        assert_eq!(waiter.join().unwrap(), Some(LeaseEnd::MaxHold));
        // A look after both ends is told the truth: the lease ran out.
        assert_eq!(h.end_as_of(Instant::now()), Some(LeaseEnd::Lost));
        assert_eq!(h.wait_end(None), Some(LeaseEnd::Lost));
    }

    #[test]
    fn a_max_hold_does_not_end_a_wait_for_a_revocation_and_the_holds_end_does() {
        let capped = hold(60_000, Some(1));
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(capped.end_as_of(Instant::now()), Some(LeaseEnd::MaxHold));
        assert_eq!(capped.wait_revoked(Some(Instant::now())), None);
        capped.mark_released();
        assert_eq!(capped.wait_revoked(None), Some(Revocation::HoldEnded));
    }

    #[test]
    fn a_renewal_capped_by_the_max_hold_shortens_the_count() {
        // Granted for 1 000 ms with a maximum hold of 900: a renewal asks
        // the server for what is left of the 900 and it ends the lease
        // then, so the count does too (it kept the grant's 1 000 ms, a hold
        // the server had passed on still counted as held), and no sooner,
        // however late after its ask the request goes out (counted from
        // before the ask, it ended before the maximum hold: heard as a
        // loss, `fairlock run --max-hold` let its command run on).
        let h = hold(1_000, Some(900));
        let max_end = h.state.lock().max_end.unwrap();
        let asked = Instant::now();
        let lease = h.renewal_lease(asked, Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20)); // its connection opens
        h.renewed(asked, lease);
        let end = h.local_end();
        assert!(end >= max_end && end < max_end + Duration::from_millis(5));
        // A check (no lease asked) leaves the count as it was.
        h.renewed(Instant::now(), Duration::ZERO);
        assert_eq!(h.local_end(), end);
    }

    #[test]
    fn a_renewal_that_shortens_the_count_wakes_its_waiters_to_it() {
        let h = hold(2_000, None);
        let waiter = end_in_thread(&h);
        std::thread::sleep(Duration::from_millis(50));
        let asked = Instant::now();
        h.renewed(asked, Duration::from_millis(100));
        assert_eq!(waiter.join().unwrap(), Some(LeaseEnd::Lost));
        let woken = asked.elapsed();
        assert!(woken < Duration::from_secs(1), "woken {woken:?} after");
    }

    #[test]
    fn a_renewal_in_time_pushes_the_end_out() {
        let h = hold(200, None);
        h.renewed(Instant::now(), Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(250));
        assert!(!h.is_lost());
        let soon = Instant::now() + Duration::from_millis(5);
        assert_eq!(h.wait_end(Some(soon)), None);
    }

    #[test]
    fn the_first_end_stays_after_a_late_renewal_or_a_late_loss() {
        let h = hold(20, None);
        std::thread::sleep(Duration::from_millis(30));
        // Sent after the local end: it does not revive the hold.
        h.renewed(Instant::now(), Duration::from_secs(60));
        assert!(h.is_lost());
        assert_eq!(h.wait_end(Some(Instant::now())), Some(LeaseEnd::Lost));
        // A release reply saying NotHeld, after the fact: still released.
        let released = hold(60_000, None);
        released.mark_released();
        released.mark_lost("a test");
        assert_eq!(released.end_as_of(Instant::now()), Some(LeaseEnd::Released));
    }
}
