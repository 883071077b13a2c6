//! A server kept busy by someone's long script: past its `lua-time-limit`
//! it answers every call `BUSY` until the script is killed.

use std::thread::JoinHandle;
use std::time::Duration;

use crate::{join_within, wait_until, RedisServer};

/// A script that runs until killed (turns counted, not `TIME` read:
/// Valkey gives a script one time; 2e9 turns, tens of seconds, at most),
/// started on a server with a `lua-time-limit` of 100 ms.
pub struct BusyScript {
    conn: redis::Connection,
    script: JoinHandle<redis::RedisResult<i64>>,
}

impl BusyScript {
    /// Starts the script on `server`; returns once the server answers
    /// `BUSY`.
    pub fn start(server: &RedisServer) -> BusyScript {
        let mut conn = server.conn();
        let set = ["SET", "lua-time-limit", "100"];
        redis::cmd("CONFIG")
            .arg(&set[..])
            .query::<()>(&mut conn)
            .unwrap();
        let mut busy_conn = server.conn();
        let script = std::thread::spawn(move || {
            redis::cmd("EVAL")
                .arg("local n = 0 while n < 2e9 do n = n + 1 end return n")
                .arg(0)
                .query::<i64>(&mut busy_conn)
        });
        let mut busy = BusyScript { conn, script };
        let refusing = wait_until(Duration::from_secs(5), || busy.is_refusing());
        assert!(refusing, "the server never replied BUSY");
        busy
    }

    /// True while the server answers `BUSY`.
    pub fn is_refusing(&mut self) -> bool {
        redis::cmd("PING")
            .query::<String>(&mut self.conn)
            .is_err_and(|err| err.code() == Some("BUSY"))
    }

    /// Kills the script (asserting it still ran) and waits for it to end.
    pub fn kill(mut self) {
        assert!(self.is_refusing(), "the script ended before it was killed");
        let () = redis::cmd("SCRIPT")
            .arg("KILL")
            .query(&mut self.conn)
            .unwrap();
        let ended = join_within(self.script, Duration::from_secs(5), "the busy script");
        assert!(ended.is_err(), "the busy script was not killed: {ended:?}");
    }
}
