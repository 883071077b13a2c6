//! The data format: which layout of keys and values a build writes.

/// The data format of the keys and values this build of fairlock writes
/// in Redis, defined once in build.rs. Each lock's anchor value (a mutex's
/// or an election's lock key, a semaphore's or a reader-writer lock's meta)
/// starts with it, `v<format>`, and every script checks it before it reads
/// anything else of the lock: a build meets a lock of another format (or of
/// no format: a fairlock from before formats) with
/// [`ErrorKind::FormatMismatch`](crate::ErrorKind::FormatMismatch), never
/// misreading it or taking it for free. Builds of one format share locks;
/// see docs/compatibility.md for a deploy across a change of format.
///
/// ```
/// assert!(fairlock::DATA_FORMAT >= 1);
/// ```
pub const DATA_FORMAT: u32 = include!(concat!(env!("OUT_DIR"), "/format.rs"));
