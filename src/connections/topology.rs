//! Where a client's locks live, as read from its URL: one server, a Redis
//! Cluster (several seed nodes), or the master a set of Sentinels names.
//!
//! URL forms (`rediss` instead of `redis` for TLS everywhere):
//! - `redis://[user:password@]host:port[/db]` — one server;
//! - `redis+unix:///path/to/socket[?db=N&user=U&pass=P]` (or `unix://...`)
//!   — one server over a Unix socket, as the `redis` crate reads it;
//! - `redis+cluster://[user:password@]host:port,host:port,...` — Redis
//!   Cluster; the credentials apply to every node;
//! - `redis+sentinel://host:port,host:port,.../master-name[/db]` — the master
//!   the Sentinels name; credentials before the first host apply to the
//!   master (and its successors), not to the Sentinels (theirs are the
//!   builder's `sentinel_password` and `sentinel_username`).

use crate::error::{Error, Result};

/// The parsed form of a client URL: every entry is a plain `redis://` or
/// `rediss://` URL the `redis` crate understands.
#[derive(Debug)]
pub(crate) enum Topology {
    Single(String),
    /// One server, from a `redis::ConnectionInfo` (`Client::builder_from`).
    Given(Box<redis::ConnectionInfo>),
    Cluster(Vec<String>),
    Sentinel {
        sentinels: Vec<String>,
        node: MasterNode,
    },
}

/// The master a Sentinel URL names, `name`, and how to connect to it, as
/// the URL says: with TLS if `tls`, the credentials and the database `db`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MasterNode {
    pub(crate) name: String,
    pub(crate) tls: bool,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<String>,
    pub(crate) db: i64,
}

impl Topology {
    pub(crate) fn parse(url: &str) -> Result<Topology> {
        let invalid = |why: &str| {
            Error::invalid_config(format!("invalid redis url {:?}: {why}", redact_url(url)))
        };
        // Anything but `<base>+<kind>://` is one server's URL, for the
        // `redis` crate to accept or reject with its own reasons.
        let Some((scheme, rest)) = url.split_once("://") else {
            return Ok(Topology::Single(url.to_owned()));
        };
        // `redis+unix:///path` too: one server over a Unix socket.
        let Some((base, kind)) = scheme.split_once('+').filter(|(_, kind)| *kind != "unix") else {
            return Ok(Topology::Single(url.to_owned()));
        };
        if base != "redis" && base != "rediss" {
            return Err(invalid("the scheme must start with redis or rediss"));
        }
        let (userinfo, hosts_and_path) = rest
            .rsplit_once('@')
            .map_or((None, rest), |(userinfo, after)| (Some(userinfo), after));
        if hosts_and_path.contains(['?', '#']) {
            // It would stick to the last seed, or to the master's name.
            return Err(invalid(
                "a query or fragment (? or #) is read in a redis:// url only",
            ));
        }
        let (hosts, path) = hosts_and_path
            .split_once('/')
            .map_or((hosts_and_path, None), |(hosts, path)| (hosts, Some(path)));
        let hosts: Vec<&str> = hosts.split(',').map(str::trim).collect();
        if hosts.iter().any(|h| h.is_empty() || !h.contains(':')) {
            return Err(invalid(
                "every node must be written host:port, separated by commas",
            ));
        }
        // Each node's own URL, with `userinfo` if given.
        let node_urls = |userinfo: Option<&str>| -> Vec<String> {
            let at = userinfo.map_or(String::new(), |userinfo| format!("{userinfo}@"));
            let urls = hosts.iter().map(|host| format!("{base}://{at}{host}"));
            urls.collect()
        };
        match kind {
            "cluster" => {
                if path.is_some_and(|p| !p.is_empty() && p != "0") {
                    return Err(invalid("Redis Cluster has only database 0"));
                }
                Ok(Topology::Cluster(node_urls(userinfo)))
            }
            "sentinel" => {
                let mut parts = path.unwrap_or("").split('/');
                let master = parts.next().unwrap_or("");
                if master.is_empty() {
                    return Err(invalid("a sentinel url ends with /<master name>"));
                }
                let db = (parts.next().filter(|db| !db.is_empty()))
                    .map_or(Ok(0), str::parse::<i64>)
                    .ok()
                    .filter(|&db| db >= 0 && parts.next().is_none())
                    .ok_or_else(|| {
                        invalid("after the master name only a database number may follow")
                    })?;
                // `user:password`, `:password`, or a lone password, each
                // percent-decoded as the redis crate decodes a `redis://` URL's.
                let decoded = |part: &str| {
                    let part = percent_encoding::percent_decode_str(part).decode_utf8();
                    part.map(String::from)
                        .map_err(|_| invalid("the credentials are not UTF-8 once decoded"))
                };
                let (username, password) = userinfo
                    .map(|u| u.split_once(':').unwrap_or(("", u)))
                    .unzip();
                Ok(Topology::Sentinel {
                    sentinels: node_urls(None),
                    node: MasterNode {
                        name: master.to_owned(),
                        tls: base == "rediss",
                        username: username
                            .filter(|u| !u.is_empty())
                            .map(decoded)
                            .transpose()?,
                        password: password.map(decoded).transpose()?,
                        db,
                    },
                })
            }
            _ => Err(invalid(
                "unknown scheme (expected redis+cluster or redis+sentinel)",
            )),
        }
    }

    /// One server as a `redis::ConnectionInfo` names it, checked before any
    /// I/O: a host and a port other than 0 (or a socket path, which is no
    /// file or directory: a socket's may not exist yet), a database that
    /// is not negative, TLS only with the `tls` feature.
    pub(crate) fn of_info(info: &redis::ConnectionInfo) -> Result<Topology> {
        use redis::ConnectionAddr;
        let why = match info.addr() {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. }
                if host.is_empty() || *port == 0 =>
            {
                "the host must not be empty nor the port 0"
            }
            ConnectionAddr::Unix(path) if path.as_os_str().is_empty() => {
                "the Unix socket path must not be empty"
            }
            ConnectionAddr::Unix(path) if path.is_file() || path.is_dir() => {
                "the path is not a socket (a file or a directory)"
            }
            addr if !addr.is_supported() => {
                "this address needs a feature not enabled (TLS needs `tls`)"
            }
            _ if info.redis_settings().db() < 0 => "the database must not be negative",
            _ => return Ok(Topology::Given(Box::new(info.clone()))),
        };
        Err(Error::invalid_config(format!(
            "invalid redis connection info for {}: {why}",
            info.addr()
        )))
    }

    /// True when the connections to Redis use TLS (`rediss`). A URL the
    /// `redis` crate cannot read counts as TLS: opening it reports why.
    #[cfg(feature = "tls")]
    pub(crate) fn uses_tls(&self) -> bool {
        use redis::{ConnectionAddr, IntoConnectionInfo};
        let is_tls = |addr: &ConnectionAddr| matches!(addr, ConnectionAddr::TcpTls { .. });
        let tls_url = |url: &str| {
            url.into_connection_info()
                .map_or(true, |info| is_tls(info.addr()))
        };
        match self {
            Topology::Single(url) => tls_url(url),
            Topology::Given(info) => is_tls(info.addr()),
            Topology::Cluster(nodes) => nodes.iter().any(|node| tls_url(node)),
            Topology::Sentinel { node, .. } => node.tls,
        }
    }

    /// The topology of a cluster given by its seed nodes' URLs (to
    /// [`Client::cluster_builder`](crate::Client::cluster_builder)).
    pub(crate) fn of_cluster_nodes(nodes: &[String]) -> Result<Topology> {
        if nodes.is_empty() {
            return Err(Error::invalid_config(
                "a cluster needs at least one seed node",
            ));
        }
        for node in nodes {
            let unix = node
                .split_once("://")
                .is_some_and(|(scheme, _)| scheme == "unix" || scheme.ends_with("+unix"));
            if unix || !matches!(Topology::parse(node)?, Topology::Single(_)) {
                return Err(Error::invalid_config(format!(
                    "cluster seed nodes are redis:// or rediss:// urls, got {:?}",
                    redact_url(node)
                )));
            }
        }
        Ok(Topology::Cluster(nodes.to_vec()))
    }
}

/// The URL with any password replaced by `***`, fit for logs and messages.
///
/// The same rule the client applies to its own `Debug` output and errors:
/// in `user:password@host` (up to the last `@`, whatever the password
/// holds) the password goes; a lone `secret@host` is
/// taken as the password (as a `redis+sentinel://` URL is read), so all of
/// it goes; so does the value of a `pass=` (or `password=`) query
/// parameter, where a Unix socket URL carries its password. Text without
/// userinfo, or not a URL at all, comes back as it is.
///
/// Public so that a program that shows the URL it gave fairlock (the
/// `fairlock` command's messages, a service's start-up log) hides the same
/// secrets the library's own errors hide, by the same rule.
///
/// ```
/// use fairlock::redact_url;
///
/// assert_eq!(redact_url("redis://user:secret@host:6379/0"), "redis://user:***@host:6379/0");
/// assert_eq!(redact_url("redis://:secret@host"), "redis://:***@host");
/// assert_eq!(redact_url("redis://secret@host"), "redis://***@host");
/// assert_eq!(redact_url("redis://host:6379"), "redis://host:6379");
/// // A password written as it is, `?` and `/` included.
/// assert_eq!(redact_url("redis+sentinel://:a?b/c@h:1/m"), "redis+sentinel://:***@h:1/m");
/// assert_eq!(
///     redact_url("redis+unix:///run/redis.sock?db=2&user=u&pass=secret"),
///     "redis+unix:///run/redis.sock?db=2&user=u&pass=***"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    // The userinfo ends at the last `@`, looked for before the query: a
    // password written as it is may hold a `?` (a Sentinel URL's is read
    // so). A Unix socket URL has none (its path follows `://`).
    let (userinfo, rest) = match rest.rsplit_once('@') {
        Some((userinfo, host)) if !rest.starts_with('/') => match userinfo.split_once(':') {
            Some((user, _password)) => (format!("{user}:***@"), host),
            None if userinfo.is_empty() => ("@".to_owned(), host),
            // redis://secret@host: a lone userinfo is taken as the password.
            None => ("***@".to_owned(), host),
        },
        _ => (String::new(), rest),
    };
    // A Unix socket URL carries its password in the query: `?pass=secret`.
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, format!("?{}", redact_query(query))),
        None => (rest, String::new()),
    };
    format!("{scheme}://{userinfo}{rest}{query}")
}

/// A URL query with the value of every `pass` or `password` replaced.
fn redact_query(query: &str) -> String {
    query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key == "pass" || key == "password" => format!("{key}=***"),
            _ => pair.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("&")
}
