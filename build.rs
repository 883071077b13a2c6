//! Assembles each Lua script: the operation's own file, with the
//! definitions of `lua/lib/` it uses (and those they use) put in before
//! the top-level statement that first needs each, in lua/lib/'s order (what
//! EVALSHA runs); and all of them as one Redis Functions library
//! (`library.lua`, what FCALL runs on Redis 7.0 and later and Valkey),
//! where every helper is defined once. The operations are the files of
//! lua/mutex/ and lua/counted/ (every engine's, then the counted engine's
//! own): the Rust side's `Op` and script table are generated from them
//! (`operations.rs`), and so is the data format (`format.rs`).
//!
//! Redis runs a script's whole body on every EVALSHA, so every `local
//! function` of a prepended library is a new closure per call: a script
//! carries only the helpers it uses, and a fast path that returns before a
//! later statement builds none of those only that statement needs (a
//! closure costs the server about 0.35k instructions a call).
//! tests/lua_helpers.rs checks, with a reading of Lua of its own, that
//! each assembled script defines every lua/lib/ name it uses, before its
//! use, and none it does not use.
//!
//! Each file of lua/lib/ is a sequence of top-level definitions, each a comment block
//! and either a one-line `local NAME = ...` or a `local function NAME(...)`
//! up to the next line that is exactly `end`. A definition whose comment
//! block starts with the line `-- @election` is the election's version of
//! the one right before it (of the same name): the election's scripts are
//! the mutex's files assembled with it in that one's place (so that its
//! scripts announce its leaders, and the mutex's pay nothing for that). The
//! election's version of a value may be a function (ANNOUNCE: nil for the
//! mutex, for an election the function that publishes and keeps each
//! change). A definition whose comment block starts with the
//! line `-- @library` is the Functions library's version of the one right
//! before it: the library keeps the values of lua/lib/ that read neither
//! KEYS nor ARGV from call to call (its `checked_` values), and only its
//! versions read them (a check of an argument that did not change is
//! not made again). A one-line definition may name a function of those
//! before it (`local lease_text = fmt`, what EVALSHA runs: no closure of
//! its own) where its library's version is a function: the library reads
//! it as one.

use std::env;
use std::fs;
use std::path::Path;

/// The data format of the keys and values this build writes (lua/lib/: the
/// first word of each lock's anchor value, "v<format>"), defined here
/// only: build.rs puts it in the Lua for every `@FORMAT@` and gives it to
/// the Rust side as `DATA_FORMAT` (OUT_DIR/format.rs). Raise it with every
/// change of a layout (docs/compatibility.md).
pub const FORMAT: u32 = 2;

/// The families of scripts, one folder of OUT_DIR each (`Engine` in
/// src/protocol/operation.rs): the folder of lua/ whose files it
/// assembles, and whether lua/lib/'s `@election` definitions stand in for
/// the ones they follow.
const FAMILIES: [(&str, &str, bool); 3] = [
    ("mutex", "mutex", false),
    ("counted", "counted", false),
    ("election", "mutex", true),
];

/// The files of lua/lib/, in the order their definitions are read (each
/// may use those of the files before it): what every script may use, the
/// messages to clients, the queue, the mutex's engine, the counted one's.
const LIB: [&str; 5] = ["common", "messages", "queue", "mutex", "counted"];

/// The first line of a definition of lua/lib/ that is the election's version
/// of the one before it.
const ELECTION: &str = "-- @election\n";

/// The first line of a definition of lua/lib/ that is the Functions
/// library's version of the one before it: the library keeps values from
/// call to call, which a script run by EVALSHA cannot (lua/lib/common.lua's
/// `checked_` values), so only the library's version reads and keeps them.
const LIBRARY: &str = "-- @library\n";

/// One top-level definition of lua/lib/: its name, its text (with the
/// comment block above it) and the election's version of that text, if it
/// has one of its own.
struct Definition {
    name: String,
    text: String,
    election: Option<String>,
    library: Option<String>,
}

fn main() {
    let lua = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("lua");
    // A directory: Cargo reruns this when any file under it changes.
    println!("cargo:rerun-if-changed={}", lua.display());
    build(&lua, FORMAT);
}

/// Assembles the scripts of the Lua in `lua` into OUT_DIR, with data
/// format `format`, and writes the format for the Rust side.
pub fn build(lua: &Path, format: u32) {
    let source = |file: &str| read(&lua.join(file)).replace("@FORMAT@", &format.to_string());
    // The operations: one file each in lua/mutex/ and lua/counted/ (every
    // engine's), then the counted engine's own, each in name order.
    let [every, counted] = ["mutex", "counted"].map(|folder| operations(lua, folder));
    let (shared, own): (Vec<String>, Vec<String>) =
        counted.into_iter().partition(|op| every.contains(op));
    assert_eq!(shared, every, "lua/counted/ lacks a file of lua/mutex/");
    let ops = [&every[..], &own[..]].concat();
    let definitions = split_lib(source);
    let out = Path::new(&env::var("OUT_DIR").unwrap()).to_path_buf();
    fs::write(out.join("format.rs"), format!("{format}\n")).expect("writing OUT_DIR/format.rs");
    let (mut library, values) = library_head(&definitions);
    let families = FAMILIES
        .iter()
        .flat_map(|&family| every.iter().map(move |op| (family, op.as_str())));
    let only = own.iter().map(|op| (FAMILIES[1], op.as_str()));
    let table: Vec<_> = families.chain(only).collect();
    for &((family, folder, election), op) in &table {
        let file = format!("{folder}/{op}.lua");
        let body = source(&file);
        let script = assemble(&definitions, election, &file, &body);
        let path = out.join(family).join(format!("{op}.lua"));
        fs::create_dir_all(path.parent().unwrap()).expect("creating OUT_DIR/<family>");
        fs::write(&path, script).unwrap_or_else(|e| panic!("writing {family}/{op}.lua: {e}"));
        library += &register(&definitions, &values, (family, election), op, &file, &body);
    }
    // A function that does nothing: a client calls it at its start to learn
    // whether the server has the library already (src/connections/scripts.rs:
    // `find_or_load`), rather than send the library every time. Not flagged
    // `no-writes`, so that a read-only replica refuses it (`READONLY`) as it
    // would the library's load: a URL naming a replica fails the start;
    // `allow-oom`, as a start over `maxmemory` must still work.
    library +=
        "-- Called at a client's start: the library is loaded.\nredis.register_function({\n  \
        function_name = PREFIX .. 'loaded',\n  flags = { 'allow-oom' },\n  \
        callback = function()\n    return 1\n  end,\n})\n";
    fs::write(out.join("library.lua"), library).expect("writing OUT_DIR/library.lua");
    let rs = operations_rs(&ops, every.len(), &table);
    fs::write(out.join("operations.rs"), rs).expect("writing OUT_DIR/operations.rs");
}

/// The operations of one engine: its folder's files, without `.lua`, in
/// name order.
fn operations(lua: &Path, folder: &str) -> Vec<String> {
    let mut ops: Vec<String> = fs::read_dir(lua.join(folder))
        .expect("reading lua/")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .map(|name| match name.strip_suffix(".lua") {
            Some(op) => op.to_owned(),
            None => panic!("lua/{folder}/{name} is no Lua file"),
        })
        .collect();
    ops.sort();
    ops
}

/// The Rust side of the script table (src/protocol/operations.rs, which
/// src/protocol/operation.rs includes, is a copy a test keeps current): the
/// `Op` enum, one variant per operation in `ops` (the first
/// `every` of them every engine's), their files' names (`FILES`), and
/// `Script::ALL` and the sources, one per (family, operation) of `table`,
/// in its order.
fn operations_rs(ops: &[String], every: usize, table: &[((&str, &str, bool), &str)]) -> String {
    let camel = |name: &str| -> String {
        let words = name.split('_').map(|w| w[..1].to_uppercase() + &w[1..]);
        words.collect()
    };
    let variant = |op: &String| format!("    /// `{op}.lua`\n    {},\n", camel(op));
    let variants: String = ops.iter().map(variant).collect();
    let (mut scripts, mut sources) = (String::new(), String::new());
    for ((family, ..), op) in table {
        let (engine, variant) = (camel(family), camel(op));
        scripts += &format!("        Script {{ engine: Engine::{engine}, op: Op::{variant} }},\n");
        sources +=
            &format!("    include_str!(concat!(env!(\"OUT_DIR\"), \"/{family}/{op}.lua\")),\n");
    }
    let folders: Vec<&str> = FAMILIES.iter().map(|&(family, _, _)| family).collect();
    let (files, n, families) = (ops.len(), table.len(), FAMILIES.len());
    format!(
        "// Generated by build.rs (operations_rs) from the files of lua/mutex/ and\n\
         // lua/counted/; checked in so that a reader finds it, and kept current\n\
         // by operation.rs's test (FAIRLOCK_BLESS=1 writes it anew).\n\n\
         /// A Redis-side operation, whatever the engine: one per file of lua/mutex/\n\
         /// and lua/counted/ (build.rs lists them).\n\
         #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]\npub enum Op {{\n{variants}}}\n\n\
         /// Each operation's file, without `.lua`, in `Op`'s order.\n\
         const FILES: [&str; {files}] = {ops:?};\n\
         /// The operations every engine has: the first of `Op`.\n\
         const EVERY: usize = {every};\n\
         /// Each family's folder of OUT_DIR, in `Engine`'s order: every engine's\n\
         /// operations come once for each.\n\
         const FOLDERS: [&str; {families}] = {folders:?};\n\n\
         impl Script {{\n    /// Every script, e.g. to load them all at once.\n    \
         pub const ALL: [Script; {n}] = [\n{scripts}    ];\n}}\n\n\
         const SOURCES: [&str; {n}] = [\n{sources}];\n"
    )
}

/// The head of the Functions library: every definition of lua/lib/ once,
/// at the library's top level, so that Redis builds each helper's closure
/// once, when it loads the library, instead of on every call; and the
/// values each call sets. The one-line definitions of lua/lib/ that read a
/// call's KEYS or ARGV (or have an election's version) are locals of the
/// library that each function sets (Redis runs one call at a time, so one
/// call's values never meet another's), the election's versions in an
/// election's, each before the top-level statement of the function that
/// first needs it, as EVALSHA's scripts define it (`register`): a fast
/// path that returns early sets none that only later statements read (each
/// costs a call about 0.2k instructions, `cargo bench --bench server_cost`).
/// Any other one-line definition is set once, when Redis loads the
/// library, and kept from call to call (lua/lib/common.lua's checked_
/// values); one whose library's version is a function is a function there.
/// Returns the head and, for each definition a call sets, its index and
/// its assignment in a mutex's (a counted lock's) function and in an
/// election's. The caller puts the `#!lua name=...` line and `local PREFIX
/// = '<function name prefix>'` in front (src/connections/library.rs: both
/// follow from this text's hash).
fn library_head(definitions: &[Definition]) -> (String, Vec<CallValue>) {
    // A value read from neither KEYS nor ARGV, with no election's version,
    // is the library's own: set once, where Redis loads the library, and
    // kept from one call to the next (lua/lib/common.lua's checked_ values).
    let (kept, values): (Vec<&Definition>, Vec<&Definition>) = definitions
        .iter()
        .filter(|d| !is_function(library_text(d)))
        .partition(|d| d.election.is_none() && !reads_call(library_text(d)));
    let names: Vec<&str> = values.iter().map(|d| d.name.as_str()).collect();
    let mut head = format!(
        "-- fairlock's scripts as one Redis Functions library, assembled by build.rs from\n\
         -- lua/lib/ and each operation's file (see build.rs: library_head, register).\n\
         local KEYS, ARGV\nlocal {}\n\n\
         -- Gives the helpers below a call's KEYS and ARGV (each function's\n\
         -- own are its parameters): see build.rs, register.\n\
         local function use_call(keys, argv)\n  KEYS, ARGV = keys, argv\nend\n\n",
        names.join(", ")
    );
    let functions = definitions.iter().filter(|d| is_function(library_text(d)));
    for definition in kept.into_iter().chain(functions) {
        head += &format!("{}\n", library_text(definition));
    }
    let assignment = |text: &str| {
        let line = text.lines().find(|l| l.starts_with("local ")).unwrap();
        line.trim_start_matches("local ").to_owned()
    };
    let mut sets = Vec::new();
    for value in values {
        let (name, plain) = (&value.name, assignment(library_text(value)));
        let election = match &value.election {
            None => plain.clone(),
            // A value whose election's version is a function (ANNOUNCE):
            // that function once, as `<NAME>_election`, which the
            // election's functions give the value (split_lib read it as
            // `local function <name>(`).
            Some(version) if is_function(version) => {
                let from = format!("local function {name}(");
                head += &version.replacen(&from, &format!("local function {name}_election("), 1);
                head.push('\n');
                format!("{name} = {name}_election")
            }
            Some(version) => assignment(version),
        };
        let index = definitions.iter().position(|d| d.name == *name).unwrap();
        sets.push((index, [plain, election]));
    }
    (head, sets)
}

/// A definition of lua/lib/ that each call of the library sets (see
/// `library_head`): its index, and its assignment in a mutex's (a counted
/// lock's) function and in an election's.
type CallValue = (usize, [String; 2]);

/// A definition's text in the Functions library.
fn library_text(d: &Definition) -> &str {
    d.library.as_deref().unwrap_or(&d.text)
}

/// Whether the Lua `code` reads a call's arguments (`KEYS`, `ARGV`).
fn reads_call(code: &str) -> bool {
    code_only(code)
        .split(|c: char| c != '_' && !c.is_ascii_alphanumeric())
        .any(|word| word == "KEYS" || word == "ARGV")
}

/// Whether the text of a definition of lua/lib/ is a function's, not a
/// one-line value's (`local NAME = ...`); an election's version of a value
/// may be a function (see `library_head`).
fn is_function(text: &str) -> bool {
    text.lines().any(|l| l.starts_with("local function "))
}

/// The registration of one operation's function in the library, named
/// `<PREFIX><family>_<op>`: its file's body (every helper is the
/// library's), with each value a call sets (`values`, library_head's) set
/// before the top-level statement that first needs it, in an `election`'s
/// version for an election's. Status only reads, so it runs on a server
/// out of memory too (`no-writes`), as its EVALSHA does; so do the calls
/// that keep or give back what Redis has and add nothing (`allow-oom`, as
/// Redis runs `PEXPIRE` and `DEL` there): a hold's renewal, its release,
/// abandon or downgrade (in place), a wait's cancel.
fn register(
    definitions: &[Definition],
    values: &[CallValue],
    (family, election): (&str, bool),
    op: &str,
    file: &str,
    body: &str,
) -> String {
    let flags = match op {
        "status" => " 'no-writes' ",
        "renew" | "release" | "abandon" | "cancel" | "downgrade" => " 'allow-oom' ",
        _ => "",
    };
    // The library's version of each definition, or the election's.
    let text = |d: &Definition| match &d.election {
        Some(version) if election => version.clone(),
        _ => library_text(d).to_owned(),
    };
    let mut function = String::new();
    let mut shared = false;
    for (statement, wanted) in placements(definitions, &text, body) {
        // The library's helpers that read KEYS or ARGV read its own, which
        // the function sets (use_call) before the first statement that
        // needs one: a fast path that needs none sets neither.
        let reads = |&i: &usize| {
            let text = text(&definitions[i]);
            is_function(&text) && reads_call(&text)
        };
        if !shared && wanted.iter().any(reads) {
            function += "    use_call(KEYS, ARGV)\n";
            shared = true;
        }
        for (_, assignments) in values.iter().filter(|(i, _)| wanted.contains(i)) {
            function += &format!("    {}\n", assignments[election as usize]);
        }
        function.extend(statement.lines().flat_map(|line| [line, "\n"]));
    }
    format!(
        "-- lua/{file}\nredis.register_function({{\n  function_name = PREFIX .. '{family}_{op}',\n  \
         flags = {{{flags}}},\n  callback = function(KEYS, ARGV)\n{function}  end,\n}})\n\n"
    )
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The top-level definitions of the files of lua/lib/ (`LIB`, each read
/// by `source`), in order, each with the election's and the library's
/// versions of it if they follow it. Anything else at column 0 stops the
/// build.
fn split_lib(source: impl Fn(&str) -> String) -> Vec<Definition> {
    let mut definitions: Vec<Definition> = Vec::new();
    for module in LIB {
        let file = format!("lib/{module}.lua");
        let lib = source(&file);
        let mut text = String::new();
        // Each line with its number, from 1.
        let mut lines = lib.lines().zip(1..);
        while let Some((line, n)) = lines.next() {
            if line.trim().is_empty() {
                text.clear();
                continue;
            }
            text.extend([line, "\n"]);
            if line.starts_with("--") {
                continue;
            }
            let name = if let Some(rest) = line.strip_prefix("local function ") {
                let body = lines.by_ref().take_while(|(line, _)| *line != "end");
                text.extend(body.flat_map(|(line, _)| [line, "\n"]));
                text.push_str("end\n");
                rest.split('(').next()
            } else {
                line.strip_prefix("local ")
                    .and_then(|rest| rest.split(" =").next())
            };
            let name =
                name.filter(|name| name.chars().all(|c| c == '_' || c.is_ascii_alphanumeric()));
            let Some(name) = name else {
                panic!("lua/{file} line {n}: not a definition build.rs can read: {line}");
            };
            let text = std::mem::take(&mut text);
            let version = [(LIBRARY, "library"), (ELECTION, "election")]
                .into_iter()
                .find_map(|(marker, which)| Some((which, text.strip_prefix(marker)?)));
            if let Some((which, version)) = version {
                let last = definitions.last_mut().filter(|last| last.name == name);
                let slot = last.map(|last| match which {
                    "library" => &mut last.library,
                    _ => &mut last.election,
                });
                let Some(slot) = slot.filter(|slot| slot.is_none()) else {
                    panic!("lua/{file} line {n}: the {which}'s {name} must follow the one {name}");
                };
                *slot = Some(version.to_owned());
                continue;
            }
            assert!(
                definitions.iter().all(|known| known.name != name),
                "lua/{file}: {name} is defined twice"
            );
            definitions.push(Definition {
                name: name.to_string(),
                text,
                election: None,
                library: None,
            });
        }
    }
    definitions
}

/// `body` with the definitions of lua/lib/ it uses, each with those it
/// uses in turn, put in before the top-level statement that first needs
/// it (before the comment block right above that statement), in lua/lib/'s
/// order; for an `election`, their election's versions where they have
/// one. A fast path that returns early thus builds no closure that only
/// later statements need.
fn assemble(definitions: &[Definition], election: bool, op: &str, body: &str) -> String {
    let what = if election { " for an election" } else { "" };
    let mut script = format!("-- lua/{op}, assembled by build.rs{what} with helpers of lua/lib/\n");
    let text = |d: &Definition| match &d.election {
        Some(version) if election => version.clone(),
        _ => d.text.clone(),
    };
    for (statement, wanted) in placements(definitions, &text, body) {
        for (n, &i) in wanted.iter().enumerate() {
            let text = text(&definitions[i]);
            script.push_str(&text);
            if text.lines().count() > 1 || n + 1 == wanted.len() {
                script.push('\n');
            }
        }
        script.push_str(&statement);
    }
    script
}

/// The top-level statements of `body`, each with the definitions of
/// lua/lib/ it is the first to need (those it names, with those they use
/// in turn, as `text` gives each definition), in lua/lib/'s order: where
/// a script defines each (`assemble`) and the library's function sets each
/// value a call sets (`register`).
fn placements(
    definitions: &[Definition],
    text: &impl Fn(&Definition) -> String,
    body: &str,
) -> Vec<(String, Vec<usize>)> {
    // What each definition uses of the others, in this version.
    let uses: Vec<Vec<usize>> = definitions
        .iter()
        .map(|d| lib_names_in(definitions, &text(d), Some(&d.name)))
        .collect();
    let mut emitted = vec![false; definitions.len()];
    let mut placed = Vec::new();
    for statement in statements(body) {
        let mut todo = lib_names_in(definitions, &statement, None);
        let mut first = Vec::new();
        while let Some(i) = todo.pop() {
            if !emitted[i] {
                emitted[i] = true;
                first.push(i);
                todo.extend(&uses[i]);
            }
        }
        // In lua/lib/'s order.
        first.sort_unstable();
        placed.push((statement, first));
    }
    placed
}

/// `body` cut before each top-level statement (a line at column 0 that
/// is neither a comment nor a block's `end`, `else` or `elseif`), each cut
/// moved up above the comment lines right over that statement.
fn statements(body: &str) -> Vec<String> {
    let lines: Vec<&str> = body.lines().collect();
    let starts = |l: &str| {
        let word = l.split(|c: char| !c.is_alphanumeric()).next().unwrap_or("");
        !l.is_empty() && !l.starts_with([' ', '-']) && !["end", "else", "elseif"].contains(&word)
    };
    let mut cuts = vec![0];
    for (n, line) in lines.iter().enumerate().skip(1) {
        if starts(line) {
            let comments = lines[..n].iter().rev().take_while(|l| l.starts_with("--"));
            cuts.push((n - comments.count()).max(cuts[cuts.len() - 1]));
        }
    }
    cuts.push(lines.len());
    let statement = |w: &[usize]| lines[w[0]..w[1]].iter().map(|l| format!("{l}\n")).collect();
    cuts.windows(2).map(statement).collect()
}

/// The definitions of lua/lib/ that the Lua `code` names (an identifier
/// outside comments, not a field after `.` or `:`), but for `itself`.
fn lib_names_in(definitions: &[Definition], code: &str, itself: Option<&str>) -> Vec<usize> {
    // `..` (concatenation) blanked too: a name right after `.` or `:` is a field.
    let code = code_only(code).replace("..", "  ");
    let mut found = Vec::new();
    for name in code.split(|c: char| c != '_' && !c.is_ascii_alphanumeric()) {
        let at = name.as_ptr() as usize - code.as_ptr() as usize;
        if code[..at].ends_with(['.', ':']) || Some(name) == itself {
            continue;
        }
        let at = definitions.iter().position(|d| d.name == name);
        if let Some(at) = at.filter(|at| !found.contains(at)) {
            found.push(at);
        }
    }
    found
}

/// Lua without its comments (each line from `--` on). Strings are read as
/// code: a name in one would only carry a helper the script does not use,
/// and tests/lua_helpers.rs, which reads Lua fully, fails the build's
/// scripts on that (as on a helper missed after a `--` inside a string).
fn code_only(src: &str) -> String {
    src.lines()
        .flat_map(|line| [line.split("--").next().unwrap_or(""), "\n"])
        .collect()
}
