//! Sentinel: the client that asks the Sentinels which server is the
//! master (with their own credentials, and the TLS certificates for them
//! and the master), and that question asked at each connect (see
//! [`Deployment::Sentinel`](super::Deployment::Sentinel)).

use std::time::Duration;

use parking_lot::Mutex;
use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};

use crate::connections::config::Config;
use crate::connections::topology::MasterNode;
use crate::error::{Error, ErrorKind, Result, SENTINEL_CREDENTIALS_REFUSED};

use super::steady;

/// The client that asks `sentinels` for the master `node` names, reached
/// as `node` says; the Sentinels with the client's `sentinel_username` and
/// `sentinel_password`, if any, and every TLS connection with its
/// certificates, if any. Without certificates, no connection it opens, to
/// a Sentinel or to the master, sends `CLIENT SETINFO` (see `quiet`).
pub(super) fn client(
    config: &Config,
    sentinels: Vec<String>,
    node: MasterNode,
) -> Result<SentinelClient> {
    #[cfg(feature = "tls")]
    if let Some(certificates) = config.tls_certificates()? {
        return with_certificates(config, &sentinels, node, certificates);
    }
    let sentinels = sentinels
        .iter()
        .map(|url| {
            let info = super::quiet(url)?;
            let mut settings = info.redis_settings().clone();
            if let Some(username) = &config.sentinel_username {
                settings = settings.set_username(username);
            }
            if let Some(password) = &config.sentinel_password {
                settings = settings.set_password(password);
            }
            Ok(info.set_redis_settings(settings))
        })
        .collect::<Result<Vec<_>>>()?;
    SentinelClient::build(
        sentinels,
        node.name.clone(),
        Some(master_node(node)),
        SentinelServerType::Master,
    )
    .map_err(invalid_sentinel_url)
}

fn invalid_sentinel_url(err: redis::RedisError) -> Error {
    Error::with_source(ErrorKind::InvalidConfig, "invalid sentinel url", err)
}

/// The sentinel client when TLS certificates are given (a private root, a
/// client certificate): the same certificates for the Sentinels and the
/// master. The `redis` crate takes certificates for the master only
/// through its `SentinelClientBuilder`, whose connections send `CLIENT
/// SETINFO`; the pool's connections to the master are opened again
/// without it (see [`master`]), but the one that
/// checks the master's `ROLE` at each lookup, and those to the Sentinels,
/// still send it (its answer is ignored; an ACL user without it sees a
/// denial in `ACL LOG`).
#[cfg(feature = "tls")]
fn with_certificates(
    config: &Config,
    sentinels: &[String],
    node: MasterNode,
    certificates: redis::TlsCertificates,
) -> Result<SentinelClient> {
    use redis::{sentinel::SentinelClientBuilder, IntoConnectionInfo};
    let addresses = sentinels
        .iter()
        .map(|url| {
            let info = url.as_str().into_connection_info();
            info.map(|info| info.addr().clone())
                .map_err(invalid_sentinel_url)
        })
        .collect::<Result<Vec<_>>>()?;
    let mut builder = SentinelClientBuilder::new(addresses, &node.name, SentinelServerType::Master)
        .map_err(invalid_sentinel_url)?
        .set_client_to_sentinel_certificates(certificates.clone())
        .set_client_to_redis_certificates(certificates)
        .set_client_to_redis_db(node.db);
    if node.tls {
        builder = builder.set_client_to_redis_tls_mode(redis::TlsMode::Secure);
    }
    if let Some(username) = node.username {
        builder = builder.set_client_to_redis_username(username);
    }
    if let Some(password) = node.password {
        builder = builder.set_client_to_redis_password(password);
    }
    if let Some(username) = &config.sentinel_username {
        builder = builder.set_client_to_sentinel_username(username);
    }
    if let Some(password) = &config.sentinel_password {
        builder = builder.set_client_to_sentinel_password(password);
    }
    builder.build().map_err(invalid_sentinel_url)
}

/// How to connect to the master (see [`MasterNode`]), without `CLIENT
/// SETINFO` (see `quiet`).
fn master_node(node: MasterNode) -> SentinelNodeConnectionInfo {
    let mut info = redis::RedisConnectionInfo::default()
        .set_db(node.db)
        .set_skip_set_lib_name();
    if let Some(username) = node.username {
        info = info.set_username(username);
    }
    if let Some(password) = node.password {
        info = info.set_password(password);
    }
    let info = SentinelNodeConnectionInfo::default().set_redis_connection_info(info);
    if node.tls {
        info.set_tls_mode(redis::TlsMode::Secure)
    } else {
        info
    }
}

/// The master the Sentinels name now (asked within `timeout`, no signal
/// cutting their answers short: `steady`), to connect to without `CLIENT
/// SETINFO` whichever way `client` was built.
pub(super) fn master(client: &Mutex<SentinelClient>, timeout: Duration) -> Result<redis::Client> {
    let lookup = |_| client.lock().get_client();
    let master = steady::again(Some(timeout), lookup)
        .map_err(Error::from_redis)
        .map_err(|err| match err.kind() {
            ErrorKind::Auth => err.reworded(SENTINEL_CREDENTIALS_REFUSED),
            _ => err,
        })?;
    let info = super::quiet_info(master.get_connection_info().clone());
    redis::Client::open(info).map_err(Error::from_redis)
}
