//! Assembles each Lua script from `lua/lib.lua` and the operation's own file,
//! keeping only the helpers the operation needs.
//!
//! Redis runs a script's whole body on every EVALSHA, so every `local
//! function` of a prepended library is a new closure per call; a script
//! that carries only what it uses pays for nothing else (issue 12). The
//! helpers keep one source, `lua/lib.lua`; this picks from it.
//!
//! lib.lua is split into its top-level definitions, which start at column 0:
//! `local NAME[, NAME...] = ...` (continued on indented lines) and `local
//! function NAME(...)` up to the next line that is exactly `end`. A comment
//! block right above a definition goes with it. Anything else at column 0
//! other than comments and blank lines stops the build. An operation gets
//! the definitions it references, and those they reference in turn (names
//! matched as whole identifiers with comments and strings removed), in
//! lib.lua's order, then its own file; an operation whose file has
//! `-- @helpers` lines gets in front only what the part above the first
//! one (its fast path) needs, and at each such line what the code below it
//! adds.

use std::collections::BTreeSet;
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

/// One top-level definition of lib.lua.
struct Definition {
    /// The names it defines.
    names: Vec<String>,
    /// Its text (with the comment above it), ending in a newline.
    text: String,
    /// Identifiers it references, besides the names it defines.
    uses: BTreeSet<String>,
}

fn main() {
    // A directory: Cargo reruns this when any file under it changes.
    println!("cargo:rerun-if-changed=lua");
    let lua = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("lua");
    for engine in ["", "mutex", "counted"] {
        for entry in fs::read_dir(lua.join(engine)).expect("reading lua/") {
            let name = entry.expect("reading lua/").file_name();
            let name = format!("{engine}/{}", name.to_string_lossy());
            let name = name.trim_start_matches('/');
            if name.ends_with(".lua") && name != "lib.lua" && !OPERATIONS.contains(&name) {
                panic!("lua/{name} is no operation build.rs knows: add it to OPERATIONS");
            }
        }
    }
    let lib = read(&lua.join("lib.lua"));
    let definitions = split_lib(&lib).unwrap_or_else(|e| {
        panic!("lua/lib.lua: {e} (build.rs splits it into top-level definitions)")
    });
    let out = Path::new(&env::var("OUT_DIR").unwrap()).to_path_buf();
    for op in OPERATIONS {
        let body = read(&lua.join(op));
        let script = assemble(&definitions, op, &body);
        let path = out.join(op);
        fs::create_dir_all(path.parent().unwrap()).expect("creating OUT_DIR/<engine>");
        fs::write(path, script).unwrap_or_else(|e| panic!("writing {op}: {e}"));
    }
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// A line of an operation's file that ends one of its paths: the
/// definitions the code above the first such line needs go in front, those
/// the next section needs besides go at the line, and so on, so a call that
/// returns early never builds the closures only later code uses (each costs
/// server time on every EVALSHA).
const HELPERS_MARK: &str = "-- @helpers";

/// `body` with the definitions it needs, transitively, in lib order: in
/// front of the code that first needs them, section by section (see
/// `HELPERS_MARK`).
fn assemble(definitions: &[Definition], op: &str, body: &str) -> String {
    let mark = format!("\n{HELPERS_MARK}\n");
    let sections: Vec<&str> = body.split(mark.as_str()).collect();
    let mut script = String::new();
    let mut emitted = vec![false; definitions.len()];
    let mut so_far = String::new();
    for (k, section) in sections.iter().enumerate() {
        so_far.push_str(section);
        so_far.push('\n');
        let keep = needed(definitions, &so_far);
        let new: Vec<&Definition> = pick(definitions, |i| keep[i] && !emitted[i]);
        for (i, &k) in keep.iter().enumerate() {
            emitted[i] |= k;
        }
        if k == 0 {
            script.push_str(&format!(
                "-- {op} with the helpers of lua/lib.lua it uses, assembled by build.rs:\n-- {}\n\n",
                names(&new)
            ));
        } else {
            script.push_str(&format!(
                "\n-- helpers the code below adds, from lua/lib.lua: {}\n\n",
                names(&new)
            ));
        }
        push_definitions(&mut script, &new);
        script.push_str(section);
        if k + 1 < sections.len() {
            script.push('\n');
        }
    }
    script
}

/// The names `defs` define, for a script's comments.
fn names(defs: &[&Definition]) -> String {
    let names: Vec<&str> = defs
        .iter()
        .flat_map(|def| def.names.iter().map(String::as_str))
        .collect();
    if names.is_empty() {
        "(none)".to_string()
    } else {
        names.join(", ")
    }
}

/// Which definitions `code` needs, transitively. Later definitions only use
/// earlier ones (Lua locals are in scope from their definition on), so one
/// pass from the last to the first closes the set.
fn needed(definitions: &[Definition], code: &str) -> Vec<bool> {
    let mut wanted = identifiers(&strip(code));
    let mut keep = vec![false; definitions.len()];
    for (i, def) in definitions.iter().enumerate().rev() {
        if def.names.iter().any(|name| wanted.contains(name)) {
            keep[i] = true;
            wanted.extend(def.uses.iter().cloned());
        }
    }
    keep
}

fn pick(definitions: &[Definition], keep: impl Fn(usize) -> bool) -> Vec<&Definition> {
    definitions
        .iter()
        .enumerate()
        .filter_map(|(i, def)| keep(i).then_some(def))
        .collect()
}

/// The definitions' text, a blank line after each, but runs of one-liners
/// (`local LOCK = KEYS[1]` ...) stay together.
fn push_definitions(script: &mut String, defs: &[&Definition]) {
    let one_liner = |d: &Definition| d.text.lines().count() == 1;
    for (i, def) in defs.iter().enumerate() {
        script.push_str(&def.text);
        if !(one_liner(def) && defs.get(i + 1).is_some_and(|next| one_liner(next))) {
            script.push('\n');
        }
    }
}

/// lib.lua's top-level definitions, in order.
fn split_lib(lib: &str) -> Result<Vec<Definition>, String> {
    let lines: Vec<&str> = lib.lines().collect();
    let mut definitions = Vec::new();
    let mut comment = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim().is_empty() {
            comment.clear();
            i += 1;
            continue;
        }
        if line.starts_with("--") {
            if line.starts_with("--[") {
                return Err(format!(
                    "line {}: block comments at the top level are not supported",
                    i + 1
                ));
            }
            comment.push_str(line);
            comment.push('\n');
            i += 1;
            continue;
        }
        let start = i;
        let names = if let Some(rest) = line.strip_prefix("local function ") {
            let name = rest.split('(').next().unwrap_or("").trim();
            if !is_identifier(name) || !rest.contains('(') {
                return Err(format!(
                    "line {}: cannot read the function name: {line}",
                    i + 1
                ));
            }
            i += 1;
            while i < lines.len() && lines[i] != "end" {
                if !lines[i].is_empty() && !lines[i].starts_with([' ', '\t']) {
                    return Err(format!(
                        "line {}: function {name} (line {}) has an unindented line before its \
                         closing `end` at column 0: {}",
                        i + 1,
                        start + 1,
                        lines[i]
                    ));
                }
                i += 1;
            }
            if i == lines.len() {
                return Err(format!(
                    "line {}: function {name} has no closing `end` at column 0",
                    start + 1
                ));
            }
            i += 1;
            vec![name.to_string()]
        } else if let Some(rest) = line.strip_prefix("local ") {
            let Some((left, _)) = rest.split_once('=') else {
                return Err(format!("line {}: a local without a value: {line}", i + 1));
            };
            let names: Vec<String> = left.split(',').map(|n| n.trim().to_string()).collect();
            if !names.iter().all(|n| is_identifier(n)) {
                return Err(format!(
                    "line {}: cannot read the names defined: {line}",
                    i + 1
                ));
            }
            i += 1;
            while i < lines.len() && lines[i].starts_with([' ', '\t']) {
                i += 1;
            }
            names
        } else {
            return Err(format!(
                "line {}: not a comment, a `local NAME = ...` or a `local function NAME(...)` \
                 at column 0: {line}",
                i + 1
            ));
        };
        let code: String = lines[start..i].iter().map(|l| format!("{l}\n")).collect();
        for (names, code) in split_names(names, code) {
            let mut uses = identifiers(&strip(&code));
            for name in &names {
                uses.remove(name);
            }
            definitions.push(Definition {
                names,
                text: format!("{comment}{code}"),
                uses,
            });
            comment.clear();
        }
    }
    let mut seen = BTreeSet::new();
    for name in definitions.iter().flat_map(|d| &d.names) {
        if !seen.insert(name) {
            return Err(format!("{name} is defined twice at the top level"));
        }
    }
    Ok(definitions)
}

/// `local A, B = x, y` as `local A = x` and `local B = y`, so that a script
/// gets only the names it uses; anything else (one name, or values that do
/// not pair up with the names) as it is. The comment above goes with the first.
fn split_names(names: Vec<String>, code: String) -> Vec<(Vec<String>, String)> {
    let single_line = code.matches('\n').count() == 1;
    let values = code
        .split_once('=')
        .map(|(_, right)| top_level_commas(right.trim()))
        .unwrap_or_default();
    if names.len() < 2 || !single_line || values.len() != names.len() {
        return vec![(names, code)];
    }
    names
        .into_iter()
        .zip(values)
        .map(|(name, value)| {
            let code = format!("local {name} = {value}\n");
            (vec![name], code)
        })
        .collect()
}

/// `list` split at the commas outside brackets, strings and comments, or
/// nothing when it holds a comment or an unbalanced bracket.
fn top_level_commas(list: &str) -> Vec<String> {
    let stripped = strip(list);
    if stripped.len() != list.len() || list.contains("--") {
        return Vec::new();
    }
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0i32, 0);
    for (i, c) in stripped.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(list[from..i].trim().to_string());
                from = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Vec::new();
        }
    }
    if depth != 0 {
        return Vec::new();
    }
    parts.push(list[from..].trim().to_string());
    parts
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

/// Lua source with comments and string literals blanked out (newlines kept).
fn strip(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let blank = |out: &mut String, text: &[u8]| {
        out.extend(text.iter().map(|&c| if c == b'\n' { '\n' } else { ' ' }));
    };
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(b"--") {
            let end = match long_bracket(&b[i + 2..]) {
                Some(level) => find_close(b, i + 2, level),
                None => b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |p| i + p),
            };
            blank(&mut out, &b[i..end]);
            i = end;
        } else if b[i] == b'\'' || b[i] == b'"' {
            let quote = b[i];
            let mut j = i + 1;
            while j < b.len() && b[j] != quote && b[j] != b'\n' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(b.len());
            blank(&mut out, &b[i..end]);
            i = end;
        } else if let Some(level) = long_bracket(&b[i..]) {
            let end = find_close(b, i, level);
            blank(&mut out, &b[i..end]);
            i = end;
        } else {
            let len = src[i..].chars().next().map_or(1, char::len_utf8);
            out.push_str(&src[i..i + len]);
            i += len;
        }
    }
    out
}

/// The level of a long bracket (`[[`, `[=[`, ...) opening `b`, if one does.
fn long_bracket(b: &[u8]) -> Option<usize> {
    let rest = b.strip_prefix(b"[")?;
    let level = rest.iter().take_while(|&&c| c == b'=').count();
    (rest.get(level) == Some(&b'[')).then_some(level)
}

/// Where the long bracket of `level` opened at `from` ends (past its close).
fn find_close(b: &[u8], from: usize, level: usize) -> usize {
    let close = format!("]{}]", "=".repeat(level));
    let open_len = level + 2;
    b[from + open_len..]
        .windows(close.len())
        .position(|w| w == close.as_bytes())
        .map_or(b.len(), |p| from + open_len + p + close.len())
}

/// The identifiers `code` (stripped) names, field names after a single `.`
/// or a `:` excepted.
fn identifiers(code: &str) -> BTreeSet<String> {
    let b = code.as_bytes();
    let mut found = BTreeSet::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'_' || b[i].is_ascii_alphabetic() {
            let start = i;
            while i < b.len() && (b[i] == b'_' || b[i].is_ascii_alphanumeric()) {
                i += 1;
            }
            let field = start > 0
                && (b[start - 1] == b':'
                    || (b[start - 1] == b'.' && (start < 2 || b[start - 2] != b'.')));
            if !field {
                found.insert(code[start..i].to_string());
            }
        } else if b[i].is_ascii_digit() {
            // A number such as 1e5 or 0x1F is no identifier.
            while i < b.len()
                && (b[i] == b'_'
                    || b[i].is_ascii_alphanumeric()
                    || (b[i] == b'.' && b.get(i + 1) != Some(&b'.')))
            {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    found
}
