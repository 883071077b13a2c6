//! A request's or a connect's timeout as the connections layer makes it:
//! a type the error layer reads, not words it matches.

use std::time::Duration;

/// The I/O error `err` stands for, if it is one.
pub(crate) fn io_error(err: &redis::RedisError) -> Option<&std::io::Error> {
    // The redis crate keeps an I/O error behind an `Arc<dyn Error>`, which
    // `source()` gives as such.
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    let source = std::error::Error::source(err).filter(|_| err.is_io_error())?;
    (source.downcast_ref::<Shared>())
        .map_or_else(|| source.downcast_ref(), |shared| shared.downcast_ref())
}

/// A timeout of a request or a connect (`connections::steady`): what was
/// waited for and how long, read by type (`Error::at_first_contact` names
/// the setting from it), said in words ("no reply within 50 ms"): what the socket's
/// own says ("Resource temporarily unavailable") is no help to a reader.
#[derive(Debug)]
pub(crate) struct NotWithin {
    /// A reply did not come (else: the connect did not).
    pub(crate) reply: bool,
    pub(crate) timeout: Duration,
}

impl std::fmt::Display for NotWithin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = if self.reply {
            "no reply"
        } else {
            "not connected"
        };
        write!(f, "{what} within {} ms", self.timeout.as_millis())
    }
}

impl std::error::Error for NotWithin {}

/// The timeout of `steady` that `err` is, if it is one.
pub(crate) fn not_within_of(err: &redis::RedisError) -> Option<&NotWithin> {
    io_error(err)?.get_ref()?.downcast_ref()
}
