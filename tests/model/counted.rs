//! The counted engine's model (a semaphore's permits, a rwlock's reads and
//! writes): holds of units, each of one call with its own token and lease
//! end (live while the end has not passed: inclusive); a FIFO queue of
//! calls with their units; admission in arrival order while the head's
//! units fit beside the live ones, so no smaller call passes a head that
//! does not fit; the capacity (set_permits fixes a semaphore's); the last
//! release and the last force release's record (so a repeat answers as the
//! first, the record while the server keeps it); a
//! revocation up to a token. A hold whose lease ran out is dropped at the
//! next call that looks (the model keeps it until then: a call that does
//! not fit and finds none to drop queues without admitting anyone).

use fairlock::__test_support::{
    AbandonReply, AcquireReply, CancelReply, Freed, HandedOver, HeartbeatReply, Mode, PermitsSet,
    ReleaseReply, RenewReply, Revoked, WaiterStatus,
};
use fairlock::__test_support::{
    Ask, DowngradeReply, UpgradeReply, UpgradeStep, RW_CAPACITY, RW_UPGRADABLE,
};

use super::explore::{fail, sync_queue, Check, Machine, Waiter};
use super::server::Seen;
use super::step::Call;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Hold {
    owner: String,
    call: u64,
    units: u32,
    /// 0 until seen (a grant no reply tells).
    token: u64,
    end: i64,
}

impl Hold {
    fn name(&self) -> String {
        format!("{} {} {}", self.owner, self.call, self.units)
    }
}

#[derive(Debug, Default)]
pub struct Model {
    /// Holds not yet dropped (live, or run out), in the order granted.
    holds: Vec<Hold>,
    queue: Vec<Waiter>,
    capacity: Option<u32>,
    set: bool,
    last: u64,
    mark: String,
    /// Whether the last keys read kept a lone hold in the meta, and whether
    /// the mark must name every release remembered (one given back from
    /// the holders zset, or abandoned, takes no lone hold's fast path).
    lone: bool,
    exact: bool,
    /// The last force release's call key and the holds it freed.
    forced: Option<(String, u64)>,
    revoked: Option<u64>,
    /// Heads set_permits' admission refused in this step.
    refused: u64,
    /// Calls refused so, with their liveness deadlines: a poll of one not
    /// queued again is told, while its deadline lasts.
    refusals: Vec<(Call, i64)>,
    /// The last token a reply told while grants of this step wait to be
    /// read back (their tokens must come up to it).
    pending_last: Option<u64>,
    /// A token a reply told for a hold whose grant order puts it among
    /// holds not read back yet: (its name, the token).
    told: Option<(String, u64)>,
    /// A dead waiter that asked again this step: the server may have kept
    /// its place (not dropped yet) or queued it anew at the tail.
    revived: Option<String>,
}

fn expect<T: PartialEq + std::fmt::Debug>(got: &T, want: &T) -> Check {
    if got == want {
        Ok(())
    } else {
        Err(format!("expected {want:?}"))
    }
}

fn member(call: &Call) -> String {
    format!("{} {} {}", call.owner(), call.id, call.units())
}

impl Model {
    /// A release's (an abandon's) call key before the last marks: the
    /// last 8, newest first (lib/counted.lua's remember).
    fn remember(&mut self, key: String) {
        let old = std::mem::take(&mut self.mark);
        let kept = old.split(',').filter(|m| !m.is_empty());
        self.mark = std::iter::once(key)
            .chain(kept.map(str::to_owned))
            .take(8)
            .collect::<Vec<_>>()
            .join(",");
    }

    fn used(&self) -> u64 {
        self.holds.iter().map(|h| u64::from(h.units)).sum()
    }

    fn live(&self, now: i64) -> impl Iterator<Item = &Hold> {
        self.holds.iter().filter(move |h| h.end >= now)
    }

    fn hold_of(&mut self, call: &Call, now: i64) -> Option<&mut Hold> {
        let name = member(call);
        self.holds
            .iter_mut()
            .find(|h| h.end >= now && h.name() == name)
    }

    /// The live hold of `call` whatever its units now: an upgrade or a
    /// downgrade changed them (and its name), and a call delivered again
    /// still answers with it.
    fn hold_of_call(&mut self, call: &Call, now: i64) -> Option<&mut Hold> {
        let owner = call.owner();
        self.holds
            .iter_mut()
            .find(|h| h.end >= now && h.call == call.id && h.owner == owner)
    }

    fn drop_expired(&mut self, now: i64) -> usize {
        let before = self.holds.len();
        self.holds.retain(|h| h.end >= now);
        before - self.holds.len()
    }

    fn first_lease_left(&self, now: i64) -> i64 {
        self.live(now).map(|h| h.end - now).min().unwrap_or(0)
    }

    fn take(&mut self, call: &Call, ttl: i64, now: i64) {
        self.holds.push(Hold {
            owner: call.owner(),
            call: call.id,
            units: call.units(),
            token: 0,
            end: now + ttl,
        });
    }

    fn index(&self, call: &Call) -> Option<usize> {
        self.queue.iter().position(|w| w.call == *call)
    }

    fn prune(&mut self, now: i64) {
        self.queue.retain(|w| w.deadline >= now);
    }

    /// Admits live heads while they fit, up to `stop`; the calls admitted.
    fn admit(&mut self, now: i64, stop: Option<&Call>) -> Vec<Call> {
        let mut handed = Vec::new();
        let Some(capacity) = self.capacity else {
            return handed;
        };
        loop {
            while self.queue.first().is_some_and(|w| w.deadline < now) {
                self.queue.remove(0);
            }
            let Some(head) = self.queue.first().cloned() else {
                break;
            };
            let is_stop = stop == Some(&head.call);
            if head.call.units() > capacity && !is_stop {
                let w = self.queue.remove(0);
                self.refusals.push((w.call, w.deadline));
                self.refused += 1;
            } else if is_stop || self.used() + u64::from(head.call.units()) > u64::from(capacity) {
                break;
            } else if head.call.ask == Ask::Upgrade {
                // An upgrade's claim: its upgradable read becomes the write
                // in place (a new token, the same lease end), or, gone,
                // the claim is dropped.
                self.queue.remove(0);
                let name = format!("{} {} {RW_UPGRADABLE}", head.call.owner(), head.call.id);
                if let Some(hold) = self
                    .holds
                    .iter_mut()
                    .find(|h| h.end >= now && h.name() == name)
                {
                    hold.units = RW_CAPACITY;
                    hold.token = 0;
                    handed.push(head.call);
                }
            } else {
                self.queue.remove(0);
                let lease = head.call.lease();
                let ttl = if head.call.fixed() {
                    lease
                } else {
                    lease.min(head.deadline - now).max(1)
                };
                self.take(&head.call, ttl, now);
                handed.push(head.call);
            }
            // The lock filled (nobody else fits, and with no set_permits
            // nobody is refused): a release's handoff stops here, reading
            // nothing behind the head (lua/counted/release.lua), so dead
            // waiters there stay until a later call drops them.
            if !self.set && self.used() >= u64::from(capacity) {
                break;
            }
        }
        handed
    }

    fn pass_on(&mut self, now: i64) -> (Vec<Call>, usize) {
        let dropped = self.drop_expired(now);
        (self.admit(now, None), dropped)
    }

    /// The grants a reply lists: the calls admitted, in order, their
    /// tokens fresh and increasing.
    fn grants(&mut self, handed: &[Call], got: &[HandedOver], now: i64) -> Check {
        if handed.len() != got.len() {
            return fail(format!("expected grants to {handed:?}"));
        }
        for (call, grant) in handed.iter().zip(got) {
            let i = self
                .holds
                .iter()
                .position(|h| h.call == call.id && h.token == 0 && h.owner == call.owner())
                .unwrap();
            let end = self.holds[i].end;
            if grant.owner != call.owner()
                || grant.call != call.id
                || grant.ttl_ms as i64 != end - now
            {
                return fail(format!("a grant to {call:?} for {} ms", end - now));
            }
            self.fresh(i, grant.token)?;
        }
        Ok(())
    }

    /// The last token a call that reads the meta gone stands for it with
    /// (lib/counted.lua's read_meta): the server clock at `now` (its µs,
    /// `ServerState`'s) less one; else the model's.
    fn last_as_read(&self, now: i64) -> u64 {
        match self.capacity {
            None => (now * 1000 + 499) as u64,
            Some(_) => self.last,
        }
    }

    fn fresh(&mut self, i: usize, token: u64) -> Check {
        let hold = &mut self.holds[i];
        if hold.token == 0 {
            if token <= self.last {
                return fail(format!("token {token} after {} was issued", self.last));
            }
            hold.token = token;
            self.last = token;
            return Ok(());
        }
        if hold.token != token {
            return fail(format!("token {token}, the hold's is {}", hold.token));
        }
        Ok(())
    }

    fn waiting(
        &mut self,
        call: &Call,
        mode: Mode,
        timeout: i64,
        now: i64,
        got: &AcquireReply,
    ) -> Check {
        let AcquireReply::Waiting {
            pttl_ms,
            position,
            last_token,
            ..
        } = *got
        else {
            return fail("expected to wait".into());
        };
        let left = self.first_lease_left(now);
        let last = self.reply_last(last_token)?;
        if pttl_ms != left || last_token != last {
            return fail(format!(
                "expected to wait with {left} ms and last token {last}"
            ));
        }
        if mode == Mode::Try {
            return if position.is_none() {
                Ok(())
            } else {
                fail("a try queued".into())
            };
        }
        // (A refusal's record is its deadline: the entry's own again.)
        self.refusals.retain(|(c, _)| c != call);
        let i = self.index(call).unwrap_or_else(|| {
            self.queue.push(Waiter {
                call: call.clone(),
                deadline: 0,
            });
            self.queue.len() - 1
        });
        let dead = self.queue[i].deadline < now;
        self.queue[i].deadline = now + timeout;
        let lo = self.queue[..i].iter().filter(|w| w.deadline >= now).count() as u64;
        let mut hi = i as u64;
        if dead {
            let w = self.queue.remove(i);
            self.queue.push(w);
            self.revived = Some(call.entry());
            hi = self.queue.len() as u64 - 1;
        }
        if position.is_some_and(|p| (lo..=hi).contains(&p)) {
            Ok(())
        } else {
            fail(format!("position not in {lo}..={hi}"))
        }
    }

    /// The last token a reply may tell: the model's, or with grants whose
    /// tokens are not seen yet, any past it (checked at sync).
    fn reply_last(&mut self, told: u64) -> Result<u64, String> {
        if !self.holds.iter().any(|h| h.token == 0) {
            return Ok(self.last);
        }
        if told <= self.last {
            return fail(format!("last token {told} after {} was issued", self.last));
        }
        self.pending_last = Some(told);
        Ok(told)
    }

    /// The model's live holds' names, tokens and ends, sorted.
    fn live_holds(&self, now: i64) -> Vec<(String, u64, i64)> {
        let mut out: Vec<_> = self.live(now).map(|h| (h.name(), h.token, h.end)).collect();
        out.sort();
        out
    }
}

impl Machine for Model {
    fn in_force(&self, call: &Call) -> Option<u32> {
        self.capacity
            .filter(|c| self.set && *c != call.ask_capacity())
    }

    fn refuses(&mut self, call: &Call, mode: Mode, now: i64) -> bool {
        if self.hold_of_call(call, now).is_some() {
            return false;
        }
        if self.set && self.capacity.is_some_and(|c| call.units() > c) {
            // Its place and its refusal's record go.
            self.queue.retain(|w| w.call != *call);
            self.refusals.retain(|(c, _)| c != call);
            return true;
        }
        let queued = self.index(call).is_some();
        let told = self
            .refusals
            .iter()
            .position(|(c, d)| c == call && *d >= now);
        match told {
            Some(i) if mode == Mode::Poll && !queued => {
                self.refusals.remove(i);
                true
            }
            _ => false,
        }
    }

    fn acquire(
        &mut self,
        call: &Call,
        mode: Mode,
        _guard: u64,
        timeout: i64,
        now: i64,
        got: &AcquireReply,
    ) -> Check {
        if self.capacity.is_none() {
            self.last = self.last_as_read(now);
            self.capacity = Some(call.ask_capacity());
        }
        let capacity = self.capacity.unwrap();
        let lease = call.lease();
        if let Some(hold) = self.hold_of_call(call, now) {
            let left = hold.end - now;
            let left = if mode == Mode::Poll && !call.fixed() && left < lease {
                hold.end = now + lease;
                lease
            } else {
                left
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
        let dropped = self.drop_expired(now);
        let units = call.units();
        let fits = self.used() + u64::from(units) <= u64::from(capacity);
        let took = |model: &mut Self, got: &AcquireReply| -> Check {
            let AcquireReply::Acquired { token, pttl_ms, .. } = *got else {
                return fail(format!("expected a take of {lease} ms"));
            };
            let i = model
                .holds
                .iter()
                .position(|h| h.call == call.id && h.token == 0 && h.owner == call.owner())
                .unwrap();
            model.fresh(i, token)?;
            if pttl_ms != lease {
                return fail(format!("lease {pttl_ms}, not {lease}"));
            }
            Ok(())
        };
        if fits && self.queue.is_empty() {
            self.take(call, lease, now);
            return took(self, got);
        }
        if !fits && dropped == 0 {
            return self.waiting(call, mode, timeout, now, got);
        }
        while self.queue.first().is_some_and(|w| w.deadline < now) {
            self.queue.remove(0);
        }
        let mut handed = Vec::new();
        if let Some(head) = self.queue.first().cloned() {
            if head.call != *call
                && self.used() + u64::from(head.call.units()) <= u64::from(capacity)
            {
                handed = self.admit(now, Some(call));
            }
        }
        let head = self.queue.first().map(|w| w.call.clone());
        if head.as_ref().is_none_or(|h| h == call)
            && self.used() + u64::from(units) <= u64::from(capacity)
        {
            if head.is_some() {
                self.queue.remove(0);
            }
            // The tokens: those admitted ahead (no reply tells them: the
            // keys will), this call's, those admitted behind it.
            self.take(call, lease, now);
            self.admit(now, None);
            let AcquireReply::Acquired { token, pttl_ms, .. } = *got else {
                return fail(format!("expected a take of {lease} ms"));
            };
            if token <= self.last || pttl_ms != lease {
                return fail(format!(
                    "expected a fresh token past {} and {lease} ms",
                    self.last
                ));
            }
            if handed.is_empty() {
                let i = self.holds.iter().position(|h| h.token == 0).unwrap();
                return self.fresh(i, token);
            }
            self.told = Some((member(call), token));
            return Ok(());
        }
        self.waiting(call, mode, timeout, now, got)
    }

    fn release(&mut self, call: &Call, token: u64, now: i64, got: &ReleaseReply) -> Check {
        let owner = call.owner();
        let Some(i) = self.holds.iter().position(|h| {
            h.end >= now && h.token == token && h.owner == owner && h.call == call.id
        }) else {
            if format!(",{},", self.mark).contains(&format!(",{owner}#{},", call.id)) {
                return expect(got, &ReleaseReply::Released { left: 0 });
            }
            // (No capacity known: no meta.)
            let gone = self.capacity.is_none();
            return expect(
                got,
                &if gone {
                    ReleaseReply::Gone
                } else {
                    ReleaseReply::NotHeld
                },
            );
        };
        self.holds.remove(i);
        self.remember(format!("{owner}#{}", call.id));
        self.exact = !self.lone;
        if self.queue.is_empty() {
            return expect(got, &ReleaseReply::Released { left: 0 });
        }
        let (handed, _) = self.pass_on(now);
        match got {
            ReleaseReply::HandedOver(grants) => self.grants(&handed, grants, now),
            _ if handed.is_empty() => expect(got, &ReleaseReply::Released { left: 0 }),
            _ => fail(format!("expected grants to {handed:?}")),
        }
    }

    fn renew(
        &mut self,
        call: &Call,
        token: u64,
        lease: Option<i64>,
        now: i64,
        got: &RenewReply,
    ) -> Check {
        let owner = call.owner();
        let revoked = self.revoked;
        match self
            .holds
            .iter_mut()
            .find(|h| h.end >= now && h.token == token && h.owner == owner && h.call == call.id)
        {
            // A force release (the last thing that freed holds) freed
            // every hold up to the last token of its time.
            None if self.mark.starts_with('F') && token <= self.last => {
                expect(got, &RenewReply::ForceReleased)
            }
            None if self.capacity.is_none() => expect(got, &RenewReply::Gone),
            None => expect(got, &RenewReply::Lost),
            Some(hold) => {
                if let Some(lease) = lease {
                    hold.end = now + lease;
                }
                if revoked.is_some_and(|r| r >= token) {
                    expect(got, &RenewReply::Revoked)
                } else {
                    expect(got, &RenewReply::Renewed)
                }
            }
        }
    }

    fn heartbeat(&mut self, calls: &[Call], timeout: i64, now: i64, got: &HeartbeatReply) -> Check {
        self.prune(now);
        self.pass_on(now);
        // Grants no reply lists: their tokens are read back at sync, but
        // the last one is this reply's.
        let last = self.reply_last(got.last_token)?;
        let mut statuses = Vec::new();
        for call in calls {
            if let Some(i) = self.index(call) {
                self.queue[i].deadline = now + timeout;
                statuses.push(WaiterStatus::Queued(i as u64));
                continue;
            }
            let capacity = self.capacity;
            match self.hold_of(call, now) {
                Some(hold) => {
                    if capacity.is_some() && !call.fixed() && hold.end - now < call.lease() {
                        hold.end = now + call.lease();
                    }
                    statuses.push(WaiterStatus::Owns(hold.token));
                }
                None => statuses.push(WaiterStatus::Gone),
            }
        }
        // A status naming a token not seen yet: the token is the reply's.
        let mut want = HeartbeatReply {
            pttl_ms: self.first_lease_left(now),
            last_token: last,
            statuses,
        };
        for (w, g) in want.statuses.iter_mut().zip(&got.statuses) {
            if let (WaiterStatus::Owns(0), WaiterStatus::Owns(t)) = (&w, g) {
                *w = WaiterStatus::Owns(*t);
            }
        }
        expect(got, &want)
    }

    /// A waiter leaves; a hold given to it meanwhile is given back as its
    /// abandon gives it back (nobody takes it: the leave may come late).
    fn cancel(&mut self, call: &Call, now: i64, got: &CancelReply) -> Check {
        if self.hold_of(call, now).is_some() {
            self.abandon(call, now, &AbandonReply::Released)?;
            return expect(got, &CancelReply::GivenBack);
        }
        if let Some(i) = self.index(call) {
            self.queue.remove(i);
        }
        self.refusals.retain(|(c, _)| c != call);
        self.prune(now);
        self.pass_on(now);
        expect(got, &CancelReply::Left)
    }

    fn abandon(&mut self, call: &Call, now: i64, got: &AbandonReply) -> Check {
        let name = member(call);
        if let Some(i) = self
            .holds
            .iter()
            .position(|h| h.end >= now && h.name() == name)
        {
            self.holds.remove(i);
            self.remember(format!("{}#{}", call.owner(), call.id));
            self.exact = true;
            if !self.queue.is_empty() {
                self.pass_on(now);
            }
            return expect(got, &AbandonReply::Released);
        }
        let Some(i) = self.index(call) else {
            return expect(got, &AbandonReply::Nothing);
        };
        self.queue.remove(i);
        self.prune(now);
        self.pass_on(now);
        expect(got, &AbandonReply::LeftQueue)
    }

    fn force_release(&mut self, key: &str, now: i64, got: &Freed) -> Check {
        if let Some((_, holds)) = self.forced.as_ref().filter(|(k, _)| k == key) {
            let holds = *holds;
            return expect(
                got,
                &Freed {
                    holds,
                    holder: None,
                },
            );
        }
        self.drop_expired(now);
        let holds = self.holds.len() as u64;
        self.holds.clear();
        self.forced = Some((key.to_owned(), holds));
        if self.capacity.is_some() {
            self.mark = format!("F{key}/{holds}");
            self.admit(now, None);
        }
        expect(
            got,
            &Freed {
                holds,
                holder: None,
            },
        )
    }

    fn revoke(&mut self, now: i64, got: &Revoked) -> Check {
        let holds = self.live(now).count() as u64;
        if holds == 0 {
            return expect(got, &Revoked { holds: 0, up_to: 0 });
        }
        if self.capacity.is_some() {
            self.revoked = Some(self.last);
        }
        expect(
            got,
            &Revoked {
                holds,
                up_to: self.last_as_read(now),
            },
        )
    }

    fn set_permits(&mut self, permits: u32, now: i64, got: &PermitsSet) -> Check {
        self.prune(now);
        let previous = self.capacity;
        self.last = self.last_as_read(now);
        self.capacity = Some(permits);
        self.set = true;
        self.refused = 0;
        let (handed, _) = self.pass_on(now);
        let want = (previous, self.used(), self.refused);
        let gotten = (got.previous, got.in_use, got.refused);
        if want != gotten {
            return fail(format!("expected (previous, in use, refused) {want:?}"));
        }
        self.grants(&handed, &got.admitted, now)
    }

    fn sync(&mut self, seen: &Seen, now: i64) -> Check {
        if let Some((key, _)) = seen.ttls.iter().find(|(_, ttl)| *ttl == -1) {
            return fail(format!("{key} has no TTL"));
        }
        if let Some((key, ttl)) = seen.ttls.iter().find(|(_, ttl)| {
            *ttl >= seen.meta_pttl && seen.meta.is_some() && *ttl != seen.meta_pttl
        }) {
            return fail(format!(
                "{key} lives {ttl} ms, past the meta's {} ms",
                seen.meta_pttl
            ));
        }
        if seen.forced != self.forced.is_some() {
            if seen.forced {
                return fail("a force release's record the model has none of".into());
            }
            // Its fence life is over.
            self.forced = None;
        }
        let Some(meta) = seen.meta.as_deref() else {
            // Nothing kept: the lock as new.
            if self.live(now).next().is_some() {
                return fail("the meta is gone under a live hold".into());
            }
            *self = Model {
                last: self.last,
                queue: std::mem::take(&mut self.queue),
                forced: self.forced.take(),
                ..Model::default()
            };
            return sync_queue(&mut self.queue, self.revived.take(), seen, now);
        };
        let parts: Vec<&str> = meta.split(' ').collect();
        // The holds the keys keep live: the lone hold, or the holders zset's.
        let mut held: Vec<(String, u64, i64)> = Vec::new();
        // "v<format> <capacity> <token> <owner>#<call> [+]<fence ms> <units>
        // <mark>": a lone hold, its lease end the meta's PTTL less its fence.
        let lone = parts.len() == 7 && parts[3].contains('#');
        if lone {
            let fence: i64 = parts[4].trim_start_matches('+').parse().unwrap();
            let end = now + seen.meta_pttl - fence;
            if end >= now {
                let (owner, call) = parts[3].rsplit_once('#').unwrap();
                let name = format!("{owner} {call} {}", parts[5]);
                held.push((name, parts[2].parse().unwrap(), end));
            }
        } else {
            for (name, score) in &seen.holders {
                if *score >= 0.0 && *score as i64 >= now {
                    let token = seen
                        .holders
                        .iter()
                        .find(|(m, _)| m.strip_prefix('#') == Some(name.as_str()))
                        .map_or(0, |(_, s)| (-s) as u64);
                    held.push((name.clone(), token, *score as i64));
                }
            }
        }
        held.sort();
        // Tokens not seen yet, in grant order: fresh and increasing.
        let pending: Vec<usize> = (0..self.holds.len())
            .filter(|i| self.holds[*i].token == 0 && self.holds[*i].end >= now)
            .collect();
        for i in pending {
            let name = self.holds[i].name();
            let Some((_, token, _)) = held.iter().find(|(n, _, _)| *n == name) else {
                return fail(format!("the server keeps no hold {name}"));
            };
            self.fresh(i, *token)?;
        }
        if let Some((name, token)) = self.told.take() {
            if !held.iter().any(|(n, t, _)| *n == name && *t == token) {
                return fail(format!(
                    "the reply's token {token} for {name} is not the hold's"
                ));
            }
        }
        if let Some(last) = self.pending_last.take() {
            if last != self.last {
                return fail(format!(
                    "the last token was {last}, the model's {}",
                    self.last
                ));
            }
        }
        let mine = self.live_holds(now);
        if mine != held {
            return fail(format!("the model holds {mine:?}, the server {held:?}"));
        }
        let last: u64 = parts[if lone { 2 } else { 3 }].parse().unwrap();
        if last != self.last {
            return fail(format!(
                "the meta's last token {last}, the model's {}",
                self.last
            ));
        }
        // The mark names the last releases, newest first: all the model
        // remembers, or (a lone hold's fast paths) fewer, never another.
        let word = parts[if lone { 6 } else { 4 }];
        let mark = word.split('^').next().unwrap().trim_start_matches('-');
        let ends = self.mark.strip_prefix(mark);
        let cut = !ends.is_some_and(|r| r.is_empty() || (r.starts_with(',') && !self.exact));
        if mark.is_empty() != self.mark.is_empty() || cut {
            return fail(format!("the meta's mark {mark}, the model's {}", self.mark));
        }
        self.mark = mark.to_owned();
        (self.lone, self.exact) = (lone, false);
        sync_queue(&mut self.queue, self.revived.take(), seen, now)
    }

    fn held_token(&mut self, call: &Call, now: i64) -> u64 {
        let owner = call.owner();
        self.holds
            .iter()
            .find(|h| h.end >= now && h.owner == owner && h.call == call.id)
            .map_or(0, |h| h.token)
    }

    fn vouches(&self, call: &Call, token: u64, now: i64) -> bool {
        let owner = call.owner();
        (self.holds.iter())
            .any(|h| h.owner == owner && h.call == call.id && h.token == token && h.end > now + 1)
    }

    fn upgrade(
        &mut self,
        call: &Call,
        token: u64,
        step: UpgradeStep,
        timeout: i64,
        now: i64,
        got: &Result<UpgradeReply, String>,
    ) -> Check {
        let owner = call.owner();
        let write = format!("{owner} {} {RW_CAPACITY}", call.id);
        let claim = Call {
            id: call.id,
            ask: Ask::Upgrade,
        };
        if let Some(h) = self
            .holds
            .iter()
            .find(|h| h.end >= now && h.name() == write)
        {
            let want = UpgradeReply::Upgraded {
                token: h.token,
                pttl_ms: h.end - now,
            };
            return expect(got, &Ok(want));
        }
        let queued = self.index(&claim);
        let Some(i) = self.holds.iter().position(|h| {
            h.end >= now && h.token == token && h.owner == owner && h.call == call.id
        }) else {
            if let Some(q) = queued {
                self.queue.remove(q);
                self.prune(now);
                self.pass_on(now);
            }
            return expect(got, &Ok(UpgradeReply::Lost));
        };
        if self.holds[i].units != RW_UPGRADABLE {
            return match got {
                Err(_) => Ok(()),
                Ok(_) => fail("expected a refusal: no upgradable read".into()),
            };
        }
        let Ok(got) = got else {
            return fail("an error".into());
        };
        let waiting = |model: &mut Self, position: Option<u64>| -> Check {
            let UpgradeReply::Waiting { last_token, .. } = *got else {
                return fail("expected to wait".into());
            };
            let last = model.reply_last(last_token)?;
            let want = UpgradeReply::Waiting {
                pttl_ms: model.first_lease_left(now),
                position,
                last_token: last,
            };
            expect(got, &want)
        };
        if step == UpgradeStep::Withdraw {
            if let Some(q) = queued {
                self.queue.remove(q);
                self.prune(now);
                self.pass_on(now);
            }
            return waiting(self, None);
        }
        self.drop_expired(now);
        let i = self
            .holds
            .iter()
            .position(|h| h.token == token && h.owner == owner && h.call == call.id)
            .unwrap();
        if self.used() == u64::from(RW_UPGRADABLE) {
            if let Some(q) = queued {
                self.queue.remove(q);
            }
            self.holds[i].units = RW_CAPACITY;
            self.holds[i].token = 0;
            let left = self.holds[i].end - now;
            let UpgradeReply::Upgraded { token, pttl_ms } = *got else {
                return fail(format!("expected the write for {left} ms"));
            };
            if pttl_ms != left {
                return fail(format!("expected the write for {left} ms"));
            }
            return self.fresh(i, token);
        }
        if step == UpgradeStep::Attempt(Mode::Try) {
            return waiting(self, None);
        }
        match queued {
            Some(q) => self.queue[q].deadline = now + timeout,
            None => self.queue.insert(
                0,
                Waiter {
                    call: claim,
                    deadline: now + timeout,
                },
            ),
        }
        waiting(self, Some(0))
    }

    fn downgrade(
        &mut self,
        call: &Call,
        token: u64,
        to: u32,
        now: i64,
        got: &Result<DowngradeReply, String>,
    ) -> Check {
        let owner = call.owner();
        let Some(i) = self.holds.iter().position(|h| {
            h.end >= now && h.token == token && h.owner == owner && h.call == call.id
        }) else {
            let name = format!("{owner} {} {to}", call.id);
            let want = match self.holds.iter().find(|h| h.end >= now && h.name() == name) {
                Some(h) => DowngradeReply::Downgraded {
                    token: h.token,
                    pttl_ms: h.end - now,
                    handed: Vec::new(),
                },
                None => DowngradeReply::Lost,
            };
            return expect(got, &Ok(want));
        };
        let units = self.holds[i].units;
        if units <= to || (units != RW_CAPACITY && units != RW_UPGRADABLE) {
            return match got {
                Err(_) => Ok(()),
                Ok(_) => fail(format!("expected a refusal: {units} units down to {to}")),
            };
        }
        let Ok(DowngradeReply::Downgraded {
            token,
            pttl_ms,
            handed: grants,
        }) = got
        else {
            return fail("expected a downgrade".into());
        };
        self.holds[i].units = to;
        self.holds[i].token = 0;
        let left = self.holds[i].end - now;
        if *pttl_ms != left {
            return fail(format!("expected {left} ms left"));
        }
        self.fresh(i, *token)?;
        let (handed, _) = self.pass_on(now);
        self.grants(&handed, grants, now)
    }

    fn last(&self) -> u64 {
        self.last
    }

    fn ends(&self) -> Vec<i64> {
        let mut out: Vec<i64> = self.queue.iter().map(|w| w.deadline).collect();
        out.extend(self.holds.iter().map(|h| h.end));
        out
    }

    fn queued(&self) -> usize {
        self.queue.len()
    }

    fn empty(&mut self, now: i64) -> bool {
        self.live(now).next().is_none() && self.queue.iter().all(|w| w.deadline < now)
    }
}
