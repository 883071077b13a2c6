//! The floor of fairlock's mutex cycle and handoff, measured beside them:
//! a Functions library (`floor.lua`) that does only what the cycle's fast
//! paths (and the handoff's arrival and release) do, with every guarantee
//! they keep, on fairlock's keys and data format; the cycle once with
//! fairlock's arguments as its client sends them, once with them packed
//! as the fast paths use them (the hold as written, the PX, the values a
//! release compares and writes). What fairlock spends above the first is
//! its Lua; what the first spends above the second, its arguments'
//! layout. Beside them the same floors on a layout fairlock does not use
//! (`Layout::Entries`), to show what a layout buys, and the handoff on one
//! whose queue entries carry their deadline in their score
//! (`Layout::Scored`). (A directory module, so cargo does not take it for a
//! bench target.)

use fairlock::__test_support::words;

/// The library's source.
const SOURCE: &str = include_str!("floor.lua");

/// Loads the library; false where the server has no Functions (before
/// Redis 7.0).
pub fn load(conn: &mut redis::Connection) -> bool {
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(SOURCE.replace("@FORMAT@", &fairlock::DATA_FORMAT.to_string()))
        .query::<String>(conn)
        .is_ok()
}

/// How a floor cycle's calls carry their arguments, and on which layout.
#[derive(Clone, Copy, Debug)]
pub enum Layout {
    /// As fairlock's client sends its mutex calls today.
    Fairlocks,
    /// Packed as the fast paths use them.
    Packed,
    /// fairlock's arguments on a layout it does not use: queue entries
    /// that carry their deadline, a hold's key that lives its lease
    /// (floor.lua, `floor_entries_*`; fairlock's two keys).
    Entries,
    /// fairlock's arguments, lock key and queue entries, each entry's
    /// liveness deadline in its score beside its arrival number
    /// (floor.lua, `floor_scored_*`; its cycle is `Fairlocks`').
    Scored,
}

impl Layout {
    /// The lock key's value of a hold of `owner`'s call `id` with `token`,
    /// nobody queued, and its PX: what a take of this layout writes.
    pub fn held(self, token: i64, owner: &str, id: u64) -> (String, u64) {
        let format = fairlock::DATA_FORMAT;
        match self {
            Layout::Entries => (format!("e{format} {token} {owner}#{id} - -"), 60_000),
            _ => (format!("v{format} {token} {owner}#{id} 600000 -"), 660_000),
        }
    }
}

/// `FCALL function` on `keys` with `args`.
fn fcall<T: redis::FromRedisValue>(
    conn: &mut redis::Connection,
    function: &str,
    keys: &[String],
    args: &[String],
) -> T {
    redis::cmd("FCALL")
        .arg(function)
        .arg(keys.len())
        .arg(keys)
        .arg(args)
        .query(conn)
        .unwrap()
}

/// Call `id` of `newcomer` queues behind the holder of `keys` in `layout`
/// (not `Packed`); returns its position.
pub fn arrive(
    conn: &mut redis::Connection,
    keys: &[String],
    layout: Layout,
    newcomer: &str,
    id: u64,
) -> i64 {
    let function = match layout {
        Layout::Entries => "floor_entries_arrive",
        Layout::Scored => "floor_scored_arrive",
        _ => "floor_arrive",
    };
    let settings = super::SETTINGS;
    let args = [
        "fairlock:wake:",
        "600000",
        newcomer,
        &id.to_string(),
        "60000",
        settings,
    ]
    .map(String::from);
    let queued: Vec<i64> =
        redis::from_redis_value(words(fcall(conn, function, keys, &args))).unwrap();
    assert_eq!(queued[0], 0, "the newcomer queued");
    queued[2]
}

/// One step of the floor's handoff on `keys` in `layout` (not `Packed`):
/// the lone hold of `holder` (owner, token, call id) goes to
/// the head of the queue, whose (owner, token, call id) it becomes, then
/// call `id` of `newcomer` queues behind it (returns its position).
pub fn handoff(
    conn: &mut redis::Connection,
    keys: &[String],
    layout: Layout,
    holder: &mut (String, String, String),
    newcomer: &str,
    id: u64,
) -> i64 {
    let function = match layout {
        Layout::Entries => "floor_entries_hand_over",
        Layout::Scored => "floor_scored_hand_over",
        _ => "floor_hand_over",
    };
    let (owner, token, call) = &*holder;
    let args = [
        "fairlock:wake:",
        "600000",
        &format!("{owner}#{call}"),
        token,
    ]
    .map(String::from);
    let grant: Vec<String> =
        redis::from_redis_value(words(fcall(conn, function, keys, &args))).unwrap();
    *holder = (grant[0].clone(), grant[2].clone(), grant[1].clone());
    arrive(conn, keys, layout, newcomer, id)
}

/// The heartbeat of the queued `entry` ("<owner> <call id> <lease ms>
/// <fixed>") behind the live hold of `keys` in `layout` (`Fairlocks` or
/// `Scored`: the layout of entries carrying their deadline cannot renew
/// one); returns its position.
pub fn heartbeat(
    conn: &mut redis::Connection,
    keys: &[String],
    layout: Layout,
    entry: &str,
) -> i64 {
    let function = match layout {
        Layout::Scored => "floor_scored_heartbeat",
        _ => "floor_heartbeat",
    };
    let args = ["fairlock:wake:", "600000", "60000", entry].map(String::from);
    let beat: Vec<i64> = fcall(conn, function, keys, &args);
    assert_eq!(beat[2], 0, "still queued");
    beat[3]
}

/// One cycle on the free lock `keys` (fairlock's three keys of a mutex):
/// call `id` of owner `c1:1` takes it and releases it. Returns the token.
pub fn cycle(conn: &mut redis::Connection, keys: &[String], layout: Layout, id: u64) -> i64 {
    let (owner, fence, lease) = ("c1:1", "600000", 60_000u64);
    let (take, release) = match layout {
        Layout::Fairlocks | Layout::Scored => ("floor_take", "floor_release"),
        Layout::Packed => ("floor_take_packed", "floor_release_packed"),
        Layout::Entries => ("floor_entries_take", "floor_entries_release"),
    };
    let strings = |parts: &[&str]| parts.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    let id_s = id.to_string();
    let args = match layout {
        Layout::Packed => strings(&[
            &format!("{owner}#{id} {fence}"),
            &(lease + 600_000).to_string(),
            &format!("fairlock:wake: {}", super::SETTINGS),
        ]),
        _ => strings(&[
            "fairlock:wake:",
            fence,
            owner,
            &id_s,
            &lease.to_string(),
            super::SETTINGS,
        ]),
    };
    let token: i64 = fcall(conn, take, keys, &args);
    let token_s = token.to_string();
    let format = fairlock::DATA_FORMAT;
    let args = match layout {
        Layout::Packed => strings(&[
            &format!("v{format} {token} {owner}#{id} {fence} "),
            &format!("v{format} {token} - {owner}#{id}"),
        ]),
        _ => strings(&["fairlock:wake:", fence, &format!("{owner}#{id}"), &token_s]),
    };
    let released: i64 = fcall(conn, release, keys, &args);
    assert_eq!(released, 0, "the floor's release freed its own hold");
    token
}
