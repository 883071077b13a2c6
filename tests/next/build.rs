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
const PLANT: &[(&str, &str, &str)] = &[
    (
        "lib/mutex.lua",
        "(waiters and ' + ' or ' - ')",
        "(waiters and ' + ' or ' = ')",
    ),
    ("lib/mutex.lua", "(%d+) ([-+]) (.+)$", "(%d+) ([=+]) (.+)$"),
    ("lib/mutex.lua", "%d+ )([-+])( .*)$", "%d+ )([=+])( .*)$"),
    ("mutex/acquire.lua", "(%d+) %- (.+)$", "(%d+) = (.+)$"),
    (
        "mutex/release.lua",
        "' - ' .. call_key",
        "' = ' .. call_key",
    ),
];

fn main() {
    let lua = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../lua");
    println!("cargo:rerun-if-changed=../../build.rs");
    println!("cargo:rerun-if-changed={}", lua.display());
    // fairlock's Lua, copied with the plant into OUT_DIR, assembled there.
    let planted = Path::new(&std::env::var("OUT_DIR").unwrap()).join("planted-lua");
    let mut applied = 0;
    for folder in ["lib", "mutex", "counted"] {
        std::fs::create_dir_all(planted.join(folder)).unwrap();
        for entry in std::fs::read_dir(lua.join(folder)).unwrap() {
            let path = entry.unwrap().path();
            let file = format!("{folder}/{}", path.file_name().unwrap().to_string_lossy());
            let mut text = std::fs::read_to_string(&path).unwrap();
            for (_, from, to) in PLANT.iter().filter(|(f, _, _)| *f == file) {
                assert!(
                    text.contains(from),
                    "lua/{file}: nothing to plant at {from}"
                );
                text = text.replace(from, to);
                applied += 1;
            }
            std::fs::write(planted.join(&file), text).unwrap();
        }
    }
    assert_eq!(applied, PLANT.len(), "a plant names no file of lua/");
    library::build(&planted, library::FORMAT + 1);
}
