//! Owner ids: who an acquire call is, as Redis records it in the queue and
//! the holders and a status reports it; built and read here alone in Rust
//! (`lua/lib.lua` reads the client id and the suffix by the same grammar):
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
    let size = client.len() + 1 + kind.len() + number.len();
    let mut owner = String::with_capacity(size + suffix.map_or(0, |s| 1 + s.len()));
    owner.push_str(client);
    owner.push(':');
    owner.push_str(kind);
    owner.push_str(number);
    if let Some(suffix) = suffix {
        owner.push('@');
        owner.push_str(suffix);
    }
    owner
}

/// Whether `owner` is what [`build`] builds from the same parts.
pub(crate) fn spells(
    owner: &str,
    client: &str,
    kind: &str,
    number: &str,
    suffix: Option<&str>,
) -> bool {
    let caller = client_of(owner)
        .filter(|c| *c == client)
        .map(|_| caller_of(owner));
    let Some((caller, with)) = caller else {
        return false;
    };
    caller.strip_prefix(kind) == Some(number) && with == suffix
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
    use super::*;

    #[test]
    fn an_owner_id_reads_back_as_built() {
        let owner = build("c0ffee", "u", "12", Some("web-3@eu"));
        assert_eq!(owner, "c0ffee:u12@web-3@eu");
        assert_eq!(client_of(&owner), Some("c0ffee"));
        assert_eq!(caller_of(&owner), ("u12", Some("web-3@eu")));
        assert!(spells(&owner, "c0ffee", "u", "12", Some("web-3@eu")));
        assert!(!spells(&owner, "c0ffee", "", "12", Some("web-3@eu")));
        assert!(!spells(&owner, "c0ffee", "u", "12", None));
        assert!(!spells("c0ffee:7", "c0ffe", "", "7", None));
        assert_eq!(caller_of("c0ffee"), ("", None));
    }
}
