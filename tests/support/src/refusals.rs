//! Checks on a refused or failed connection: the error and its source on
//! one line (what the refusal tests search for words in), and the bound a
//! connection error must come within.

use std::time::Duration;

/// `err` and its source on one line: "`<err>` / `<source>`".
pub fn error_chain(err: &fairlock::Error) -> String {
    format!(
        "{err} / {}",
        std::error::Error::source(err)
            .map(ToString::to_string)
            .unwrap_or_default()
    )
}

/// Prints `err`, `took` after its call began, under `label`, and asserts
/// it is a connection error that came within `bound`. Returns its chain.
pub fn assert_connection_error_within(
    label: &str,
    err: &fairlock::Error,
    took: Duration,
    bound: Duration,
) -> String {
    let chain = error_chain(err);
    eprintln!(
        "{label}: {:?} after {:.0} ms: {chain}",
        err.kind(),
        took.as_secs_f64() * 1e3
    );
    assert_eq!(
        err.kind(),
        fairlock::ErrorKind::Connection,
        "{label}: {err:?}"
    );
    assert!(took < bound, "{label}: {took:?}, over {bound:?}");
    chain
}
