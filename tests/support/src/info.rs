//! What a server says about itself: `INFO` fields, `CLIENT LIST`
//! subscribers, and keys without a TTL; and what a test makes it do to its
//! clients (kill the subscribers, lose the scripts, pause).

use std::time::{Duration, Instant};

use crate::Dial;

/// One numeric field of `INFO <section>`.
pub fn info_field(conn: &mut redis::Connection, section: &str, field: &str) -> i64 {
    let info: String = redis::cmd("INFO").arg(section).query(conn).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .trim()
        .parse()
        .unwrap()
}

/// Whether the master's replicas (`want` of them) acknowledge a write, as
/// `WAIT` counts them: what a lock write with `sync_replicas` needs.
/// `connected_slaves` counts a replica from its first `SYNC`, while the
/// master still streams the snapshot or waits for its first `REPLCONF ACK`,
/// and a `WAIT` in that window times out.
pub fn replicas_acknowledge(conn: &mut redis::Connection, want: i64) -> bool {
    let _: () = redis::cmd("SET")
        .arg("fairlock-test:replica-probe")
        .arg(1)
        .arg("PX")
        .arg(10_000)
        .query(conn)
        .unwrap();
    let acked: i64 = redis::cmd("WAIT").arg(want).arg(250).query(conn).unwrap();
    acked >= want
}

/// `connected_clients` from `INFO clients`.
pub fn connected_clients(conn: &mut redis::Connection) -> i64 {
    info_field(conn, "clients", "connected_clients")
}

/// Every key under `pattern` that has no TTL.
pub fn keys_without_ttl(conn: &mut redis::Connection, pattern: &str) -> Vec<String> {
    let keys: Vec<String> = redis::cmd("KEYS").arg(pattern).query(conn).unwrap();
    keys.into_iter()
        .filter(|k| redis::cmd("PTTL").arg(k).query::<i64>(conn).unwrap() == -1)
        .collect()
}

/// Connections blocked in a `WAIT` for replicas (`CLIENT LIST`: flag `b`,
/// last command `wait`).
pub fn clients_blocked_in_wait(conn: &mut redis::Connection) -> usize {
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(conn).unwrap();
    let field = |line: &str, name: &str| {
        line.split(' ')
            .find_map(|word| word.strip_prefix(name))
            .unwrap_or_default()
            .to_owned()
    };
    clients
        .lines()
        .filter(|l| field(l, "flags=").contains('b') && field(l, "cmd=") == "wait")
        .count()
}

/// Connections subscribed to at least one channel (`CLIENT LIST`).
pub fn pubsub_clients(conn: &mut redis::Connection) -> usize {
    let clients: String = redis::cmd("CLIENT").arg("LIST").query(conn).unwrap();
    clients.lines().filter(|l| l.contains(" sub=1 ")).count()
}

/// Script calls the server has run so far: `FCALL`s of fairlock's library
/// and `EVALSHA`s (a client calls one or the other: see
/// [`script_command`]).
pub fn script_calls(conn: &mut redis::Connection) -> i64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(conn).unwrap();
    ["cmdstat_fcall:calls=", "cmdstat_evalsha:calls="]
        .iter()
        .filter_map(|prefix| info.lines().find_map(|l| l.strip_prefix(prefix)))
        .map(|rest| rest.split(',').next().unwrap().parse::<i64>().unwrap())
        .sum()
}

/// Makes the server lose fairlock's scripts: `SCRIPT FLUSH`, and where
/// the clients call the library (see [`script_command`]) `FUNCTION FLUSH`,
/// as a restart without persistence or a failover to an empty replica
/// would.
pub fn lose_scripts(conn: &mut redis::Connection) {
    let () = redis::cmd("SCRIPT").arg("FLUSH").query(conn).unwrap();
    if script_command() == "FCALL" {
        let () = redis::cmd("FUNCTION").arg("FLUSH").query(conn).unwrap();
    }
}

/// The command a client with every permission calls its scripts with on
/// the test server: `FCALL` where the server has Functions (Redis 7.0 and
/// later, Valkey), `EVALSHA` before.
pub fn script_command() -> &'static str {
    if crate::server_version() >= (7, 0, 0) || crate::server_is_valkey() {
        "FCALL"
    } else {
        "EVALSHA"
    }
}

/// Cuts every subscribed connection (`CLIENT KILL TYPE pubsub`); returns how many.
pub fn kill_subscribers(conn: &mut redis::Connection) -> i64 {
    redis::cmd("CLIENT")
        .arg("KILL")
        .arg("TYPE")
        .arg("pubsub")
        .query(conn)
        .unwrap()
}

/// Holds back the server's clients for `length` (`CLIENT PAUSE`; `what`
/// "WRITE" holds every script and write, "ALL" every command): a paused
/// server, as a stalled process or a slow link looks to a client. Returns
/// when the pause began.
pub fn pause_clients(conn: &mut redis::Connection, what: &str, length: Duration) -> Instant {
    let () = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(length.as_millis() as u64)
        .arg(what)
        .query(conn)
        .unwrap();
    Instant::now()
}

/// Kills the newest pub/sub connection of `conn`'s server among those
/// whose `CLIENT LIST` line `pick` keeps (say a shard subscription's,
/// " ssub=1 "), as a link that died looks to its client.
pub fn kill_newest_subscriber(conn: &mut redis::Connection, pick: impl Fn(&str) -> bool) {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .arg("TYPE")
        .arg("pubsub")
        .query(conn)
        .unwrap();
    let newest = (list.lines())
        .filter(|line| pick(line))
        .filter_map(|line| {
            line.strip_prefix("id=")?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .max()
        .expect("a pub/sub connection");
    let () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(newest)
        .query(conn)
        .unwrap();
}

/// One command on a fresh connection to `port` made by `dial`, as a
/// string reply.
pub(crate) fn query_string(dial: &Dial, port: u16, args: &[&str]) -> Result<String, String> {
    let mut conn = dial.conn(port)?;
    let mut cmd = redis::cmd(args[0]);
    for arg in &args[1..] {
        cmd.arg(*arg);
    }
    cmd.query::<String>(&mut conn)
        .map_err(|e| format!("{} on port {port}: {e}", args.join(" ")))
}

/// The value of `field` in an INFO-style `field:value` text.
pub(crate) fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// `INFO replication` of the server on `port`.
pub(crate) fn info_replication(dial: &Dial, port: u16) -> Result<String, String> {
    query_string(dial, port, &["INFO", "replication"])
}

/// `Ok` once the replica on `replica` acknowledged what the master on
/// `master` wrote (`WAIT 1 1000`): a topology is ready only then, so a
/// test's first `sync_replicas` write does not wait out a link still
/// settling.
pub(crate) fn replica_acknowledges(dial: &Dial, master: u16, replica: u16) -> Result<(), String> {
    let acked: i64 = redis::cmd("WAIT")
        .arg(1)
        .arg(1000)
        .query(&mut dial.conn(master)?)
        .map_err(|e| format!("WAIT on master {master}: {e}"))?;
    if acked < 1 {
        return Err(format!(
            "replica {replica} did not acknowledge master {master}"
        ));
    }
    Ok(())
}
