//! fairlock's build (../../build.rs, shared, not copied) with the data
//! format raised by one and one change of layout planted: a mutex's or an
//! election's free lock key reads "<token> = <mark>" where fairlock's reads
//! "<token> - <mark>", which fairlock would take for a hold if it did not
//! check the format first. tests/formats.rs runs both builds on
//! one lock.

use std::path::Path;

#[path = "../../build.rs"]
#[allow(dead_code)]
mod library;

/// The planted change: every place the Lua writes or reads a free lock's
/// fields.
const PLANT: &[library::Plant] = &[
    (
        "lib/mutex.lua",
        "(waiters and ' + ' or ' - ')",
        "(waiters and ' + ' or ' = ')",
    ),
    ("lib/mutex.lua", "(%d+) ([-+]) (.+)$", "(%d+) ([=+]) (.+)$"),
    ("lib/mutex.lua", "(%d+) ([-+]) (.*)$", "(%d+) ([=+]) (.*)$"),
    (
        "lib/mutex.lua",
        "elseif word == '-' then",
        "elseif word == '=' then",
    ),
    ("mutex/acquire.lua", "(%d+) %- (.+)$", "(%d+) = (.+)$"),
    ("mutex/release.lua", "' - ' .. owner", "' = ' .. owner"),
];

fn main() {
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lua");
    println!("cargo:rerun-if-changed=../../build.rs");
    library::build(&lua, library::FORMAT + 1, PLANT);
}
