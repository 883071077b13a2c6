//! The kinds of lock `fairlock run` can take (the mutex, a permit of a
//! semaphore, a read or write hold of a reader-writer lock) behind one
//! small interface, so that the run loop, the waiting line and the
//! messages are written once for all of them.

use std::time::Duration;

use fairlock::{
    Access, FairMutex, FairMutexGuard, FairRwLock, FairSemaphore, LeaseSignal, ReadGuard, Result,
    SemaphorePermit, WaitCanceller, WriteGuard,
};

use crate::progress::View;

/// What `run` waits for: one lock of one name, of one kind.
#[derive(Clone)]
pub enum Lock {
    /// The mutex (flock's default).
    Mutex(FairMutex),
    /// A permit of the semaphore (`--permits N`).
    Semaphore(FairSemaphore),
    /// The reader-writer lock, to read: shared with other readers
    /// (`--shared`, flock's `-s`).
    Read(FairRwLock),
    /// The reader-writer lock, to write: alone (`--exclusive`, flock's `-x`).
    Write(FairRwLock),
}

/// What `run` holds while the command runs.
pub enum Held {
    Mutex(FairMutexGuard),
    Permit(SemaphorePermit),
    Read(ReadGuard),
    Write(WriteGuard),
}

impl Lock {
    /// The lock's name.
    pub fn name(&self) -> &str {
        match self {
            Lock::Mutex(mutex) => mutex.name(),
            Lock::Semaphore(semaphore) => semaphore.name(),
            Lock::Read(rwlock) | Lock::Write(rwlock) => rwlock.name(),
        }
    }

    /// The same lock, held with a fixed `lease` no watchdog renews.
    pub fn with_lease(&self, lease: Duration) -> Lock {
        match self {
            Lock::Mutex(mutex) => Lock::Mutex(mutex.with_lease(lease)),
            Lock::Semaphore(semaphore) => Lock::Semaphore(semaphore.with_lease(lease)),
            Lock::Read(rwlock) => Lock::Read(rwlock.with_lease(lease)),
            Lock::Write(rwlock) => Lock::Write(rwlock.with_lease(lease)),
        }
    }

    /// The same lock, each hold renewed for at most `max_hold`.
    pub fn with_max_hold(&self, max_hold: Duration) -> Lock {
        match self {
            Lock::Mutex(mutex) => Lock::Mutex(mutex.with_max_hold(max_hold)),
            Lock::Semaphore(semaphore) => Lock::Semaphore(semaphore.with_max_hold(max_hold)),
            Lock::Read(rwlock) => Lock::Read(rwlock.with_max_hold(max_hold)),
            Lock::Write(rwlock) => Lock::Write(rwlock.with_max_hold(max_hold)),
        }
    }

    /// How messages name it: `"deploy"` for the mutex, as ever;
    /// `"deploy" (3 permits)` for a semaphore, `"deploy" (shared)` and
    /// `"deploy" (exclusive)` for the reader-writer lock.
    pub fn describe(&self) -> String {
        match self {
            Lock::Mutex(mutex) => format!("{:?}", mutex.name()),
            Lock::Semaphore(semaphore) => format!(
                "{:?} ({} permit{})",
                semaphore.name(),
                semaphore.permits(),
                if semaphore.permits() == 1 { "" } else { "s" }
            ),
            Lock::Read(rwlock) => format!("{:?} (shared)", rwlock.name()),
            Lock::Write(rwlock) => format!("{:?} (exclusive)", rwlock.name()),
        }
    }

    /// What is held, in "lost ... on NAME": "the lock", "the permit".
    pub fn what(&self) -> &'static str {
        match self {
            Lock::Mutex(_) => "the lock",
            Lock::Semaphore(_) => "the permit",
            Lock::Read(_) => "the read lock",
            Lock::Write(_) => "the write lock",
        }
    }

    /// Waits in arrival order for at most `patience` (`None`: no limit)
    /// or until `cancel` is cancelled; `Ok(None)` then, with the queue
    /// entry removed.
    pub fn wait(&self, patience: Option<Duration>, cancel: &WaitCanceller) -> Result<Option<Held>> {
        Ok(match self {
            Lock::Mutex(mutex) => mutex.lock_cancellable(patience, cancel)?.map(Held::Mutex),
            Lock::Semaphore(semaphore) => semaphore
                .acquire_cancellable(patience, cancel)?
                .map(Held::Permit),
            Lock::Read(rwlock) => rwlock.read_cancellable(patience, cancel)?.map(Held::Read),
            Lock::Write(rwlock) => rwlock.write_cancellable(patience, cancel)?.map(Held::Write),
        })
    }

    /// Where `client_id` waits and how long the holders have left, for
    /// the waiting line (reading at most `max` waiters).
    pub fn view(&self, max: usize, client_id: &str) -> Result<View> {
        Ok(match self {
            Lock::Mutex(mutex) => View::of(&mutex.status(max)?, client_id),
            Lock::Semaphore(semaphore) => View::of_semaphore(&semaphore.status(max)?, client_id),
            Lock::Read(rwlock) | Lock::Write(rwlock) => {
                View::of_rwlock(&rwlock.status(max)?, client_id)
            }
        })
    }

    /// Who holds the lock now, as "client ID, token N" (the first holder
    /// by lease end for a semaphore or a reader-writer lock); `None` if
    /// nobody or unknown.
    pub fn holder_now(&self) -> Option<String> {
        match self {
            Lock::Mutex(mutex) => mutex.status(0).ok()?.holder.map(|holder| {
                format!(
                    "client {}, token {}",
                    holder.who.client_id(),
                    holder.fencing_token
                )
            }),
            Lock::Semaphore(semaphore) => {
                let status = semaphore.status(1).ok()?;
                status.holders.first().map(|holder| {
                    format!(
                        "client {}, token {} (one of {} holders)",
                        holder.who.client_id(),
                        holder.fencing_token,
                        status.holder_count
                    )
                })
            }
            Lock::Read(rwlock) | Lock::Write(rwlock) => {
                let status = rwlock.status(1).ok()?;
                status.holders.first().map(|holder| {
                    format!(
                        "client {}, token {} ({}, one of {} holders)",
                        holder.who.client_id(),
                        holder.fencing_token,
                        holder.access.map_or("", access_word),
                        status.holder_count
                    )
                })
            }
        }
    }
}

impl Held {
    /// The fencing token of this hold (`FAIRLOCK_TOKEN`).
    pub fn fencing_token(&self) -> u64 {
        match self {
            Held::Mutex(guard) => guard.fencing_token(),
            Held::Permit(permit) => permit.fencing_token(),
            Held::Read(guard) => guard.fencing_token(),
            Held::Write(guard) => guard.fencing_token(),
        }
    }

    /// Wakes a waiting thread the moment the lease is lost.
    pub fn lease_signal(&self) -> LeaseSignal {
        match self {
            Held::Mutex(guard) => guard.lease_signal(),
            Held::Permit(permit) => permit.lease_signal(),
            Held::Read(guard) => guard.lease_signal(),
            Held::Write(guard) => guard.lease_signal(),
        }
    }

    /// True once the hold is known to be gone.
    pub fn is_lease_lost(&self) -> bool {
        match self {
            Held::Mutex(guard) => guard.is_lease_lost(),
            Held::Permit(permit) => permit.is_lease_lost(),
            Held::Read(guard) => guard.is_lease_lost(),
            Held::Write(guard) => guard.is_lease_lost(),
        }
    }

    /// Gives the hold back; a lost one is an error that `is_lease_lost`.
    pub fn release(self) -> Result<()> {
        match self {
            Held::Mutex(guard) => guard.unlock(),
            Held::Permit(permit) => permit.release(),
            Held::Read(guard) => guard.unlock(),
            Held::Write(guard) => guard.unlock(),
        }
    }
}

/// How `status` and the messages say a reader-writer hold's access.
pub fn access_word(access: Access) -> &'static str {
    match access {
        Access::Read => "read",
        Access::Write => "write",
    }
}
