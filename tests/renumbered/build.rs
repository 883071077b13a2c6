//! fairlock's build (../../build.rs, shared, not copied) with the data
//! format raised by one and nothing else: the Lua, its layouts and the
//! Rust are this build's, so every value this build writes is the one
//! fairlock writes but for its first word. A script that read a value
//! without its format word (a fast path that matched the fields alone)
//! would read the other build's data as its own; tests/formats.rs runs
//! both builds on one lock to show that none does.

use std::path::Path;

#[path = "../../build.rs"]
#[allow(dead_code)]
mod library;

fn main() {
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lua");
    println!("cargo:rerun-if-changed=../../build.rs");
    println!("cargo:rerun-if-changed={}", lua.display());
    library::build(&lua, library::FORMAT + 1);
}
