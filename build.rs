//! Assembles each Lua script: the operation's own file, with the
//! definitions of `lua/lib.lua` that its `-- @helpers NAME, ...` lines name
//! put in at those lines, in lib.lua's order.
//!
//! Redis runs a script's whole body on every EVALSHA, so every `local
//! function` of a prepended library is a new closure per call: a script
//! carries only the helpers it names, and a fast path that returns before a
//! later `-- @helpers` line builds none of those named there (issue 12).
//! The lists are declared, not inferred: tests/lua_helpers.rs
//! checks that each assembled script defines every lib.lua name it uses,
//! before its use, and none it does not use.
//!
//! lib.lua is a sequence of top-level definitions, each a comment block
//! and either a one-line `local NAME = ...` or a `local function NAME(...)`
//! up to the next line that is exactly `end`.

use std::env;
use std::fs;
use std::path::Path;

/// The operations' files, one script each (`Script` in
/// src/protocol/operation.rs): the mutex's engine and the counted engine
/// (the semaphore's and the reader-writer lock's), one folder each.
const OPERATIONS: [&str; 16] = [
    "mutex/acquire.lua",
    "mutex/release.lua",
    "mutex/renew.lua",
    "mutex/heartbeat.lua",
    "mutex/cancel.lua",
    "mutex/abandon.lua",
    "mutex/force_release.lua",
    "mutex/status.lua",
    "counted/acquire.lua",
    "counted/release.lua",
    "counted/renew.lua",
    "counted/heartbeat.lua",
    "counted/cancel.lua",
    "counted/abandon.lua",
    "counted/force_release.lua",
    "counted/status.lua",
];

/// The line that names the helpers to put in where it stands.
const HELPERS: &str = "-- @helpers";

fn main() {
    // A directory: Cargo reruns this when any file under it changes.
    println!("cargo:rerun-if-changed=lua");
    let lua = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("lua");
    for engine in ["mutex", "counted"] {
        for entry in fs::read_dir(lua.join(engine)).expect("reading lua/") {
            let name = format!("{engine}/{}", entry.unwrap().file_name().to_string_lossy());
            assert!(
                OPERATIONS.contains(&name.as_str()),
                "lua/{name} is no operation build.rs knows: add it to OPERATIONS"
            );
        }
    }
    let definitions = split_lib(&read(&lua.join("lib.lua")));
    let out = Path::new(&env::var("OUT_DIR").unwrap()).to_path_buf();
    for op in OPERATIONS {
        let script = assemble(&definitions, op, &read(&lua.join(op)));
        let path = out.join(op);
        fs::create_dir_all(path.parent().unwrap()).expect("creating OUT_DIR/<engine>");
        fs::write(&path, script).unwrap_or_else(|e| panic!("writing {op}: {e}"));
    }
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// lib.lua's top-level definitions, in order: (name, text with the comment
/// block above it). Anything else at column 0 stops the build.
fn split_lib(lib: &str) -> Vec<(String, String)> {
    let mut definitions: Vec<(String, String)> = Vec::new();
    let mut text = String::new();
    let mut lines = lib.lines().enumerate();
    while let Some((n, line)) = lines.next() {
        if line.trim().is_empty() {
            text.clear();
            continue;
        }
        text.push_str(line);
        text.push('\n');
        if line.starts_with("--") {
            continue;
        }
        let name = if let Some(rest) = line.strip_prefix("local function ") {
            for (_, line) in lines.by_ref() {
                text.push_str(line);
                text.push('\n');
                if line == "end" {
                    break;
                }
            }
            rest.split('(').next()
        } else {
            line.strip_prefix("local ")
                .and_then(|rest| rest.split(" =").next())
        };
        let name = name.filter(|name| name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()));
        let Some(name) = name else {
            panic!(
                "lua/lib.lua line {}: not a definition build.rs can read: {line}",
                n + 1
            );
        };
        assert!(
            definitions.iter().all(|(known, _)| known != name),
            "lua/lib.lua: {name} is defined twice"
        );
        definitions.push((name.to_string(), std::mem::take(&mut text)));
    }
    definitions
}

/// `body` with the definitions each `-- @helpers` line names put in at
/// that line (a run of such lines is one list), in lib.lua's order.
fn assemble(definitions: &[(String, String)], op: &str, body: &str) -> String {
    let mut script = format!("-- lua/{op}, assembled by build.rs with helpers of lua/lib.lua\n");
    let mut emitted = vec![false; definitions.len()];
    let mut lines = body.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(first) = line.strip_prefix(HELPERS) else {
            script.push_str(line);
            script.push('\n');
            continue;
        };
        let mut names: Vec<String> = first.split(',').map(|n| n.trim().to_owned()).collect();
        while let Some(more) = lines.peek().and_then(|l| l.strip_prefix(HELPERS)) {
            names.extend(more.split(',').map(|n| n.trim().to_owned()));
            lines.next();
        }
        let mut wanted = vec![false; definitions.len()];
        for name in names.iter().filter(|n| !n.is_empty()) {
            let Some(i) = definitions.iter().position(|(known, _)| known == name) else {
                panic!("lua/{op}: {name} is not defined in lua/lib.lua");
            };
            assert!(!emitted[i], "lua/{op}: {name} is named twice");
            (wanted[i], emitted[i]) = (true, true);
        }
        script.push_str(&format!("{line}\n"));
        for (i, (_, text)) in definitions.iter().enumerate().filter(|(i, _)| wanted[*i]) {
            script.push_str(text);
            if text.lines().count() > 1 || !wanted[i + 1..].iter().any(|w| *w) {
                script.push('\n');
            }
        }
    }
    script
}
