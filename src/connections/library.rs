//! fairlock's scripts as one Redis Functions library (Redis 7.0 and later,
//! Valkey): loaded once per server with `FUNCTION LOAD`, each operation
//! then called with `FCALL`. Its helpers are built once, when the server
//! loads it, where an EVALSHA builds the closures its path needs on every
//! call (`cargo bench --bench server_cost` on 2026-11-30: a mutex's
//! cycle 75.5k instructions by FCALL, 96.0k by EVALSHA; a handoff 196.5k
//! and 250.5k).
//!
//! The library and its functions are named after a hash of its text, so
//! that clients of different fairlock versions on one server each call
//! their own functions, and a client that finds its library loaded knows
//! it is the same code.

use std::sync::LazyLock;

use crate::protocol::Script;

/// The library body build.rs assembles (lua/lib/ and every operation).
const BODY: &str = include_str!(concat!(env!("OUT_DIR"), "/library.lua"));

/// The library as `FUNCTION LOAD` takes it, and the name of each script's
/// function, in the order of [`Script::ALL`].
pub(crate) struct Library {
    pub(crate) source: String,
    names: Vec<String>,
    /// The function that does nothing, which a client's start calls to
    /// find the library loaded (`Scripts::find_or_load`).
    pub(crate) loaded: String,
}

impl Library {
    /// The name of the function that runs `script`.
    pub(crate) fn function(&self, script: Script) -> &str {
        &self.names[script.index()]
    }
}

/// Built once per process.
pub(crate) static LIBRARY: LazyLock<Library> = LazyLock::new(|| {
    let hash = redis::Script::new(BODY).get_hash()[..16].to_owned();
    let prefix = format!("fairlock_{hash}_");
    Library {
        source: format!("#!lua name=fairlock_{hash}\nlocal PREFIX = '{prefix}'\n{BODY}"),
        names: Script::ALL
            .iter()
            .map(|s| format!("{prefix}{}_{}", s.engine.folder(), s.op.file()))
            .collect(),
        loaded: format!("{prefix}loaded"),
    }
});
