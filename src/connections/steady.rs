//! Connections that a signal does not fail.
//!
//! Linux never restarts a socket read or write that has a timeout once a
//! signal handler interrupted it (signal(7)), whatever `SA_RESTART` says:
//! the call returns `EINTR`, which the redis crate reports as an I/O error.
//! Any program that handles a signal meets it (a command runner's
//! `SIGCHLD`, a service's `SIGHUP`, a profiler's `SIGPROF`). std and the
//! redis crate's async side retry [`std::io::ErrorKind::Interrupted`];
//! fairlock keeps every request and connect from being cut short at all:
//! - while a thread sends a request (a command, a script, a pipeline) and
//!   reads its reply, or opens a connection (its handshake), the signals a
//!   program handles are blocked on that thread ([`without_signals`]), so none can
//!   interrupt it. A signal sent to the process goes to another thread that
//!   does not block it (a fatal one still ends the process at once), and
//!   one sent to this very thread runs its handler when the request is
//!   over, within the request's timeout. Sending the request again after
//!   an interruption would not do: the redis crate skips the reply it gave
//!   up on, so a request longer than the gap between signals (a script
//!   library's load) would never get through;
//! - what a blocked signal cannot prevent (a stop and continue, `SIGSTOP`
//!   then `SIGCONT`, also ends a timed read with `EINTR`) is taken again,
//!   within what is left of the request's timeout ([`again`], its reply
//!   waited for no longer than that): a request goes out again on
//!   the same connection (the redis crate skips the reply it did not read,
//!   and every request fairlock sends counts once however often it is
//!   delivered: call ids make a script's repeat answer as the first did,
//!   the rest are reads, loads and subscriptions), a connect is made again;
//! - a pipeline of several requests waits for all its replies within one
//!   timeout ([`pipeline_on`]), as a single request waits for its one;
//! - a subscriber's read, which waits for messages for as long as the
//!   client lives, blocks nothing and is read again when a signal cuts it
//!   short ([`is_interrupted`]).
//!
//! A request still interrupted when its timeout has passed fails as a
//! timeout ("no reply within ..."), never as an unreachable server.

use std::cell::Cell;
use std::time::{Duration, Instant};

use redis::cluster::Connect;
use redis::{ConnectionInfo, ConnectionLike, IntoConnectionInfo, RedisResult, Value};

use crate::error::not_within::{io_error, NotWithin};

/// True for a read or write that a signal cut short (`EINTR`): the
/// connection is fine and the same step can be taken again.
pub(crate) fn is_interrupted(err: &redis::RedisError) -> bool {
    io_error(err).is_some_and(|io| io.kind() == std::io::ErrorKind::Interrupted)
}

/// Runs `step` again while a signal cuts it short, for up to `timeout`
/// (`None`: for as long as signals keep coming); then fails as a timeout.
/// Each attempt is given what is left of the timeout (at least 1 ms;
/// `None` without one), so that a step that waits can wait no longer:
/// the steps and their repeats take one timeout all told.
pub(crate) fn again<T>(
    timeout: Option<Duration>,
    mut step: impl FnMut(Option<Duration>) -> RedisResult<T>,
) -> RedisResult<T> {
    let started = Instant::now();
    let left = || timeout.map(|t| t.saturating_sub(started.elapsed()).max(LEAST));
    loop {
        match step(left()) {
            Err(err) if is_interrupted(&err) => {
                if let Some(timeout) = timeout.filter(|timeout| started.elapsed() >= *timeout) {
                    return Err(not_within(true, timeout));
                }
            }
            other => return other,
        }
    }
}

/// Sends a request on `conn` (whose read timeout is `timeout`) and reads
/// its reply with no signal cutting them short, again if a stop did: a
/// repeat waits for its reply only as long as is left of the timeout, so
/// a reply read says the request ran within one timeout of its first
/// sending (which a release whose client vouches for its lease counts on:
/// `CallHold::vouched_until`). `send` is given what is left of the
/// timeout. The read timeout is put back after a repeat.
pub(crate) fn request_on<T>(
    conn: &mut redis::Connection,
    timeout: Option<Duration>,
    mut send: impl FnMut(&mut redis::Connection, Option<Duration>) -> RedisResult<T>,
) -> RedisResult<T> {
    let mut sent = 0;
    let result = without_signals(|| {
        again(timeout, |left| {
            if let Some(left) = left.filter(|_| sent > 0) {
                conn.set_read_timeout(Some(left))?;
            }
            sent += 1;
            send(conn, left)
        })
    });
    if sent > 1 {
        // A socket that cannot take its timeout back is broken, and its
        // next request fails.
        let _ = conn.set_read_timeout(timeout);
    }
    result
}

/// Runs `step` with the signals a program can handle blocked on this
/// thread (all but `SIGKILL`, `SIGSTOP` and those a fault raises), then
/// puts back the thread's own mask: a signal that arrives meanwhile waits
/// for the end of the step, or goes to another thread of the process.
pub(crate) fn without_signals<T>(step: impl FnOnce() -> T) -> T {
    #[cfg(unix)]
    {
        // SAFETY: sigset_t values initialised by sigfillset/sigemptyset;
        // pthread_sigmask changes this thread's mask only, and the old one
        // is put back when `step` returns or panics (a caller that catches
        // the panic keeps its signals).
        unsafe {
            use libc::{SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGSEGV, SIGSYS, SIGTRAP};
            let mut blocked: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut blocked);
            for fault in [SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT] {
                libc::sigdelset(&mut blocked, fault);
            }
            let mut before: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut before);
            libc::pthread_sigmask(libc::SIG_BLOCK, &blocked, &mut before);
            then_always(step, || {
                libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
            })
        }
    }
    #[cfg(not(unix))]
    step()
}

thread_local! {
    /// When the call this thread runs must have its reply ([`replied_by`]).
    static REPLY_BY: Cell<Option<Instant>> = const { Cell::new(None) };
    /// How much longer a pipeline's replies after its first may take
    /// ([`waiting`]).
    static WAITING: Cell<Duration> = const { Cell::new(Duration::ZERO) };
}

/// Runs `call` with every request it sends on this thread, on a
/// [`Steady`], answered by `by` (`None`: as the timeouts say): a request
/// waits no longer than what is left, and once nothing is left fails at
/// once as a timeout, unsent. A cluster client sends a request that timed
/// out again on its own, up to its retries, each with the whole read
/// timeout the call set: against a node that answers nothing, a call
/// with a deadline took one timeout for each.
pub(crate) fn replied_by<T>(by: Option<Instant>, call: impl FnOnce() -> T) -> T {
    let before = REPLY_BY.replace(by);
    then_always(call, || REPLY_BY.set(before))
}

/// Runs `call`, then `undo`, also when `call` panics: what a call sets on
/// its thread (a deadline, a signal mask) is put back for a caller that
/// catches the panic.
fn then_always<T>(call: impl FnOnce() -> T, undo: impl FnOnce()) -> T {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(call));
    undo();
    result.unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// Runs `call` with the replies after the first of each pipeline it sends
/// on this thread given `wait` more than the timeout, within the call's
/// deadline if any: a `WAIT` for replicas of that timeout among them
/// rightly replies that much later (`sync_replicas`).
pub(crate) fn waiting<T>(wait: Duration, call: impl FnOnce() -> T) -> T {
    let before = WAITING.replace(wait);
    then_always(call, || WAITING.set(before))
}

/// The least a read waits: a read timeout of zero is refused.
const LEAST: Duration = Duration::from_millis(1);

/// Sends the pipeline `cmd` on `conn` and reads its `count` replies (as
/// the redis crate's `req_packed_commands`, which fairlock's pipelines
/// call with no `offset`), waiting for them no longer than `timeout` all
/// told: the crate's own loop waits a whole read timeout for each reply,
/// so a stalled server held a pipeline (a write and its `WAIT`, the
/// watchdog's renewals) one timeout per request. Once a read failed, each
/// reply still to come is given 1 ms, so that the redis crate counts every
/// one it did not read (as a read that timed out) and skips it before the
/// next request's replies. The read timeout is `timeout` again after.
/// The replies after the first may take [`waiting`]'s time more.
fn pipeline_on(
    conn: &mut redis::Connection,
    cmd: &[u8],
    count: usize,
    timeout: Duration,
) -> RedisResult<Vec<Value>> {
    let by = Instant::now() + timeout;
    let later = by + WAITING.get();
    let by = REPLY_BY
        .get()
        .map_or(later, |deadline| later.min(deadline.max(by)));
    conn.send_packed_command(cmd)?;
    let (mut replies, mut failed) = (Vec::with_capacity(count), None);
    // Replies read, or counted by the crate as not read.
    let mut done = 0;
    while done < count {
        // The first reply waits as the socket says: `timeout`.
        let wait = match failed {
            Some(_) => Some(LEAST),
            None if done == 0 => None,
            None => Some(by.saturating_duration_since(Instant::now()).max(LEAST)),
        };
        if let Err(err) = wait.map_or(Ok(()), |wait| conn.set_read_timeout(Some(wait))) {
            failed.get_or_insert(err);
            break;
        }
        match conn.recv_response() {
            // A RESP3 push between replies is not one of them.
            Ok(Value::Push { .. }) => continue,
            Ok(reply) if failed.is_none() => replies.push(reply),
            Ok(_) => {}
            Err(err) => failed = failed.or(Some(err)),
        }
        done += 1;
    }
    if done > 1 || failed.is_some() {
        let put_back = conn.set_read_timeout(Some(timeout));
        failed = failed.or(put_back.err());
    }
    failed.map_or(Ok(replies), Err)
}

/// A timeout error ([`NotWithin`]): a reply (`reply`) or a connect came
/// not within `timeout`.
fn not_within(reply: bool, timeout: Duration) -> redis::RedisError {
    std::io::Error::new(std::io::ErrorKind::TimedOut, NotWithin { reply, timeout }).into()
}

/// `result`, a timeout in words if it is one (see [`not_within`]).
pub(crate) fn worded<T>(result: RedisResult<T>, timeout: Option<Duration>) -> RedisResult<T> {
    match (result, timeout) {
        (Err(err), Some(timeout)) if err.is_timeout() => Err(not_within(true, timeout)),
        (result, _) => result,
    }
}

/// A connection whose requests a signal does not fail (see the module's
/// doc), and which sends no `CLIENT SETINFO` (see `connections::quiet`):
/// every connection fairlock sends requests on, pooled or its own, and each
/// node connection of its cluster connections.
pub(crate) struct Steady {
    conn: redis::Connection,
    /// The read timeout set on the connection, which bounds a request's
    /// repeats too. A cell, as the cluster client sets it through `&self`.
    timeout: Cell<Option<Duration>>,
}

impl Steady {
    /// Connects to `client` within `timeout` (`None`: no limit), and
    /// within what is left of the call's time if it has a deadline
    /// ([`replied_by`]: a node connection the cluster client opens in the
    /// middle of a call waited the whole connect timeout, once per try),
    /// again if a signal cut the connect or its handshake short; no read
    /// or write timeout set yet ([`Link::set_timeouts`](Link::set_timeouts)).
    pub(crate) fn connect_to(
        client: &redis::Client,
        timeout: Option<Duration>,
    ) -> RedisResult<Steady> {
        let left =
            (REPLY_BY.get()).map(|by| by.saturating_duration_since(Instant::now()).max(LEAST));
        let timeout = left.map_or(timeout, |left| Some(timeout.map_or(left, |t| t.min(left))));
        let conn = without_signals(|| {
            again(timeout, |left| match left {
                Some(left) => client.get_connection_with_timeout(left),
                None => client.get_connection(),
            })
        });
        let conn = conn.map_err(|err| match timeout {
            Some(timeout) if err.is_timeout() => not_within(false, timeout),
            _ => err,
        });
        Ok(Steady {
            conn: conn?,
            timeout: Cell::new(None),
        })
    }

    /// Sends a request and reads its reply with no signal cutting them
    /// short, again if a stop did, within the timeout all told
    /// ([`request_on`]); a timeout in words.
    fn request<T>(
        &mut self,
        send: impl FnMut(&mut redis::Connection, Option<Duration>) -> RedisResult<T>,
    ) -> RedisResult<T> {
        let mut timeout = self.timeout.get();
        // Within what is left of the call's time, if it has a deadline
        // (`replied_by`); its timeout, in words, as the call set it.
        let worded_as = timeout;
        if let Some(by) = REPLY_BY.get() {
            let left = by.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(not_within(true, worded_as.unwrap_or(left)));
            }
            // Not for the first request of a call, whose timeout was
            // just capped at what was left (no syscall on the fast path).
            if timeout.is_none_or(|timeout| left + LEAST < timeout) {
                self.conn.set_read_timeout(Some(left))?;
                self.conn.set_write_timeout(Some(left))?;
                timeout = Some(left);
            }
        }
        let result = request_on(&mut self.conn, timeout, send);
        if timeout != worded_as {
            // A socket that cannot take its timeout back is broken, and
            // its next request fails.
            let _ = self.conn.set_read_timeout(worded_as);
            let _ = self.conn.set_write_timeout(worded_as);
        }
        worded(result, worded_as)
    }

    /// The connection itself, for a subscription, whose reads are retried
    /// where they are made.
    pub(crate) fn into_inner(self) -> redis::Connection {
        self.conn
    }
}

/// The timeouts bound a request's repeats after a signal too.
impl Link for Steady {
    fn set_timeouts(&self, timeout: Duration) -> RedisResult<()> {
        self.set_write_timeout(Some(timeout))?;
        self.set_read_timeout(Some(timeout))
    }
}

impl ConnectionLike for Steady {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        let reply = self.request(|conn, _| conn.req_packed_command(cmd))?;
        try_again(&reply).map_or(Ok(reply), Err)
    }

    /// A pipeline of several requests waits for all its replies no longer
    /// than the timeout ([`pipeline_on`]).
    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        let replies = self.request(|conn, left| match left {
            Some(left) if offset == 0 && count > 1 => pipeline_on(conn, cmd, count, left),
            _ => conn.req_packed_commands(cmd, offset, count),
        })?;
        replies.iter().find_map(try_again).map_or(Ok(replies), Err)
    }

    fn get_db(&self) -> i64 {
        self.conn.get_db()
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.conn.is_open()
    }
}

/// A `TRYAGAIN` reply (a cluster slot being moved), a `CLUSTERDOWN` (a
/// cluster that lost a master not failed over yet) or a `LOADING` (a node
/// loading its data) as an error of that code which the cluster client
/// does not try again itself: it would wait 100 ms to 1 s between its
/// tries whatever a call's deadline or command timeout. The caller tries
/// a slot move and a cluster down again within them (`Caller`'s slot
/// moves); a `LOADING` fails the call at once, as on one server.
fn try_again(reply: &Value) -> Option<redis::RedisError> {
    use redis::ServerErrorKind::{BusyLoading, ClusterDown, TryAgain};
    match reply {
        Value::ServerError(err)
            if matches!(err.kind(), Some(TryAgain | ClusterDown | BusyLoading)) =>
        {
            let detail = err.details().map(str::to_owned);
            Some(redis::make_extension_error(err.code().to_owned(), detail))
        }
        _ => None,
    }
}

/// The node connections of fairlock's cluster connections (the redis
/// crate's cluster client opens and drives them).
impl Connect for Steady {
    fn connect<T: IntoConnectionInfo>(info: T, timeout: Option<Duration>) -> RedisResult<Self> {
        // The cluster client drops the seeds' `skip_set_lib_name` on the
        // connections it opens to the nodes: set again here.
        let client = redis::Client::open(quiet_info(info.into_connection_info()?))?;
        // Its first `PING` is read before the cluster client sets its own
        // timeout: within the connect timeout, not for ever.
        let steady = Steady::connect_to(&client, timeout)?;
        Connect::set_read_timeout(&steady, timeout)?;
        Ok(steady)
    }

    fn send_packed_command(&mut self, cmd: &[u8]) -> RedisResult<()> {
        self.conn.send_packed_command(cmd)
    }

    fn set_write_timeout(&self, dur: Option<Duration>) -> RedisResult<()> {
        self.conn.set_write_timeout(dur)
    }

    /// Also bounds a request's repeats after a signal (see `request`).
    fn set_read_timeout(&self, dur: Option<Duration>) -> RedisResult<()> {
        self.conn.set_read_timeout(dur)?;
        self.timeout.set(dur);
        Ok(())
    }

    fn recv_response(&mut self) -> RedisResult<Value> {
        without_signals(|| self.conn.recv_response())
    }
}

/// A connection fairlock sends requests on, pooled or its own: a
/// [`Steady`] (to one server or node) or a cluster connection.
pub(crate) trait Link: ConnectionLike + Send {
    /// Sets how long a request may wait to send and for its reply.
    fn set_timeouts(&self, timeout: Duration) -> redis::RedisResult<()>;
}

/// Connection settings that do not send `CLIENT SETINFO` at connect
/// (see `connections::quiet`).
pub(crate) fn quiet_info(info: ConnectionInfo) -> ConnectionInfo {
    let settings = info.redis_settings().clone().set_skip_set_lib_name();
    info.set_redis_settings(settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind::{ConnectionReset, Interrupted, TimedOut, WouldBlock};

    fn io_error(kind: std::io::ErrorKind) -> redis::RedisError {
        std::io::Error::from(kind).into()
    }

    #[test]
    fn only_an_interrupted_step_is_taken_again() {
        assert!(is_interrupted(&io_error(Interrupted)));
        for kind in [WouldBlock, TimedOut, ConnectionReset] {
            assert!(!is_interrupted(&io_error(kind)), "{kind:?}");
        }
        let mut cuts = 3;
        let answer = again(Some(Duration::from_secs(5)), |_| {
            if cuts == 0 {
                return Ok(7);
            }
            cuts -= 1;
            Err(io_error(Interrupted))
        });
        assert_eq!(answer.unwrap(), 7);
    }

    #[test]
    fn signals_that_never_stop_end_as_a_timeout_in_words() {
        let started = Instant::now();
        let err = again::<()>(Some(Duration::from_millis(50)), |_| {
            Err(io_error(Interrupted))
        })
        .unwrap_err();
        assert!(started.elapsed() >= Duration::from_millis(50));
        assert!(err.is_timeout(), "{err}");
        assert!(err.to_string().contains("no reply within 50 ms"), "{err}");
    }

    /// This thread's signal mask.
    #[cfg(unix)]
    fn blocked_now() -> Vec<bool> {
        // SAFETY: a sigset_t initialised by sigemptyset, filled by
        // pthread_sigmask with this thread's mask (no change asked).
        unsafe {
            let mut now: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut now);
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            (1..32)
                .map(|signal| libc::sigismember(&now, signal) == 1)
                .collect()
        }
    }

    #[test]
    fn a_call_that_panics_leaves_its_thread_as_it_found_it() {
        let by = Instant::now() + Duration::from_secs(60);
        let panicked = std::panic::catch_unwind(|| {
            replied_by(Some(by), || {
                waiting(Duration::from_secs(9), || {
                    without_signals(|| panic!("a bug"))
                })
            })
        });
        assert!(panicked.is_err());
        assert_eq!(REPLY_BY.get(), None);
        assert_eq!(WAITING.get(), Duration::ZERO);
        #[cfg(unix)]
        {
            let before = blocked_now();
            assert!(
                !before[libc::SIGINT as usize - 1],
                "SIGINT is not blocked here"
            );
            let _ = std::panic::catch_unwind(|| without_signals(|| panic!("a bug")));
            assert_eq!(blocked_now(), before, "the signal mask is put back");
        }
    }
}
