//! The public surface, checked by the compiler: every kind of request (a
//! mutex's lock, n permits of a semaphore, a read, a write, a multi-lock,
//! a campaign) has every way of waiting (forever, not at all, at most a
//! duration, until an instant, each also ending on a canceller) in both
//! ownership modes, returns its kind's guard, and every guard has the one
//! release verb (`unlock`). A combination that is missing, or written for
//! one ownership mode only, does not compile. No server is needed: the
//! functions below are type-checked and instantiated, not run.

use std::time::{Duration, Instant};

use fairlock::{
    kind, AnyGuard, Bound, Election, FairMultiLock, FairMutex, FairMutexGuard, FairRwLock,
    FairSemaphore, Guard, Leadership, MultiGuard, Ownership, ReadGuard, Result, SemaphorePermit,
    Unbound, Wait, WaitCanceller, WriteGuard,
};

/// Every way of waiting, as the general methods take it.
fn every_wait(cancel: &WaitCanceller) -> Vec<Wait> {
    let timeout = Duration::from_millis(10);
    let deadline = Instant::now() + timeout;
    let plain = [
        Wait::forever(),
        Wait::not_at_all(),
        Wait::at_most(timeout),
        Wait::until(deadline),
    ];
    let cancellable = plain.clone().map(|wait| wait.cancelled_by(cancel));
    plain.into_iter().chain(cancellable).collect()
}

/// The one release verb, on a guard of any kind and owner.
fn release<K: kind::HoldKind, O: Ownership>(guard: Guard<K, O>) -> Result<()> {
    guard.unlock()
}

fn mutex<O: Ownership>(lock: &FairMutex<O>, waits: &[Wait]) -> Result<()> {
    let forever: FairMutexGuard<O> = lock.lock()?;
    release(forever)?;
    let not_at_all: Option<FairMutexGuard<O>> = lock.try_lock()?;
    let at_most: Option<FairMutexGuard<O>> = lock.try_lock_for(Duration::ZERO)?;
    not_at_all
        .into_iter()
        .chain(at_most)
        .try_for_each(release)?;
    for wait in waits {
        let any: Option<FairMutexGuard<O>> = lock.lock_with(wait.clone())?;
        any.map(release).transpose()?;
    }
    Ok(())
}

fn semaphore<O: Ownership>(lock: &FairSemaphore<O>, waits: &[Wait]) -> Result<()> {
    let one: SemaphorePermit<O> = lock.acquire()?;
    let many: SemaphorePermit<O> = lock.acquire_many(2)?;
    release(one)?;
    release(many)?;
    let short_forms: [Option<SemaphorePermit<O>>; 4] = [
        lock.try_acquire()?,
        lock.try_acquire_many(2)?,
        lock.try_acquire_for(Duration::ZERO)?,
        lock.try_acquire_many_for(2, Duration::ZERO)?,
    ];
    short_forms.into_iter().flatten().try_for_each(release)?;
    for wait in waits {
        let one: Option<SemaphorePermit<O>> = lock.acquire_with(wait.clone())?;
        let many: Option<SemaphorePermit<O>> = lock.acquire_many_with(2, wait.clone())?;
        one.into_iter().chain(many).try_for_each(release)?;
    }
    Ok(())
}

fn rwlock<O: Ownership>(lock: &FairRwLock<O>, waits: &[Wait]) -> Result<()> {
    let read: ReadGuard<O> = lock.read()?;
    release(read)?;
    let write: WriteGuard<O> = lock.write()?;
    release(write)?;
    let reads: [Option<ReadGuard<O>>; 2] = [lock.try_read()?, lock.try_read_for(Duration::ZERO)?];
    reads.into_iter().flatten().try_for_each(release)?;
    let writes: [Option<WriteGuard<O>>; 2] =
        [lock.try_write()?, lock.try_write_for(Duration::ZERO)?];
    writes.into_iter().flatten().try_for_each(release)?;
    for wait in waits {
        let read: Option<ReadGuard<O>> = lock.read_with(wait.clone())?;
        read.map(release).transpose()?;
        let write: Option<WriteGuard<O>> = lock.write_with(wait.clone())?;
        write.map(release).transpose()?;
    }
    Ok(())
}

fn multi<O: Ownership>(lock: &FairMultiLock<O>, waits: &[Wait]) -> Result<()> {
    let forever: MultiGuard<O> = lock.lock()?;
    forever.unlock()?;
    let short_forms: [Option<MultiGuard<O>>; 2] =
        [lock.try_lock()?, lock.try_lock_for(Duration::ZERO)?];
    short_forms
        .into_iter()
        .flatten()
        .try_for_each(MultiGuard::unlock)?;
    for wait in waits {
        let all: Option<MultiGuard<O>> = lock.lock_with(wait.clone())?;
        if let Some(all) = all {
            let _parts: &[AnyGuard<O>] = all.parts();
            all.unlock()?;
        }
    }
    Ok(())
}

fn election<O: Ownership>(lock: &Election<O>, waits: &[Wait]) -> Result<()> {
    let forever: Leadership<O> = lock.with_value("node-1").campaign()?;
    release(forever)?;
    let short_forms: [Option<Leadership<O>>; 2] =
        [lock.try_campaign()?, lock.try_campaign_for(Duration::ZERO)?];
    short_forms.into_iter().flatten().try_for_each(release)?;
    for wait in waits {
        let led: Option<Leadership<O>> = lock.campaign_with(wait.clone())?;
        led.map(release).transpose()?;
    }
    Ok(())
}

#[test]
fn every_request_has_every_way_of_waiting_in_both_ownership_modes() {
    let cancel = WaitCanceller::new();
    let waits = every_wait(&cancel);
    assert_eq!(
        waits.len(),
        8,
        "four limits, each with and without a canceller"
    );
    // Instantiated for both owners: a request written for one only fails
    // to compile here (each function above is generic over the owner).
    let _ = (mutex::<Bound>, mutex::<Unbound>);
    let _ = (semaphore::<Bound>, semaphore::<Unbound>);
    let _ = (rwlock::<Bound>, rwlock::<Unbound>);
    let _ = (multi::<Bound>, multi::<Unbound>);
    let _ = (election::<Bound>, election::<Unbound>);
    // Every kind of guard has the release verb, in both modes.
    let _ = (
        release::<kind::Mutex, Bound>,
        release::<kind::Semaphore, Unbound>,
    );
    let _ = (
        release::<kind::Read, Bound>,
        release::<kind::Write, Unbound>,
    );
    let _ = (
        release::<kind::Election, Bound>,
        release::<kind::Any, Unbound>,
    );
}
