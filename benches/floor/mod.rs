//! The floor of fairlock's mutex cycle, measured beside it: a Functions
//! library (`floor.lua`) that does only what the cycle's fast paths do,
//! with every guarantee they keep, on fairlock's keys and data format;
//! once with fairlock's arguments as its client sends them, once with them
//! packed as the fast paths use them (the hold as written, the PX, the
//! values a release compares and writes). What fairlock spends above the
//! first is its Lua; what the first spends above the second, its
//! arguments' layout. (A directory module, so cargo does not take it for a
//! bench target.)

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

/// How a floor cycle's calls carry their arguments.
#[derive(Clone, Copy)]
pub enum Layout {
    /// As fairlock's client sends its mutex calls today.
    Fairlocks,
    /// Packed as the fast paths use them.
    Packed,
}

/// One cycle on the free lock `keys` (fairlock's three keys of a mutex):
/// call `id` of owner `c1:1` takes it and releases it. Returns the token.
pub fn cycle(conn: &mut redis::Connection, keys: &[String], layout: Layout, id: u64) -> i64 {
    let fcall = |conn: &mut redis::Connection, function: &str, args: &[String]| {
        redis::cmd("FCALL")
            .arg(function)
            .arg(keys.len())
            .arg(keys)
            .arg(args)
            .query::<i64>(conn)
            .unwrap()
    };
    let (owner, fence, lease) = ("c1:1", "600000", 60_000u64);
    let strings = |parts: &[&str]| parts.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    let id_s = id.to_string();
    let token = match layout {
        Layout::Fairlocks => fcall(
            conn,
            "floor_take",
            &strings(&[
                "fairlock:wake:",
                fence,
                owner,
                &id_s,
                &lease.to_string(),
                "1 600000 first 0",
            ]),
        ),
        Layout::Packed => fcall(
            conn,
            "floor_take_packed",
            &strings(&[
                &format!("{owner}#{id} {fence}"),
                &(lease + 600_000).to_string(),
                "fairlock:wake: 1 600000 first 0",
            ]),
        ),
    };
    let token_s = token.to_string();
    let format = fairlock::DATA_FORMAT;
    let released = match layout {
        Layout::Fairlocks => fcall(
            conn,
            "floor_release",
            &strings(&["fairlock:wake:", fence, owner, &token_s, &id_s]),
        ),
        Layout::Packed => fcall(
            conn,
            "floor_release_packed",
            &strings(&[
                &format!("v{format} {token} {owner}#{id} {fence} "),
                &format!("v{format} {token} - {owner}#{id}"),
                fence,
            ]),
        ),
    };
    assert_eq!(released, 0, "the floor's release freed its own hold");
    token
}
