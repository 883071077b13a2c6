//! Owner ids: who an acquire call is, as Redis records it in the queue and
//! the holders and a status reports it; built and read here alone in Rust
//! (`lua/lib/messages.lua` reads the client id and the suffix by the same
//! grammar), and the call keys made of them (`call_key`):
//!
//! ```text
//! owner  = client ":" caller [ "@" suffix ]
//! client = the client's random id (hex digits, never ":")
//! caller = thread number | "u" call id       (decimal)
//! suffix = the client's identity, or an election candidate's value
//! ```
//!
//! A thread's owner id (`<client id>:<thread number>`) is the same for
//! all its calls to one client: re-entrancy is per client and thread. An
//! unbound call's (`<client id>:u<call>`) is its own, whatever thread asks.

/// `<client>:<kind><number>[@<suffix>]` (`kind`: "" for a thread, "u" for
/// an unbound call), built in one allocation of its size, without `fmt`.
pub(crate) fn build(client: &str, kind: &str, number: &str, suffix: Option<&str>) -> String {
    let at = if suffix.is_some() { "@" } else { "" };
    [client, ":", kind, number, at, suffix.unwrap_or("")].concat()
}

/// A call's key, `<who>#<call>`: who made the call (an owner id, or for
/// a force release the client id) and the call's id, as a lock's value
/// names a hold and its mark the call that freed it (lua/lib/common.lua's
/// `call_key_arg` reads it back).
pub(crate) fn call_key(who: &str, call: u64) -> String {
    format!("{who}#{call}")
}

/// The client id of `owner`: what comes before its first `:` (`None`
/// without one).
pub(crate) fn client_of(owner: &str) -> Option<&str> {
    owner.split_once(':').map(|(client, _)| client)
}

/// What follows the client id: the caller (a thread number, or `u` and a
/// call id) and the suffix after `@`, if any.
pub(crate) fn caller_of(owner: &str) -> (&str, Option<&str>) {
    let rest = owner.split_once(':').map_or("", |(_, rest)| rest);
    rest.split_once('@')
        .map_or((rest, None), |(caller, suffix)| (caller, Some(suffix)))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_owner_id_reads_back_as_built() {
        let owner = super::build("c0ffee", "u", "12", Some("web-3@eu"));
        assert_eq!(owner, "c0ffee:u12@web-3@eu");
        assert_eq!(super::client_of(&owner), Some("c0ffee"));
        assert_eq!(super::caller_of(&owner), ("u12", Some("web-3@eu")));
        assert_eq!(super::caller_of("c0ffee"), ("", None));
    }
}
