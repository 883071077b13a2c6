//! Whether the server may evict fairlock's keys. Every key fairlock writes
//! has a TTL, so the `volatile-*` policies reach them as much as the
//! `allkeys-*` ones: under memory pressure Redis could drop a held lock,
//! and the next caller take it while its holder still works. The client
//! reads the policy once at start (`INFO memory`, which docs/security.md's
//! ACL line grants as `+info|memory`) and warns (a [`ServerWarning`] the
//! client keeps, logged once), or refuses to start when
//! [`ClientBuilder::require_noeviction`](crate::ClientBuilder::require_noeviction)
//! says so.

use redis::{ConnectionLike, FromRedisValue, Value};

use crate::connections::warning::{ServerWarning, ServerWarningKind};
use crate::error::{Error, Result};

/// What a warning or an error says of the server at `server` whose `INFO
/// memory` reply is `info`, when it may evict a key with a TTL: it has a
/// `maxmemory` (0 is no limit, so nothing is ever evicted) and a
/// `maxmemory_policy` other than `noeviction`. `None` when it may not, or
/// either field is missing (each read by its whole name, as the redis
/// crate's `InfoDict` reads the reply's `name:value` lines).
fn may_evict(server: &str, info: &str) -> Option<String> {
    let info = redis::InfoDict::new(info);
    let (policy, maxmemory): (String, u64) =
        (info.get("maxmemory_policy")?, info.get("maxmemory")?);
    (maxmemory > 0 && policy != "noeviction").then(|| {
        format!(
            "redis at {server} may evict fairlock's keys (maxmemory-policy {policy}, maxmemory \
             {maxmemory} bytes; every fairlock key has a TTL, so volatile-* policies reach them \
             too): under memory pressure a held lock can vanish and another client take it \
             while its holder still works; set maxmemory-policy noeviction (docs/failures.md)"
        )
    })
}

/// Reads the server's eviction settings on `conn` (on a cluster, every
/// master's) and returns a warning for each that may evict (or, with
/// `require_noeviction`, fails with [`ErrorKind::InvalidConfig`](crate::ErrorKind::InvalidConfig)). A user
/// whose ACL does not grant `INFO memory`, or a server without `INFO`
/// (renamed away), skips the check with a warning that it could not be
/// made (or, with `require_noeviction`, fails with what Redis said:
/// [`ErrorKind::Permission`](crate::ErrorKind::Permission) for the ACL); an answer without the fields says nothing.
pub(crate) fn check(
    conn: &mut dyn ConnectionLike,
    server: &str,
    require_noeviction: bool,
) -> Result<Vec<ServerWarning>> {
    // One server's answer is its text; a cluster's, each master's by address.
    let answers = match redis::cmd("INFO").arg("memory").query::<Value>(conn) {
        Ok(Value::Map(nodes)) => nodes,
        Ok(one) => vec![(Value::SimpleString(server.to_owned()), one)],
        Err(err) => {
            let why = match err.code() {
                Some("NOPERM") => {
                    "this client's user may not run INFO memory (grant it +info|memory, as \
                     docs/security.md's ACL line does)"
                }
                _ if crate::error::is_unknown_command(&err) => {
                    "it has no INFO command (renamed or disabled)"
                }
                _ => "",
            };
            if why.is_empty() || require_noeviction {
                return Err(Error::from_redis(err).during(format_args!("INFO memory at {server}")));
            }
            let message =
                format!("cannot tell whether redis at {server} may evict fairlock's keys: {why}");
            let kind = ServerWarningKind::EvictionUnknown;
            return Ok(vec![ServerWarning::logged(kind, server, message)]);
        }
    };
    // Each node's answer that says it may evict: a warning about the node
    // (its address), or the error.
    let kind = ServerWarningKind::MayEvict;
    let evicting = |(node, info)| {
        let node = String::from_redis_value(node).ok()?;
        let message = may_evict(&node, &String::from_redis_value(info).ok()?)?;
        Some(match require_noeviction {
            true => Err(Error::invalid_config(message)),
            false => Ok(ServerWarning::logged(kind, &node, message)),
        })
    };
    answers.into_iter().filter_map(evicting).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a policy may evict, from real `INFO memory` replies, is
    /// tests/first_contact.rs's
    /// `a_server_that_may_evict_is_refused_when_the_client_requires_noeviction`.
    #[test]
    fn a_field_is_read_by_its_whole_name_and_a_missing_one_reads_as_nothing() {
        assert_eq!(
            may_evict("s", "maxmemory_human:1\r\nmaxmemory_policy:allkeys-lru\r\n"),
            None
        );
    }
}
