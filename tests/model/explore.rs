//! Random operation sequences against the real scripts, each step's reply
//! checked by the model and the keys read back after it; a divergence
//! shrunk (delete chunks of steps, then single ones, while it still
//! diverges) to a minimal sequence, printed with its seed.

use std::time::{Duration, Instant};

use fairlock::__test_support::{
    Abandon, AbandonReply, Acquire, AcquireReply, Cancel, CancelReply, ForceRelease, Freed,
    Heartbeat, HeartbeatReply, LockKind, Mode, PermitsSet, QueueEntry, Release, ReleaseReply,
    Renew, RenewReply, Revoke, Revoked, SetPermits,
};
use fairlock::__test_support::{
    Access, Ask, Downgrade, DowngradeReply, Upgrade, UpgradeReply, UpgradeStep,
};

use super::server::{Frozen, Plant, Seen};
use super::step::{Call, Step, Token, CLIENTS};
use super::Lcg;

/// What a divergence says.
pub type Check = Result<(), String>;

/// A divergence that says `what`.
pub fn fail<T>(what: String) -> Result<T, String> {
    Err(what)
}

/// A queued call of a model, with its liveness deadline in server ms.
#[derive(Debug, Clone)]
pub struct Waiter {
    pub call: Call,
    pub deadline: i64,
}

/// Checks the queue the server has (`seen`) against the model's at `now`:
/// every live waiter, in order, and only waiters the model has, with their
/// deadlines; the dead ones the server dropped are dropped from the
/// model's too. `revived`, the entry of a dead waiter that asked again (the
/// server kept its place or queued it anew), is first put where the server
/// has it.
pub fn sync_queue(
    queue: &mut Vec<Waiter>,
    revived: Option<String>,
    seen: &Seen,
    now: i64,
) -> Check {
    place_revived(queue, revived, seen);
    let mut kept = Vec::new();
    let mut at = 0;
    let left = |waiters: &[Waiter]| match waiters.iter().find(|w| w.deadline >= now) {
        Some(skipped) => Err(format!("the live waiter {skipped:?} left the queue")),
        None => Ok(()),
    };
    for (entry, deadline) in &seen.queue {
        let Some(i) = queue[at..].iter().position(|w| w.call.entry() == *entry) else {
            return Err(format!(
                "queued {entry}, not in the model's queue {queue:?}"
            ));
        };
        left(&queue[at..at + i])?;
        let w = &queue[at + i];
        if w.deadline != *deadline {
            return Err(format!("{entry}: deadline {deadline}, not {}", w.deadline));
        }
        kept.push(w.clone());
        at += i + 1;
    }
    left(&queue[at..])?;
    *queue = kept;
    Ok(())
}

/// Puts `revived` where the server has it, after the waiter the server
/// has before it, so that the queue's order can then be checked.
fn place_revived(queue: &mut Vec<Waiter>, revived: Option<String>, seen: &Seen) {
    let Some(revived) = revived else {
        return;
    };
    let Some(at) = seen.queue.iter().position(|(e, _)| *e == revived) else {
        return;
    };
    let Some(mine) = queue.iter().position(|w| w.call.entry() == revived) else {
        return;
    };
    let w = queue.remove(mine);
    let to = match at.checked_sub(1) {
        None => 0,
        Some(before) => queue
            .iter()
            .position(|w| w.call.entry() == seen.queue[before].0)
            .map_or(queue.len(), |i| i + 1),
    };
    queue.insert(to, w);
}

/// A model of one engine: each operation checks the real reply (and takes
/// what the model leaves open, a fresh token, from it); `sync` checks the
/// keys after a step.
pub trait Machine: Default {
    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &mut self,
        call: &Call,
        mode: Mode,
        guard: u64,
        timeout: i64,
        now: i64,
        got: &AcquireReply,
    ) -> Check;
    fn release(&mut self, call: &Call, token: u64, now: i64, got: &ReleaseReply) -> Check;
    fn renew(
        &mut self,
        call: &Call,
        token: u64,
        lease: Option<i64>,
        now: i64,
        got: &RenewReply,
    ) -> Check;
    fn heartbeat(&mut self, calls: &[Call], timeout: i64, now: i64, got: &HeartbeatReply) -> Check;
    fn cancel(&mut self, call: &Call, now: i64, got: &CancelReply) -> Check;
    fn abandon(&mut self, call: &Call, now: i64, got: &AbandonReply) -> Check;
    fn force_release(&mut self, key: &str, now: i64, got: &Freed) -> Check;
    fn revoke(&mut self, now: i64, got: &Revoked) -> Check;
    /// Whether an acquire of `call` at `now` is refused with an error (more
    /// units than set_permits left, and no hold of the call to answer with).
    fn refuses(&mut self, _call: &Call, _mode: Mode, _now: i64) -> bool {
        false
    }
    /// The number of permits in force an acquire of `call` is told: a
    /// semaphore's, when set_permits set another than the call's.
    fn in_force(&self, _call: &Call) -> Option<u32> {
        None
    }
    fn set_permits(&mut self, _permits: u32, _now: i64, got: &PermitsSet) -> Check {
        Err(format!("no permits to set: {got:?}"))
    }
    /// An upgrade (a rwlock's): its reply, or its error.
    fn upgrade(
        &mut self,
        _call: &Call,
        _token: u64,
        _step: UpgradeStep,
        _timeout: i64,
        _now: i64,
        got: &Result<UpgradeReply, String>,
    ) -> Check {
        Err(format!("no upgrade here: {got:?}"))
    }
    /// A downgrade (a rwlock's) to `to` units: its reply, or its error.
    fn downgrade(
        &mut self,
        _call: &Call,
        _token: u64,
        _to: u32,
        _now: i64,
        got: &Result<DowngradeReply, String>,
    ) -> Check {
        Err(format!("no downgrade here: {got:?}"))
    }
    fn sync(&mut self, seen: &Seen, now: i64) -> Check;
    /// The token of `call`'s owner's live hold (0 when it holds none).
    fn held_token(&mut self, call: &Call, now: i64) -> u64;
    /// Whether `call`'s client would vouch for the lease of its hold
    /// `token` in a release at `now` (no PTTL read): the hold is this
    /// call's and lives past `now` with time to spare, as a client's own
    /// count of it would have it. Any other release says "check".
    fn vouches(&self, call: &Call, token: u64, now: i64) -> bool;
    /// The largest token issued.
    fn last(&self) -> u64;
    /// Lease ends and deadlines, server ms (where the clock steps to).
    fn ends(&self) -> Vec<i64>;
    /// Calls queued now (the generator keeps the queue short).
    fn queued(&self) -> usize;
    /// Whether no hold and no live waiter is left.
    fn empty(&mut self, now: i64) -> bool;
}

/// A lock of one kind under test: its server, the model, the tokens seen.
pub struct Run<M: Machine> {
    pub srv: Frozen,
    model: M,
    tokens: Vec<u64>,
    /// The keys as read right after the step's script.
    seen: Option<Seen>,
    /// The last revoke's call key and reply, while its record lives.
    revoked: Option<(String, Revoked)>,
}

/// A divergence: the steps up to it, and what it was.
#[derive(Debug)]
pub struct Divergence {
    /// The step of the run (before shrinking) that diverged.
    pub at: usize,
    pub steps: Vec<Step>,
    pub what: String,
}

fn redis_err(e: fairlock::Error) -> String {
    format!("the script failed: {e}")
}

impl<M: Machine> Run<M> {
    pub fn new(kind: LockKind, plant: Option<Plant>) -> Run<M> {
        if let Some(plant) = plant {
            assert!(
                Frozen::plant_applies(plant, kind),
                "{plant:?} changes no script"
            );
        }
        Run {
            srv: Frozen::start(kind, plant),
            model: M::default(),
            tokens: Vec::new(),
            seen: None,
            revoked: None,
        }
    }

    fn reset(&mut self) {
        self.seen = None;
        self.srv.reset();
        self.model = M::default();
        self.tokens.clear();
        self.revoked = None;
    }

    fn token(&mut self, token: Token, call: &Call) -> u64 {
        match token {
            Token::Zero => 0,
            Token::Held => self.model.held_token(call, self.srv.now),
            Token::Back(n) => self.tokens.iter().rev().nth(n).copied().unwrap_or(0),
        }
    }

    /// A script's reply; the keys read after it are kept for `sync`.
    fn took<R>(&mut self, (reply, seen): (fairlock::Result<R>, Seen)) -> Result<R, String> {
        self.seen = Some(seen);
        reply.map_err(redis_err)
    }

    /// Runs one step on the server and the model, then reads the keys back.
    pub fn apply(&mut self, step: &Step) -> Check {
        self.seen = None;
        let now = self.srv.now;
        let kind = self.srv.keys.kind();
        match step {
            Step::Acquire {
                call,
                mode,
                guard,
                timeout,
            } => {
                // A counted lock's re-entry is not modelled: no guard.
                let guard = match kind {
                    LockKind::Mutex | LockKind::Election => self.token(*guard, call),
                    _ => 0,
                };
                let owner = call.owner();
                let got = self.srv.run(&Acquire {
                    ask: call.ask,
                    owner: &owner,
                    lease: call.lease_arg(),
                    waiter_timeout: Duration::from_millis(*timeout as u64),
                    mode: *mode,
                    call: call.id,
                    live_token: guard,
                });
                // More units than set_permits left: refused, nothing written
                // (unless the call holds them already: it answers with them).
                let refused = self.model.refuses(call, *mode, now);
                match self.took(got) {
                    Err(_) if refused => Ok(()),
                    Ok(got) if refused => Err(format!("expected a refusal; got {got:?}")),
                    got => {
                        let got = got?;
                        let in_force = self.model.in_force(call);
                        if got.in_force() != in_force {
                            return Err(format!("expected {in_force:?} in force; got {got:?}"));
                        }
                        // Checked: the model answers without it.
                        let got = match got {
                            AcquireReply::Acquired { token, pttl_ms, .. } => {
                                AcquireReply::Acquired {
                                    token,
                                    pttl_ms,
                                    in_force: None,
                                }
                            }
                            AcquireReply::Waiting {
                                pttl_ms,
                                position,
                                last_token,
                                ..
                            } => AcquireReply::Waiting {
                                pttl_ms,
                                position,
                                last_token,
                                in_force: None,
                            },
                        };
                        self.model
                            .acquire(call, *mode, guard, *timeout, now, &got)
                            .map_err(|e| format!("{e}; got {got:?}"))
                    }
                }
            }
            Step::Release { call, token } => {
                let token = self.token(*token, call);
                let owner = call.owner();
                let vouched = self.model.vouches(call, token, now);
                let got = self.srv.run(&Release {
                    owner: &owner,
                    token,
                    call: call.id,
                    vouched_until: vouched.then(|| Instant::now() + Duration::from_secs(60)),
                });
                let got = self.took(got)?;
                self.model
                    .release(call, token, now, &got)
                    .map_err(|e| format!("{e}; got {got:?}"))
            }
            Step::Renew { call, token, lease } => {
                let token = self.token(*token, call);
                let owner = call.owner();
                let got = self.srv.run(&Renew {
                    owner: &owner,
                    token,
                    first: token,
                    call: call.id,
                    lease: lease.map(|ms| Duration::from_millis(ms as u64)),
                });
                let got = self.took(got)?;
                self.model
                    .renew(call, token, *lease, now, &got)
                    .map_err(|e| format!("{e}; got {got:?}"))
            }
            Step::Heartbeat { calls, timeout } => {
                let owners: Vec<String> = calls.iter().map(Call::owner).collect();
                let waiters = calls
                    .iter()
                    .zip(&owners)
                    .map(|(c, o)| QueueEntry {
                        owner: o,
                        call: c.id,
                        lease: c.lease_arg(),
                        ask: c.ask,
                    })
                    .collect();
                let got = self.srv.run(&Heartbeat {
                    waiter_timeout: Duration::from_millis(*timeout as u64),
                    waiters,
                });
                let got = self.took(got)?;
                self.model
                    .heartbeat(calls, *timeout, now, &got)
                    .map_err(|e| format!("{e}; got {got:?}"))
            }
            Step::Cancel(call) | Step::Abandon(call) => {
                let owner = call.owner();
                let entry = QueueEntry {
                    owner: &owner,
                    call: call.id,
                    lease: call.lease_arg(),
                    ask: call.ask,
                };
                if matches!(step, Step::Cancel(_)) {
                    let got = self.srv.run(&Cancel { entry });
                    let got = self.took(got)?;
                    self.model
                        .cancel(call, now, &got)
                        .map_err(|e| format!("{e}; got {got:?}"))
                } else {
                    let got = self.srv.run(&Abandon { entry });
                    let got = self.took(got)?;
                    self.model
                        .abandon(call, now, &got)
                        .map_err(|e| format!("{e}; got {got:?}"))
                }
            }
            Step::ForceRelease(n) => {
                let key = format!("f#{n}");
                let got = self.srv.run(&ForceRelease {
                    call_key: key.clone(),
                });
                let got = self.took(got)?;
                self.model
                    .force_release(&key, now, &got)
                    .map_err(|e| format!("{e}; got {got:?}"))
            }
            Step::Revoke(n) => {
                let call_key = format!("r#{n}");
                let got = self.srv.run(&Revoke {
                    call_key: call_key.clone(),
                });
                let got = self.took(got)?;
                // A repeat answers from the record, asking nobody.
                match self.revoked.as_ref().filter(|(k, _)| *k == call_key) {
                    Some((_, first)) if *first == got => Ok(()),
                    Some((_, first)) => Err(format!("the repeat of {first:?}")),
                    None => self.model.revoke(now, &got),
                }
                .map_err(|e| format!("{e}; got {got:?}"))?;
                self.revoked = Some((call_key, got));
                Ok(())
            }
            Step::SetPermits(permits) => {
                let got = self.srv.run(&SetPermits { permits: *permits });
                let got = self.took(got)?;
                self.model
                    .set_permits(*permits, now, &got)
                    .map_err(|e| format!("{e}; got {got:?}"))
            }
            Step::Upgrade {
                call,
                token,
                mode,
                timeout,
            } => {
                let token = self.token(*token, call);
                let owner = call.owner();
                let step = mode.map_or(UpgradeStep::Withdraw, UpgradeStep::Attempt);
                let (got, seen) = self.srv.run(&Upgrade {
                    owner: &owner,
                    token,
                    call: call.id,
                    lease: call.lease_arg(),
                    waiter_timeout: Duration::from_millis(*timeout as u64),
                    step,
                });
                self.seen = Some(seen);
                let got = got.map_err(redis_err);
                self.model
                    .upgrade(call, token, step, *timeout, now, &got)
                    .map_err(|e| format!("{e}; got {got:?}"))
            }
            Step::Downgrade { call, token, to } => {
                let token = self.token(*token, call);
                let owner = call.owner();
                let (got, seen) = self.srv.run(&Downgrade {
                    owner: &owner,
                    token,
                    call: call.id,
                    to: *to,
                });
                self.seen = Some(seen);
                let got = got.map_err(redis_err);
                let units = fairlock::__test_support::Ask::RwLock(*to).units();
                self.model
                    .downgrade(call, token, units, now, &got)
                    .map_err(|e| format!("{e}; got {got:?}"))
            }
            Step::Clock(ms) => {
                self.srv.set_time(now + ms);
                Ok(())
            }
        }?;
        let seen = match self.seen.take() {
            Some(seen) => seen,
            None => self.srv.observe(),
        };
        self.model.sync(&seen, self.srv.now)?;
        if !seen.revoked {
            // Its life (its anchor's) is over.
            self.revoked = None;
        } else if self.revoked.is_none() {
            return Err("a revoke's record the model has none of".into());
        }
        let last = self.model.last();
        if self.tokens.last().is_none_or(|t| *t < last) {
            self.tokens.push(last);
        }
        Ok(())
    }

    /// The end of a run: time passes every lease, deadline and fence
    /// life; nothing may be left, no key at all.
    fn finish(&mut self) -> Check {
        self.apply(&Step::Clock(FINAL))?;
        if !self.model.empty(self.srv.now) {
            return Err("the model keeps a hold or a waiter at the end".into());
        }
        let seen = self.srv.observe();
        if !seen.ttls.is_empty() {
            return Err(format!("keys left at the end: {:?}", seen.ttls));
        }
        Ok(())
    }

    /// Replays `steps` from an empty server; the index of the step that
    /// diverged (`steps.len()` for the end's check) and what it said.
    pub fn replay(&mut self, steps: &[Step]) -> Option<(usize, String)> {
        self.reset();
        for (i, step) in steps.iter().enumerate() {
            if let Err(what) = self.apply(step) {
                return Some((i, what));
            }
        }
        self.finish().err().map(|what| (steps.len(), what))
    }

    /// One run of `n` random steps from `seed`, then the end's check; a
    /// divergence comes back shrunk.
    pub fn explore(&mut self, seed: u64, n: usize, gen: &Gen) -> Result<(), Divergence> {
        self.reset();
        let mut rng = Lcg(seed);
        let mut steps = Vec::new();
        let mut next_call = 0;
        let mut force = 0;
        let mut failed = None;
        for _ in 0..n {
            let step = gen.step(
                &mut rng,
                &mut self.model,
                self.srv.now,
                &steps,
                &mut next_call,
                &mut force,
            );
            steps.push(step);
            if let Err(what) = self.apply(steps.last().unwrap()) {
                failed = Some(what);
                break;
            }
        }
        if failed.is_none() {
            failed = self.finish().err();
        }
        let Some(what) = failed else {
            return Ok(());
        };
        let at = steps.len();
        let mut d = self.shrink(steps, what);
        d.at = at;
        Err(d)
    }

    /// Deletes chunks of steps, halving the chunk down to one step, while
    /// the rest still diverges.
    pub fn shrink(&mut self, mut steps: Vec<Step>, mut what: String) -> Divergence {
        let mut chunk = steps.len().div_ceil(2).max(1);
        loop {
            let mut at = 0;
            while at < steps.len() {
                let mut fewer = steps.clone();
                fewer.drain(at..(at + chunk).min(steps.len()));
                match self.replay(&fewer) {
                    Some((i, said)) => {
                        fewer.truncate(i + 1);
                        steps = fewer;
                        what = said;
                    }
                    None => at += chunk,
                }
            }
            if chunk == 1 {
                break;
            }
            chunk = chunk.div_ceil(2);
        }
        Divergence { at: 0, steps, what }
    }
}

/// Time that outlasts every lease, deadline and fence life, ms.
const FINAL: i64 = 700_000;

/// What a generator draws: the lock's kind, its capacity and the units a
/// call may ask for.
pub struct Gen {
    pub kind: LockKind,
    pub capacity: u32,
    pub units: Vec<u32>,
}

impl Gen {
    fn call(&self, rng: &mut Lcg, steps: &[Step], next: &mut u64, model: &impl Machine) -> Call {
        let recent: Vec<&Call> = steps
            .iter()
            .rev()
            .take(24)
            .filter_map(|s| match s {
                Step::Acquire { call, .. } => Some(call),
                _ => None,
            })
            .collect();
        if recent.is_empty() || (rng.below(3) == 0 && model.queued() < 10) {
            *next += 1;
            let units = self.units[rng.below(self.units.len() as u64) as usize];
            return Call::new(*next, self.kind, units, self.capacity);
        }
        recent[rng.below(recent.len() as u64) as usize].clone()
    }

    fn token(rng: &mut Lcg) -> Token {
        match rng.below(8) {
            0 => Token::Zero,
            1 | 2 => Token::Back(rng.below(3) as usize),
            _ => Token::Held,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn step(
        &self,
        rng: &mut Lcg,
        model: &mut impl Machine,
        now: i64,
        steps: &[Step],
        next: &mut u64,
        force: &mut u64,
    ) -> Step {
        let timeout = [2000, 3000][rng.below(2) as usize];
        match rng.below(100) {
            0..=29 => {
                let call = self.call(rng, steps, next, model);
                let mode = [Mode::First, Mode::Poll, Mode::Try][rng.below(3) as usize];
                let guard = if rng.below(4) == 0 {
                    Token::Zero
                } else {
                    Self::token(rng)
                };
                Step::Acquire {
                    call,
                    mode,
                    guard,
                    timeout,
                }
            }
            30..=41 => Step::Release {
                call: self.call(rng, steps, next, model),
                token: Self::token(rng),
            },
            42..=49 => {
                let lease = [None, Some(1000), Some(3000)][rng.below(3) as usize];
                Step::Renew {
                    call: self.call(rng, steps, next, model),
                    token: Self::token(rng),
                    lease,
                }
            }
            50..=61 => {
                let first = self.call(rng, steps, next, model);
                let mut calls = vec![first.clone()];
                if rng.below(2) == 0 {
                    let other = self.call(rng, steps, next, model);
                    if other.id % CLIENTS == first.id % CLIENTS {
                        calls.push(other);
                    }
                }
                Step::Heartbeat { calls, timeout }
            }
            62..=66 => Step::Cancel(self.call(rng, steps, next, model)),
            67..=71 => Step::Abandon(self.call(rng, steps, next, model)),
            72..=73 => {
                if rng.below(2) == 0 {
                    *force += 1;
                }
                Step::ForceRelease(*force)
            }
            74..=75 => {
                *force += 1;
                Step::Revoke(*force)
            }
            76..=80 if self.kind == LockKind::RwLock => {
                // Mostly a recent upgradable read's call, its hold's token.
                let upgradable: Vec<&Call> = steps
                    .iter()
                    .rev()
                    .take(24)
                    .filter_map(|s| match s {
                        Step::Acquire { call, .. }
                            if call.ask == Ask::RwLock(Access::UpgradableRead) =>
                        {
                            Some(call)
                        }
                        _ => None,
                    })
                    .collect();
                let call = if upgradable.is_empty() || rng.below(4) == 0 {
                    self.call(rng, steps, next, model)
                } else {
                    upgradable[rng.below(upgradable.len() as u64) as usize].clone()
                };
                let token = if rng.below(4) == 0 {
                    Self::token(rng)
                } else {
                    Token::Held
                };
                if rng.below(3) == 0 {
                    let to = [Access::Read, Access::UpgradableRead][rng.below(2) as usize];
                    Step::Downgrade { call, token, to }
                } else {
                    let mode = [None, Some(Mode::Try), Some(Mode::First), Some(Mode::Poll)]
                        [rng.below(4) as usize];
                    Step::Upgrade {
                        call,
                        token,
                        mode,
                        timeout,
                    }
                }
            }
            76..=78 if self.kind == LockKind::Semaphore => {
                Step::SetPermits(1 + rng.below(u64::from(self.capacity) + 1) as u32)
            }
            79..=92 => {
                let ends: Vec<i64> = model.ends().into_iter().filter(|e| *e > now).collect();
                if ends.is_empty() || rng.below(4) == 0 {
                    Step::Clock([1, 300, 1000, 2500][rng.below(4) as usize])
                } else {
                    let end = ends[rng.below(ends.len() as u64) as usize];
                    Step::Clock((end - now + rng.below(3) as i64 - 1).max(1))
                }
            }
            // The last call delivered again (a retry after a lost reply).
            _ => steps
                .iter()
                .rev()
                .find(|s| !matches!(s, Step::Clock(_)))
                .cloned()
                .unwrap_or(Step::Revoke(0)),
        }
    }
}
