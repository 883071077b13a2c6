//! The mutex engine's model (a mutex's, and an election's on keys of its
//! own): at most one hold, of one owner, counting the acquire calls in it;
//! a FIFO queue of calls with liveness deadlines; the last token; the call
//! that last freed the lock (so a repeat of it answers as the first); a
//! revocation asking holds up to a token to let go. Time is server time in
//! ms. A hold is live until its lease end (exclusive), a waiter while its
//! deadline has not passed (inclusive), as the docs promise; dead waiters
//! may be dropped at any time (the model keeps them until the server is
//! seen without them), live ones never.
//!
//! Each operation checks the real reply against what the model allows
//! and takes from it what the model leaves open: a fresh token (any
//! larger than every token issued before), a queue position (between the
//! live waiters ahead and all those not yet dropped).

use fairlock::__test_support::{
    AbandonReply, AcquireReply, CancelReply, Freed, HandedOver, HeartbeatReply, Mode, ReleaseReply,
    RenewReply, Revoked, WaiterStatus,
};

use super::explore::{fail, sync_queue, Check, Machine, Waiter};
use super::server::Seen;
use super::step::Call;

#[derive(Debug, Clone)]
struct Hold {
    owner: String,
    calls: Vec<u64>,
    /// 0 while a grant's token is not seen yet (a handoff no reply tells).
    token: u64,
    end: i64,
}

#[derive(Debug, Default)]
pub struct Model {
    hold: Option<Hold>,
    queue: Vec<Waiter>,
    /// The largest token issued.
    pub last: u64,
    /// Whether the lock key is there (it keeps the last token and mark).
    key: bool,
    /// The call that last freed the lock and its detail.
    mark: (String, String),
    /// The hold the lock key names as of the last step, run out or not:
    /// its token and owner.
    named: Option<(u64, String)>,
    /// The last force release's call key and the holder it freed.
    forced: Option<(String, Option<String>)>,
    revoked: Option<u64>,
    /// A dead waiter that asked again this step: the server may have kept
    /// its place (not dropped yet) or queued it anew at the tail.
    revived: Option<String>,
    /// An election's history as the model has it, newest first, and the
    /// changes of this step, told once their tokens are known.
    history: Vec<String>,
    changes: Vec<Change>,
}

/// A change an election announces: a hold taken (after the last token
/// `last`), or the hold of a token ended with nobody to hand it to.
#[derive(Debug)]
enum Change {
    Took { last: u64 },
    Resigned(u64),
}

impl Model {
    fn live_hold(&mut self, now: i64) -> Option<&mut Hold> {
        if self.hold.as_ref().is_some_and(|h| h.end <= now) {
            self.hold = None;
        }
        self.hold.as_mut()
    }

    /// The token of a hold handed over while the step ran, checked fresh.
    fn adopt(&mut self, token: u64) -> Result<u64, String> {
        let Some(hold) = self.hold.as_mut() else {
            return fail(format!("a token {token} for no hold"));
        };
        if hold.token == 0 {
            if token <= self.last {
                return fail(format!("token {token} after {} was issued", self.last));
            }
            hold.token = token;
            self.last = token;
        } else if hold.token != token {
            return fail(format!("token {token}, the hold's is {}", hold.token));
        }
        Ok(token)
    }

    /// A new hold of `call` (token to come) for `ttl` ms.
    fn take(&mut self, call: &Call, ttl: i64, now: i64) {
        let last = if self.key { self.last } else { 0 };
        self.changes.push(Change::Took { last });
        self.hold = Some(Hold {
            owner: call.owner(),
            calls: vec![call.id],
            token: 0,
            end: now + ttl,
        });
        self.key = true;
    }

    /// The first live waiter takes the free lock; dead ones ahead go.
    fn hand_over(&mut self, now: i64) -> Option<Call> {
        while !self.queue.is_empty() {
            let w = self.queue.remove(0);
            if w.deadline >= now {
                let ttl = if w.call.fixed() {
                    w.call.lease()
                } else {
                    w.call.lease().min(w.deadline - now).max(1)
                };
                self.take(&w.call, ttl, now);
                return Some(w.call);
            }
        }
        None
    }

    fn free(&mut self, now: i64, mark: Option<(String, String)>) -> Option<Call> {
        let token = self.hold.take().map_or(0, |h| h.token);
        if let Some(mark) = mark {
            self.mark = mark;
            self.revoked = None;
        }
        self.key = true;
        let next = self.hand_over(now);
        if next.is_none() {
            self.changes.push(Change::Resigned(token));
        }
        next
    }

    fn index(&self, call: &Call) -> Option<usize> {
        self.queue.iter().position(|w| w.call == *call)
    }

    /// Positions the server may answer for the waiter at `i`.
    fn positions(&self, i: usize, now: i64) -> (u64, u64) {
        let live = self.queue[..i].iter().filter(|w| w.deadline >= now).count();
        (live as u64, i as u64)
    }

    fn join(&mut self, call: &Call, timeout: i64, now: i64) -> (u64, u64) {
        let i = self.index(call).unwrap_or_else(|| {
            self.queue.push(Waiter {
                call: call.clone(),
                deadline: 0,
            });
            self.queue.len() - 1
        });
        let dead = self.queue[i].deadline < now;
        self.queue[i].deadline = now + timeout;
        let (lo, hi) = self.positions(i, now);
        if !dead {
            return (lo, hi);
        }
        let w = self.queue.remove(i);
        self.queue.push(w);
        self.revived = Some(call.entry());
        (lo, self.queue.len() as u64 - 1)
    }

    fn extend(hold: &mut Hold, lease: i64, now: i64) -> i64 {
        if hold.end - now < lease {
            hold.end = now + lease;
        }
        hold.end - now
    }

    fn prune(&mut self, now: i64) {
        self.queue.retain(|w| w.deadline >= now);
    }

    fn do_acquire(
        &mut self,
        call: &Call,
        mode: Mode,
        guard: u64,
        timeout: i64,
        now: i64,
        got: &AcquireReply,
    ) -> Check {
        let owner = call.owner();
        let lease = call.lease();
        let mut left_token = None;
        if let Some(hold) = self.live_hold(now) {
            if hold.owner != owner {
                let (left, token) = (hold.end - now, hold.token);
                return self.wait(call, mode, timeout, now, left, token, got);
            }
            if hold.calls.contains(&call.id) {
                let left = if mode == Mode::Poll && !call.fixed() {
                    Self::extend(hold, lease, now)
                } else {
                    hold.end - now
                };
                let token = hold.token;
                return expect(
                    got,
                    &AcquireReply::Acquired {
                        token,
                        pttl_ms: left,
                        in_force: None,
                    },
                );
            }
            if guard == hold.token {
                // A re-entry joins the hold, its lease as it is.
                hold.calls.push(call.id);
                let (left, token) = (hold.end - now, hold.token);
                return expect(
                    got,
                    &AcquireReply::Acquired {
                        token,
                        pttl_ms: left,
                        in_force: None,
                    },
                );
            }
            // An orphaned hold of this owner: freed for the queue first.
            self.free(now, None);
            if let Some(hold) = self.hold.clone() {
                left_token = Some((hold.end - now, hold.token));
            }
        }
        if let Some((left, token)) = left_token {
            return self.wait(call, mode, timeout, now, left, token, got);
        }
        while self.queue.first().is_some_and(|w| w.deadline < now) {
            self.queue.remove(0);
        }
        if self.queue.first().is_none_or(|w| w.call == *call) {
            if !self.queue.is_empty() {
                self.queue.remove(0);
            }
            self.take(call, lease, now);
            let AcquireReply::Acquired { token, pttl_ms, .. } = *got else {
                return fail(format!("expected a take, got {got:?}"));
            };
            self.adopt(token)?;
            return check(pttl_ms == lease, || format!("lease {pttl_ms}, not {lease}"));
        }
        self.hand_over(now);
        let hold = self.hold.clone().unwrap();
        self.wait(call, mode, timeout, now, hold.end - now, hold.token, got)
    }

    #[allow(clippy::too_many_arguments)]
    fn wait(
        &mut self,
        call: &Call,
        mode: Mode,
        timeout: i64,
        now: i64,
        left: i64,
        token: u64,
        got: &AcquireReply,
    ) -> Check {
        let token = match (got, token) {
            (AcquireReply::Waiting { last_token, .. }, 0) => self.adopt(*last_token)?,
            _ => token,
        };
        let AcquireReply::Waiting {
            pttl_ms,
            position,
            last_token,
            ..
        } = *got
        else {
            return fail(format!("expected to wait, got {got:?}"));
        };
        check(pttl_ms == left && last_token == token, || {
            format!("expected to wait with {left} ms and last token {token}")
        })?;
        if mode == Mode::Try {
            return check(position.is_none(), || "a try queued".into());
        }
        let (lo, hi) = self.join(call, timeout, now);
        check(position.is_some_and(|p| (lo..=hi).contains(&p)), || {
            format!("position not in {lo}..={hi}")
        })
    }

    fn do_release(&mut self, call: &Call, token: u64, now: i64, got: &ReleaseReply) -> Check {
        let owner = call.owner();
        let Some(hold) = self.live_hold(now) else {
            return self.not_held(call, got);
        };
        if hold.owner != owner || hold.token != token {
            return self.not_held(call, got);
        }
        let Some(i) = hold.calls.iter().position(|c| *c == call.id) else {
            let left = hold.calls.len() as u32;
            return expect(got, &ReleaseReply::Released { left });
        };
        hold.calls.remove(i);
        if !hold.calls.is_empty() {
            let left = hold.calls.len() as u32;
            return expect(got, &ReleaseReply::Released { left });
        }
        match self.free(now, Some((format!("{owner}#{}", call.id), String::new()))) {
            None => expect(got, &ReleaseReply::Released { left: 0 }),
            Some(next) => {
                let ReleaseReply::HandedOver(grants) = got else {
                    return fail(format!("expected a handoff to {next:?}"));
                };
                let [grant] = grants.as_slice() else {
                    return fail("one grant".into());
                };
                self.grant(&next, grant, now)
            }
        }
    }

    fn grant(&mut self, next: &Call, grant: &HandedOver, now: i64) -> Check {
        self.adopt(grant.token)?;
        let hold = self.hold.as_ref().unwrap();
        check(
            grant.owner == next.owner()
                && grant.call == next.id
                && grant.ttl_ms as i64 == hold.end - now,
            || format!("a grant to {next:?} for {} ms", hold.end - now),
        )
    }

    fn not_held(&self, call: &Call, got: &ReleaseReply) -> Check {
        if self.key && self.mark.0 == format!("{}#{}", call.owner(), call.id) {
            return expect(got, &ReleaseReply::Released { left: 0 });
        }
        expect(
            got,
            &if self.key {
                ReleaseReply::NotHeld
            } else {
                ReleaseReply::Gone
            },
        )
    }

    fn do_renew(
        &mut self,
        call: &Call,
        token: u64,
        lease: Option<i64>,
        now: i64,
        got: &RenewReply,
    ) -> Check {
        let revoked = self.revoked;
        let owner = call.owner();
        // Unless the key names this hold (live or run out), its mark may
        // say a force release freed this owner's hold.
        let named = self
            .named
            .as_ref()
            .is_some_and(|(t, o)| *t == token && *o == owner);
        let forced = self.key && self.mark.0.starts_with('F') && self.mark.1 == owner;
        let key = self.key;
        match self.live_hold(now) {
            Some(hold) if hold.owner == owner && hold.token == token => {
                if let Some(lease) = lease {
                    hold.end = now + lease;
                }
                if revoked.is_some_and(|r| r >= token) {
                    expect(got, &RenewReply::Revoked)
                } else {
                    expect(got, &RenewReply::Renewed)
                }
            }
            _ if forced && !named => expect(got, &RenewReply::ForceReleased),
            _ if !key => expect(got, &RenewReply::Gone),
            _ => expect(got, &RenewReply::Lost),
        }
    }

    fn do_heartbeat(
        &mut self,
        calls: &[Call],
        timeout: i64,
        now: i64,
        got: &HeartbeatReply,
    ) -> Check {
        self.prune(now);
        if self.live_hold(now).is_none() {
            self.hand_over(now);
        }
        if let Some(hold) = &self.hold {
            if hold.token == 0 {
                self.adopt(got.last_token)?;
            }
        }
        let last = if self.key { self.last } else { 0 };
        let mut statuses = Vec::new();
        for call in calls {
            if let Some(i) = self.index(call) {
                self.queue[i].deadline = now + timeout;
                statuses.push(WaiterStatus::Queued(i as u64));
                continue;
            }
            match self.hold.as_mut() {
                Some(hold) if hold.owner == call.owner() && hold.calls.contains(&call.id) => {
                    // Only the call that made the hold: a re-entry's joins it.
                    if !call.fixed() && hold.calls[0] == call.id {
                        Self::extend(hold, call.lease(), now);
                    }
                    statuses.push(WaiterStatus::Owns(hold.token));
                }
                _ => statuses.push(WaiterStatus::Gone),
            }
        }
        let pttl_ms = self.hold.as_ref().map_or(-2, |h| h.end - now);
        expect(
            got,
            &HeartbeatReply {
                pttl_ms,
                last_token: last,
                statuses,
            },
        )
    }

    /// A waiter leaves (a cancel or an abandon): dead ones go with it, a
    /// free lock goes to the next live waiter.
    fn leave(&mut self, call: &Call, now: i64) -> Check {
        if let Some(i) = self.index(call) {
            self.queue.remove(i);
        }
        self.prune(now);
        if self.live_hold(now).is_none() {
            self.hand_over(now);
        }
        Ok(())
    }

    /// A waiter leaves; a hold handed to it meanwhile is given back as its
    /// abandon gives it back (nobody takes it: the leave may come late).
    fn do_cancel(&mut self, call: &Call, now: i64, got: &CancelReply) -> Check {
        if let Some(hold) = self.live_hold(now) {
            if hold.owner == call.owner() && hold.calls.contains(&call.id) {
                self.do_abandon(call, now, &AbandonReply::Released)?;
                return expect(got, &CancelReply::GivenBack);
            }
        }
        self.leave(call, now)?;
        expect(got, &CancelReply::Left)
    }

    fn do_abandon(&mut self, call: &Call, now: i64, got: &AbandonReply) -> Check {
        if let Some(hold) = self.live_hold(now) {
            if hold.owner == call.owner() {
                if let Some(i) = hold.calls.iter().position(|c| *c == call.id) {
                    hold.calls.remove(i);
                    if hold.calls.is_empty() {
                        let mark = (format!("{}#{}", call.owner(), call.id), String::new());
                        self.free(now, Some(mark));
                    }
                    return expect(got, &AbandonReply::Released);
                }
            }
        }
        if self.index(call).is_some() {
            self.leave(call, now)?;
            return expect(got, &AbandonReply::LeftQueue);
        }
        expect(got, &AbandonReply::Nothing)
    }

    fn do_force_release(&mut self, key: &str, now: i64, got: &Freed) -> Check {
        if let Some((_, holder)) = self.forced.as_ref().filter(|(k, _)| k == key) {
            let holder = holder.clone();
            let holds = u64::from(holder.is_some());
            return expect(got, &Freed { holds, holder });
        }
        let holder = self.live_hold(now).map(|h| h.owner.clone());
        self.forced = Some((key.to_owned(), holder.clone()));
        let seen = format!("F{key}");
        match holder {
            None => {
                self.mark = (seen, String::new());
                self.revoked = None;
                // A lease run out goes on to the next live waiter.
                if self.key {
                    self.hand_over(now);
                }
                self.key = true;
                expect(
                    got,
                    &Freed {
                        holds: 0,
                        holder: None,
                    },
                )
            }
            Some(owner) => {
                self.free(now, Some((seen, owner.clone())));
                expect(
                    got,
                    &Freed {
                        holds: 1,
                        holder: Some(owner),
                    },
                )
            }
        }
    }

    fn do_revoke(&mut self, now: i64, got: &Revoked) -> Check {
        match self.live_hold(now).map(|h| h.token) {
            None => expect(got, &Revoked { holds: 0, up_to: 0 }),
            Some(token) => {
                self.revoked = Some(token);
                expect(
                    got,
                    &Revoked {
                        holds: 1,
                        up_to: token,
                    },
                )
            }
        }
    }

    /// After a step: the keys hold what the model says (a fresh token
    /// a handoff issued taken from them), and every key has a TTL.
    fn do_sync(&mut self, seen: &Seen, now: i64) -> Check {
        if let Some((key, _)) = seen.ttls.iter().find(|(_, ttl)| *ttl == -1) {
            return fail(format!("{key} has no TTL"));
        }
        self.key = seen.lock.is_some();
        self.named = None;
        if !self.key {
            self.mark = Default::default();
            self.revoked = None;
        }
        if seen.forced != self.forced.is_some() {
            if seen.forced {
                return fail("a force release's record the model has none of".into());
            }
            // Its fence life is over.
            self.forced = None;
        }
        if let Some((key, ttl)) = seen.ttls.iter().find(|(k, ttl)| {
            self.key && k.contains("forced:") && *ttl > seen.lock_pttl && seen.lock_pttl != -1
        }) {
            return fail(format!("{key} lives {ttl} ms, past the lock key's"));
        }
        let held = seen.lock.as_deref().and_then(|v| {
            // "v<format> <token> <owner>#<calls> [+]<fence ms> <mark>"
            let parts: Vec<&str> = v.split(' ').collect();
            let (owner, calls) = parts.get(2)?.rsplit_once('#')?;
            let fence: i64 = parts.get(3)?.trim_start_matches('+').parse().ok()?;
            self.named = Some((parts[1].parse().unwrap(), owner.to_owned()));
            (seen.lock_pttl > fence).then(|| {
                (
                    parts[1].parse::<u64>().unwrap(),
                    owner.to_owned(),
                    calls.to_owned(),
                    now + seen.lock_pttl - fence,
                )
            })
        });
        match (self.live_hold(now).cloned(), held) {
            (None, None) => {}
            (Some(h), Some((token, owner, calls, end))) => {
                let mine = h
                    .calls
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(",");
                if h.owner != owner || mine != calls || h.end != end {
                    return fail(format!(
                        "the model holds {h:?}, the server {owner} {calls} until {end}"
                    ));
                }
                self.adopt(token)?;
            }
            (h, seen_hold) => {
                return fail(format!("the model holds {h:?}, the server {seen_hold:?}"))
            }
        }
        sync_queue(&mut self.queue, self.revived.take(), seen, now)?;
        self.announced(seen)
    }

    /// An election's history: each change of this step, in order, ahead
    /// of the ones before (the newest 16).
    fn announced(&mut self, seen: &Seen) -> Check {
        if self.changes.is_empty() && seen.history.as_ref().is_some_and(Vec::is_empty) {
            // Its fence life after the last change ran out.
            self.history.clear();
        }
        for change in std::mem::take(&mut self.changes) {
            let told = match change {
                Change::Resigned(token) => format!("{token} resigned {token}"),
                Change::Took { last } => {
                    let hold = self.hold.as_ref().unwrap();
                    format!("{last} {}  {}", hold.token, hold.owner)
                }
            };
            self.history.insert(0, told);
        }
        self.history.truncate(16);
        match &seen.history {
            Some(history) if *history != self.history => fail(format!(
                "the history is {history:?}, the model's {:?}",
                self.history
            )),
            _ => Ok(()),
        }
    }
}

impl Machine for Model {
    fn acquire(
        &mut self,
        call: &Call,
        mode: Mode,
        guard: u64,
        timeout: i64,
        now: i64,
        got: &AcquireReply,
    ) -> Check {
        self.do_acquire(call, mode, guard, timeout, now, got)
    }
    fn release(&mut self, call: &Call, token: u64, now: i64, got: &ReleaseReply) -> Check {
        self.do_release(call, token, now, got)
    }
    fn renew(
        &mut self,
        call: &Call,
        token: u64,
        lease: Option<i64>,
        now: i64,
        got: &RenewReply,
    ) -> Check {
        self.do_renew(call, token, lease, now, got)
    }
    fn heartbeat(&mut self, calls: &[Call], timeout: i64, now: i64, got: &HeartbeatReply) -> Check {
        self.do_heartbeat(calls, timeout, now, got)
    }
    fn cancel(&mut self, call: &Call, now: i64, got: &CancelReply) -> Check {
        self.do_cancel(call, now, got)
    }
    fn abandon(&mut self, call: &Call, now: i64, got: &AbandonReply) -> Check {
        self.do_abandon(call, now, got)
    }
    fn force_release(&mut self, key: &str, now: i64, got: &Freed) -> Check {
        self.do_force_release(key, now, got)
    }
    fn revoke(&mut self, now: i64, got: &Revoked) -> Check {
        self.do_revoke(now, got)
    }
    fn sync(&mut self, seen: &Seen, now: i64) -> Check {
        self.do_sync(seen, now)
    }

    fn held_token(&mut self, call: &Call, now: i64) -> u64 {
        match self.live_hold(now) {
            Some(h) if h.owner == call.owner() => h.token,
            _ => 0,
        }
    }

    fn vouches(&self, call: &Call, token: u64, now: i64) -> bool {
        self.hold.as_ref().is_some_and(|h| {
            h.owner == call.owner() && h.token == token && h.calls == [call.id] && h.end > now + 1
        })
    }

    fn last(&self) -> u64 {
        self.last
    }

    fn ends(&self) -> Vec<i64> {
        let mut out: Vec<i64> = self.queue.iter().map(|w| w.deadline).collect();
        out.extend(self.hold.iter().map(|h| h.end));
        out
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn empty(&mut self, now: i64) -> bool {
        self.live_hold(now).is_none() && self.queue.iter().all(|w| w.deadline < now)
    }
}

fn expect<T: PartialEq + std::fmt::Debug>(got: &T, want: &T) -> Check {
    check(got == want, || format!("expected {want:?}"))
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Check {
    if ok {
        Ok(())
    } else {
        Err(what())
    }
}
