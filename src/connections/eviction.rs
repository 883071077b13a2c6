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

/// What the server's `INFO memory` says about eviction.
#[derive(Debug, PartialEq, Eq)]
struct Eviction {
    /// `maxmemory_policy`.
    policy: String,
    /// `maxmemory` in bytes: 0 is no limit, so nothing is ever evicted.
    maxmemory: u64,
}

impl Eviction {
    /// Reads both from an `INFO memory` reply (as the redis crate's
    /// `InfoDict` reads its `name:value` lines); `None` if either is missing.
    fn parse(info: &str) -> Option<Eviction> {
        let info = redis::InfoDict::new(info);
        Some(Eviction {
            policy: info.get("maxmemory_policy")?,
            maxmemory: info.get("maxmemory")?,
        })
    }

    /// Whether the server may evict a key with a TTL.
    fn may_evict(&self) -> bool {
        self.maxmemory > 0 && self.policy != "noeviction"
    }

    /// What a warning or an error says.
    fn describe(&self, server: &str) -> String {
        format!(
            "redis at {server} may evict fairlock's keys (maxmemory-policy {}, maxmemory {} \
             bytes; every fairlock key has a TTL, so volatile-* policies reach them too): under \
             memory pressure a held lock can vanish and another client take it while its \
             holder still works; set maxmemory-policy noeviction (docs/failures.md)",
            self.policy, self.maxmemory
        )
    }
}

/// Reads the server's eviction settings on `conn` (on a cluster, every
/// master's) and returns a warning for each that may evict (or, with
/// `require_noeviction`, fails with [`ErrorKind::InvalidConfig`]). A user
/// whose ACL does not grant `INFO memory` skips the check with a warning
/// that it could not be made (or, with `require_noeviction`, fails with
/// [`ErrorKind::Permission`]); an answer without the fields says nothing.
pub(crate) fn check(
    conn: &mut dyn ConnectionLike,
    server: &str,
    require_noeviction: bool,
) -> Result<Vec<ServerWarning>> {
    // One server's answer is its text; a cluster's, each master's by address.
    let answers = match redis::cmd("INFO").arg("memory").query::<Value>(conn) {
        Ok(Value::Map(nodes)) => nodes,
        Ok(one) => vec![(Value::SimpleString(server.to_owned()), one)],
        Err(err) if err.code() == Some("NOPERM") && !require_noeviction => {
            let message = format!(
                "cannot tell whether redis at {server} may evict fairlock's keys: this \
                 client's user may not run INFO memory (grant it +info|memory, as \
                 docs/security.md's ACL line does)"
            );
            let kind = ServerWarningKind::EvictionUnknown;
            return Ok(vec![ServerWarning::logged(kind, server, message)]);
        }
        Err(err) => return Err(Error::from_redis(err)),
    };
    let mut warnings = Vec::new();
    for (node, info) in answers {
        let (Ok(node), Ok(info)) = (
            String::from_redis_value(node),
            String::from_redis_value(info),
        ) else {
            continue;
        };
        let Some(eviction) = Eviction::parse(&info).filter(Eviction::may_evict) else {
            continue;
        };
        if require_noeviction {
            return Err(Error::invalid_config(eviction.describe(&node)));
        }
        let kind = ServerWarningKind::MayEvict;
        warnings.push(ServerWarning::logged(kind, &node, eviction.describe(&node)));
    }
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a policy may evict, from real `INFO memory` replies, is
    /// tests/first_contact.rs's
    /// `a_server_that_may_evict_is_refused_when_the_client_requires_noeviction`.
    #[test]
    fn a_field_is_read_by_its_whole_name_and_a_missing_one_reads_as_nothing() {
        assert_eq!(Eviction::parse("maxmemory_human:1\r\n"), None);
    }
}
