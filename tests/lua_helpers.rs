//! The Lua scripts as build.rs assembles them: each operation's file with
//! the lua/lib/ helpers it uses put in before the top-level statement
//! that first needs each, and this checks that every assembled script
//! defines each lua/lib/ name it uses, before its use, and none it does not
//! use; that every file of an engine is one of its scripts; that the watchdog's renewal and the fast
//! paths (a free lock or permit nobody waits for, a hold given back
//! with nobody waiting) build none of the queue's closures; that the
//! election's scripts are the mutex's files but for how they announce
//! (lua/lib/mutex.lua's `@election` ANNOUNCE: publish, keep in the history), which
//! the mutex's only test; that no script reads the client's clock (each
//! reads the server's, with TIME); that each function of the Functions
//! library sets a call's values, and shares its KEYS and ARGV with the
//! helpers, before it or a helper it calls reads them; and that both checks
//! see what they look for when it is missing. It
//! reads Lua with a scanner of its own, so a slip in build.rs is not
//! repeated here.

use fairlock::__test_support::{Engine, LockKind, Op, Script};

/// The files of lua/lib/ one after another, in the order build.rs reads
/// them.
const LIB: &str = concat!(
    include_str!("../lua/lib/common.lua"),
    include_str!("../lua/lib/messages.lua"),
    include_str!("../lua/lib/queue.lua"),
    include_str!("../lua/lib/mutex.lua"),
    include_str!("../lua/lib/counted.lua"),
);

/// Each script's own file (an election's are the mutex's), read from
/// lua/ as build.rs reads it.
fn own_file(script: Script) -> &'static str {
    let folder = match script.engine {
        Engine::Election => Engine::Mutex,
        engine => engine,
    }
    .folder();
    let path = format!(
        "{}/../lua/{folder}/{}.lua",
        env!("CARGO_MANIFEST_DIR"),
        script.op.file()
    );
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    Box::leak(text.into_boxed_str())
}

/// Lua with comments and string literals blanked out, byte for byte (a
/// reading of its own, so that a slip in build.rs's is not repeated).
fn code_only(src: &str) -> Vec<u8> {
    let b = src.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    while i < b.len() {
        let end = if b[i..].starts_with(b"--[[") {
            find(b, i, b"]]")
        } else if b[i..].starts_with(b"--") {
            find(b, i, b"\n") - 1
        } else if b[i..].starts_with(b"[[") {
            find(b, i, b"]]")
        } else if b[i] == b'\'' || b[i] == b'"' {
            let mut j = i + 1;
            while b[j] != b[i] {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            j + 1
        } else {
            i += 1;
            continue;
        };
        for c in &mut out[i..end] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
        i = end;
    }
    out
}

/// Past the first `close` after `from` (or the end).
fn find(b: &[u8], from: usize, close: &[u8]) -> usize {
    b[from + 1..]
        .windows(close.len())
        .position(|w| w == close)
        .map_or(b.len(), |p| from + 1 + p + close.len())
}

/// Every identifier of `code` that is not a field (after `.` or `:`),
/// with its offset, and whether it is defined there: a name before the
/// `=` (or the function's name) of a `local` at column 0.
fn identifiers(code: &[u8]) -> Vec<(String, usize, bool)> {
    let word = |c: u8| c == b'_' || c.is_ascii_alphanumeric();
    let mut found = Vec::new();
    let mut line_start = 0;
    let mut i = 0;
    while i < code.len() {
        if code[i] == b'\n' {
            line_start = i + 1;
        }
        if !word(code[i]) || (i > 0 && word(code[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < code.len() && word(code[i]) {
            i += 1;
        }
        if code[start].is_ascii_digit()
            || (start > 0 && code[start - 1] == b':')
            || (start > 0 && code[start - 1] == b'.' && code[start - 2] != b'.')
        {
            continue;
        }
        let line = &code[line_start..];
        let head = &line[..line.iter().position(|&c| c == b'\n').unwrap_or(line.len())];
        let lhs_end = line_start
            + if head.starts_with(b"local function ") {
                head.iter().position(|&c| c == b'(').unwrap_or(head.len())
            } else if head.starts_with(b"local ") {
                head.iter().position(|&c| c == b'=').unwrap_or(head.len())
            } else {
                0
            };
        let name = String::from_utf8(code[start..i].to_vec()).unwrap();
        let defined = start < lhs_end && name != "local" && name != "function";
        found.push((name, start, defined));
    }
    found
}

/// The names lua/lib/ defines at the top level.
fn lib_names() -> Vec<String> {
    let mut names: Vec<String> = identifiers(&code_only(LIB))
        .into_iter()
        .filter(|(_, _, defined)| *defined)
        .map(|(name, _, _)| name)
        .collect();
    names.dedup();
    names
}

/// Where the operation's own code lies in its assembled `source`: one
/// range per top-level statement of `own` (build.rs puts helpers in only
/// before those: a line at column 0 that is no block's `end`, `else` or
/// `elseif`), each found in order, the longest runs of them first.
fn own_parts(source: &str, own: &str) -> Vec<std::ops::Range<usize>> {
    // build.rs puts the data format in for `@FORMAT@`.
    let own = own.replace("@FORMAT@", &fairlock::DATA_FORMAT.to_string());
    let mut statements = vec![String::new()];
    for line in own.lines() {
        let first = line.split(|c: char| !c.is_alphanumeric()).next().unwrap();
        let starts = !line.is_empty() && !line.starts_with(' ');
        if starts && !["end", "else", "elseif"].contains(&first) {
            statements.push(String::new());
        }
        let statement = statements.last_mut().unwrap();
        statement.push_str(line);
        statement.push('\n');
    }
    let (mut from, mut i, mut parts) = (0, 0, Vec::new());
    while i < statements.len() {
        // At the start of a line: a statement is never the tail of one.
        let at_line = |run: String| {
            let mut found = source[from..].match_indices(&run).map(|(at, _)| at);
            found.find(|&at| from + at == 0 || source.as_bytes()[from + at - 1] == b'\n')
        };
        let (k, at) = (1..=statements.len() - i)
            .rev()
            .find_map(|k| Some((k, at_line(statements[i..i + k].concat())?)))
            .expect("each statement in order");
        from += at;
        for statement in &statements[i..i + k] {
            parts.push(from..from + statement.len());
            from += statement.len();
        }
        i += k;
    }
    assert_eq!(from, source.len(), "the last statement ends the script");
    parts
}

/// Where in `source` (of `script`) the first statement of its own ends
/// by which every name of `built` is defined.
fn built_by(script: Script, source: &str, built: &[&str]) -> usize {
    own_parts(source, own_file(script))
        .into_iter()
        .map(|part| part.end)
        .find(|&end| {
            let defined = identifiers(&code_only(&source[..end]));
            built
                .iter()
                .all(|b| defined.iter().any(|d| d.2 && d.0 == *b))
        })
        .unwrap_or_else(|| panic!("{script:?} never defines all of {built:?}"))
}

/// The operation's own code as one part, from `from` to the end.
fn own_from(source: &str, from: usize) -> Vec<std::ops::Range<usize>> {
    std::iter::once(from..source.len()).collect()
}

/// What is wrong with `source` (helpers, and the operation's own code
/// in the ranges `own`) as to lua/lib/'s names: one defined twice, used
/// before (or without) its definition, or defined though neither the
/// operation nor a helper it needs (transitively) uses it.
fn problems(source: &str, own: &[std::ops::Range<usize>]) -> Vec<String> {
    let names = lib_names();
    let found = identifiers(&code_only(source));
    let in_own = |at: usize| own.iter().any(|r| r.contains(&at));
    let mut problems = Vec::new();
    // Each definition of a lib name reaches to the next one, or to the
    // next part of the operation's own code.
    let mut defs: Vec<(&str, usize)> = found
        .iter()
        .filter(|(n, at, d)| *d && !in_own(*at) && names.contains(n))
        .map(|(n, at, _)| (n.as_str(), *at))
        .collect();
    defs.sort_by_key(|d| d.1);
    let (found_ref, names_ref) = (&found, &names);
    let uses_in = |from: usize, to: usize| {
        found_ref
            .iter()
            .filter(move |(n, at, d)| !*d && (from..to).contains(at) && names_ref.contains(n))
            .map(|(n, _, _)| n.as_str())
    };
    let mut needed: Vec<&str> = own.iter().flat_map(|r| uses_in(r.start, r.end)).collect();
    let mut i = 0;
    while i < needed.len() {
        for (k, &(name, at)) in defs.iter().enumerate() {
            if name == needed[i] {
                let next_own = own.iter().map(|r| r.start).filter(|&s| s > at).min();
                let next_def = defs.get(k + 1).map(|next| next.1);
                let to = [next_own, next_def]
                    .into_iter()
                    .flatten()
                    .min()
                    .unwrap_or(source.len());
                // Each name once: what it needs is then followed once.
                let new: Vec<&str> = uses_in(at, to)
                    .filter(|n| *n != name && !needed.contains(n))
                    .collect();
                needed.extend(new);
            }
        }
        i += 1;
    }
    for name in &names {
        let at: Vec<usize> = defs.iter().filter(|d| d.0 == name).map(|d| d.1).collect();
        let first_use = found.iter().find(|(n, _, d)| n == name && !*d).map(|f| f.1);
        match (at.as_slice(), first_use) {
            ([], None) => {}
            ([], Some(_)) => problems.push(format!("{name} is used, never defined")),
            ([def], Some(used)) if *def > used => {
                problems.push(format!("{name} is used before its definition"))
            }
            ([_], _) if !needed.contains(&name.as_str()) => {
                problems.push(format!("{name} is defined and never used"))
            }
            ([_], _) => {}
            _ => problems.push(format!("{name} is defined {} times", at.len())),
        }
    }
    problems
}

#[test]
fn each_script_defines_the_helpers_it_uses_and_no_other() {
    let names = lib_names();
    for must in ["LOCK", "FENCE_LIFE", "fmt", "hand_over", "extend_lease"] {
        assert!(names.iter().any(|n| n == must), "{must} not in {names:?}");
    }
    for script in Script::ALL {
        let source = script.source();
        let own = own_parts(source, own_file(script));
        assert_eq!(problems(source, &own), Vec::<String>::new(), "{script:?}");
    }
    // Renew, the watchdog's most frequent call, needs only these (fail
    // also says a lock key of another data format is one).
    let renew_script = Script::of(LockKind::Mutex, Op::Renew);
    let source = renew_script.source();
    let renewed = own_parts(source, own_file(renew_script))
        .into_iter()
        .find(|part| source[part.clone()].contains("return 1\n"))
        .expect("the renewal returns 1");
    let defined = |code: &str| -> Vec<String> {
        let mut defined: Vec<String> = identifiers(&code_only(code))
            .into_iter()
            .filter(|f| f.2 && names.contains(&f.0))
            .map(|f| f.0)
            .collect();
        defined.sort();
        defined
    };
    assert_eq!(
        defined(&source[..renewed.end]),
        ["LOCK", "fail", "whole_arg"]
    );
    // Past it, a hold found gone reads the lock key's mark, which tells a
    // force release.
    assert_eq!(
        defined(source),
        ["LOCK", "fail", "read_lock", "split_mark", "whole_arg"]
    );
    // The fast paths of acquire and release (a free lock or permit
    // nobody waits for), and of the counted engine's cancel and abandon (a
    // hold given back with nobody waiting, or nothing to undo), build only
    // the closures they call, none of the queue's.
    let mutex = |op| Script::of(LockKind::Mutex, op);
    let counted = |op| Script::of(LockKind::Semaphore, op);
    for (script, fast) in [
        (
            mutex(Op::Acquire),
            ["fail", "whole_arg", "server_time", "take"].as_slice(),
        ),
        (mutex(Op::Release), ["fail", "whole_arg"].as_slice()),
        (
            counted(Op::Acquire),
            ["fail", "whole_arg", "fmt"].as_slice(),
        ),
        (counted(Op::Release), ["fail", "whole_arg"].as_slice()),
        (
            counted(Op::Cancel),
            [
                "read_meta",
                "hold_of",
                "give_back_call_counted",
                "keep_anchor_counted",
            ]
            .as_slice(),
        ),
        (
            counted(Op::Abandon),
            [
                "read_meta",
                "hold_of",
                "give_back_call_counted",
                "keep_anchor_counted",
            ]
            .as_slice(),
        ),
    ] {
        // The fast path: the code up to the statement by which all its
        // functions are built.
        let source = script.source();
        let fast_end = built_by(script, source, fast);
        let found = identifiers(&code_only(&source[..fast_end]));
        let functions: Vec<&str> = found
            .iter()
            .filter(|f| f.2 && names.contains(&f.0))
            .map(|f| f.0.as_str())
            .collect();
        for f in fast {
            assert!(functions.contains(f), "{script:?} fast path lacks {f}");
        }
        for slow in ["hand_over", "admit_waiters", "live_head", "join_queue"] {
            assert!(
                !functions.contains(&slow),
                "{script:?} fast path builds {slow}: {functions:?}"
            );
        }
        // The mutex's take and release with nobody waiting read the lock's
        // value with one match of their own: read_lock's five captures
        // (and, for a take, its PTTL) are the other paths'.
        if [mutex(Op::Acquire), mutex(Op::Release)].contains(&script) {
            assert!(
                !functions.contains(&"read_lock"),
                "{script:?} fast path builds read_lock: {functions:?}"
            );
        }
        // A counted take or release with nobody waiting (the lone hold's)
        // reads the meta with one match or find of its own, neither scans
        // for run-out holds nor reads the farthest lease: it knows its TTLs.
        if [counted(Op::Acquire), counted(Op::Release)].contains(&script) {
            for slow in [
                "read_meta",
                "write_meta",
                "drop_expired",
                "keep_anchor_counted",
                "hold_of",
            ] {
                assert!(
                    !functions.contains(&slow),
                    "{script:?} fast path builds {slow}: {functions:?}"
                );
            }
        }
    }
}

#[test]
fn the_check_sees_a_helper_missing_or_unused() {
    let has = |problems: Vec<String>, what: &str| problems.iter().any(|p| p == what);
    // The whole library in front (how scripts were built before):
    // renew.lua leaves most of it unused, helpers used only by other
    // unused helpers too.
    let whole = format!("{LIB}{}", own_file(Script::of(LockKind::Mutex, Op::Renew)));
    let unused = problems(&whole, &own_from(&whole, LIB.len()));
    assert!(has(unused.clone(), "hand_over is defined and never used"));
    assert!(has(unused.clone(), "leave_queue is defined and never used"));
    assert!(!unused
        .iter()
        .any(|p| p.starts_with("whole_arg") || p.starts_with("fail ")));
    // Its own file alone calls a helper nobody defined.
    let renew = own_file(Script::of(LockKind::Mutex, Op::Renew));
    let bare = problems(renew, &own_from(renew, 0));
    assert!(has(bare, "whole_arg is used, never defined"));
    // A name in a comment or a string is no use of it.
    let quoted = "local function fmt(n)\nend\n-- fmt(1)\nreturn 'fmt(2)'\n";
    assert!(has(
        problems(quoted, &own_from(quoted, quoted.find("--").unwrap())),
        "fmt is defined and never used"
    ));
    // A helper's own recursion or a helper defined after its use.
    let late = "local function fail(m)\n  return fmt(m)\nend\nlocal function fmt(n)\nend\nreturn fail(1)\n";
    assert!(has(
        problems(late, &own_from(late, late.find("return fail").unwrap())),
        "fmt is used before its definition"
    ));
}

/// What is wrong in the Functions library `source` as to a call's values
/// (the names its head declares after `local KEYS, ARGV`): each function
/// (a `callback` of `redis.register_function`) must set each value (a line
/// `    NAME = ...`) and give the library's helpers its KEYS and ARGV (the
/// line `    use_call(KEYS, ARGV)`) before the first line of its own code
/// that reads it, itself or through a helper it calls (a `local function`
/// of the head, and every helper that one calls in turn); else the helper
/// reads what the call before left. A value set to a helper (`ANNOUNCE =
/// ANNOUNCE_election`) reads what that helper reads. Also returns how many
/// functions it read.
fn library_problems(source: &str) -> (Vec<String>, usize) {
    let code = String::from_utf8(code_only(source)).unwrap();
    let head_end = code.find("redis.register_function(").expect("a function");
    let (head, names) = (&code[..head_end], |text: &str| -> Vec<String> {
        let found = identifiers(text.as_bytes()).into_iter();
        found.map(|(name, _, _)| name).collect()
    });
    let after = &head[head.find("local KEYS, ARGV\nlocal ").expect("the values") + 23..];
    let values: Vec<&str> = after[..after.find('\n').unwrap()].split(", ").collect();
    let mut helpers = std::collections::HashMap::new();
    let mut lines = head.lines();
    while let Some(line) = lines.next() {
        if let Some(rest) = line.strip_prefix("local function ") {
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "end").collect();
            helpers.insert(rest.split('(').next().unwrap(), names(&body.join("\n")));
        }
    }
    let (mut problems, mut read) = (Vec::new(), 0);
    for (at, _) in code.match_indices("callback = function(KEYS, ARGV)\n") {
        read += 1;
        let named = &source[source[..at].rfind("function_name = PREFIX .. '").unwrap() + 27..];
        let function = &named[..named.find('\'').unwrap()];
        let body = &code[at..];
        let body = &body[..body.find("\n  end,\n").expect("the callback's end")];
        let (mut set, mut aliases, mut shared) = (Vec::<String>::new(), Vec::new(), false);
        for line in body.lines().skip(1) {
            if line == "    use_call(KEYS, ARGV)" {
                shared = true;
                continue;
            }
            let assigned = line.strip_prefix("    ").and_then(|l| l.split_once(" = "));
            let reads = assigned.map_or(line, |(_, rhs)| rhs);
            // Every name the line reads, through the helpers it calls.
            let (mut todo, mut seen) = (names(reads), Vec::new());
            while let Some(name) = todo.pop() {
                if seen.contains(&name) {
                    continue;
                }
                let helper = aliases.iter().find(|(value, _)| *value == name);
                if let Some(read) = helpers.get(helper.map_or(name.as_str(), |(_, h)| *h)) {
                    if !shared && read.iter().any(|n| n == "KEYS" || n == "ARGV") {
                        problems.push(format!(
                            "{function}: {name} reads KEYS or ARGV before use_call"
                        ));
                    }
                    todo.extend(read.iter().cloned());
                }
                seen.push(name);
            }
            for value in seen
                .iter()
                .filter(|n| values.contains(&n.as_str()) && !set.contains(*n))
            {
                problems.push(format!(
                    "{function}: {value} is read before it is set: {}",
                    line.trim()
                ));
            }
            if let Some((value, rhs)) = assigned {
                if let Some((helper, _)) = helpers.get_key_value(rhs.trim()) {
                    aliases.push((value.to_owned(), *helper));
                }
                set.push(value.to_owned());
            }
        }
    }
    (problems, read)
}

#[test]
fn each_library_function_sets_the_values_it_and_its_helpers_read_before_reading_them() {
    let (problems, read) = library_problems(fairlock::__test_support::library_source());
    assert!(problems.is_empty(), "{problems:#?}");
    assert_eq!(read, Script::ALL.len(), "one function per script");
}

#[test]
fn the_library_check_sees_a_value_or_the_call_shared_too_late() {
    // What the check says of the library with `line` taken out of
    // `function`, and whether one of its problems starts with `said`.
    let planted = |function: &str, line: &str, said: &str| {
        let source = fairlock::__test_support::library_source();
        let from = source.find(&format!("PREFIX .. '{function}'")).unwrap();
        let at = from + source[from..].find(line).unwrap();
        let (problems, _) =
            library_problems(&format!("{}{}", &source[..at], &source[at + line.len()..]));
        let seen = problems
            .iter()
            .any(|p| p.starts_with(&format!("{function}: {said}")));
        assert!(seen, "{function} without {line:?}: {problems:#?}");
    };
    planted(
        "mutex_acquire",
        "    LOCK = KEYS[1]\n",
        "LOCK is read before it is set",
    );
    // One only a helper reads, two calls down (free_lock, then wake).
    planted(
        "mutex_release",
        "    WAKE_PREFIX = ARGV[1]\n",
        "WAKE_PREFIX is read before it is set",
    );
    planted(
        "election_acquire",
        "    use_call(KEYS, ARGV)\n",
        "ANNOUNCE reads KEYS or ARGV",
    );
}

/// `source` without its first line (which says how it was assembled) and
/// without the definition of ANNOUNCE (the mutex's line, or the election's
/// function up to its `end`, and the comment block above it); and that
/// definition's text, if any.
fn without_announce(source: &str) -> (Vec<&str>, Option<String>) {
    let mut lines: Vec<&str> = source.lines().skip(1).collect();
    let Some(at) = lines.iter().position(|l| {
        l.starts_with("local ANNOUNCE =") || l.starts_with("local function ANNOUNCE(")
    }) else {
        return (lines, None);
    };
    let to = if lines[at].starts_with("local function ") {
        at + lines[at..]
            .iter()
            .position(|l| *l == "end")
            .expect("its end")
    } else {
        at
    };
    let definition = lines.drain(at..=to).collect::<Vec<_>>().join("\n");
    let mut from = at;
    while from > 0 && lines[from - 1].starts_with("--") && !lines[from - 1].starts_with("-- @") {
        from -= 1;
    }
    lines.drain(from..at);
    (lines, Some(definition))
}

/// Every file of lua/mutex/ and lua/counted/ is a script of its engine
/// (build.rs derives the table from them), and no script is anything else.
#[test]
fn every_file_of_an_engine_is_one_of_its_scripts() {
    for engine in [Engine::Mutex, Engine::Counted] {
        let dir = format!("{}/../lua/{}", env!("CARGO_MANIFEST_DIR"), engine.folder());
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let mut scripts: Vec<String> = Script::ALL
            .iter()
            .filter(|s| s.engine == engine)
            .map(|s| format!("{}.lua", s.op.file()))
            .collect();
        scripts.sort();
        assert_eq!(files, scripts, "{dir}");
        for script in Script::ALL.iter().filter(|s| s.engine == engine) {
            let head = format!("-- lua/{}/{}.lua", engine.folder(), script.op.file());
            assert!(script.source().starts_with(&head), "{script:?}");
        }
    }
}

/// The election's scripts are the mutex's files assembled with the
/// election's ANNOUNCE (a function: publish on its channel, keep in its
/// history) where the mutex's has nil, and
/// nothing else differs: the mutex's scripts pay for the announcements one
/// nil test where an election announces, no command and no string. Every
/// script that can grant or free the lock announces.
#[test]
fn the_elections_scripts_are_the_mutexs_but_for_announce() {
    let elections = Script::ALL.iter().filter(|s| s.engine == Engine::Election);
    let mutexes = Script::ALL.iter().filter(|s| s.engine == Engine::Mutex);
    assert_eq!(elections.clone().count(), mutexes.count());
    for op in elections.map(|s| s.op) {
        let script = Script::of(LockKind::Election, op);
        let mutex = Script::of(LockKind::Mutex, op).source();
        let election = script.source();
        assert!(election.starts_with("-- lua/mutex/"), "{op:?}");
        let (mutex_lines, mutex_def) = without_announce(mutex);
        let (election_lines, election_def) = without_announce(election);
        assert_eq!(mutex_lines, election_lines, "{op:?}");
        let grants = ![Op::Renew, Op::Status, Op::Revoke].contains(&op);
        if !grants {
            assert_eq!((mutex_def, election_def), (None, None), "{op:?}");
            assert!(!mutex.contains("ANNOUNCE"), "{op:?}");
            continue;
        }
        assert_eq!(mutex_def.as_deref(), Some("local ANNOUNCE = nil"), "{op:?}");
        // The election's publishes on its channel and keeps the change in
        // its history, a list of bounded length beside its keys.
        assert!(
            election_def
                .as_deref()
                .is_some_and(|d| d.contains("election:")
                    && d.contains("'LPUSH', KEYS[3]")
                    && d.contains(&format!(
                        "'LTRIM', KEYS[3], 0, {})",
                        fairlock::ELECTION_HISTORY_LEN - 1
                    ))),
            "{op:?}: {election_def:?}"
        );
        // In the mutex's code, ANNOUNCE is only tested, and what an
        // election does when it is set follows that test at once.
        let code: Vec<&str> = mutex_lines
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.starts_with("--"))
            .collect();
        let mut announcements = 0;
        for (i, line) in code.iter().enumerate() {
            if !line.contains("ANNOUNCE") || *line == "if ANNOUNCE then" {
                continue;
            }
            assert!(
                line.starts_with("ANNOUNCE(") && code[i - 1] == "if ANNOUNCE then",
                "{op:?}: ANNOUNCE used other than behind its test: {line}"
            );
            announcements += 1;
        }
        assert!(announcements > 0, "{op:?} announces nothing");
    }
}

#[test]
fn client_clock_is_never_read_by_the_scripts() {
    // Every script reads time with TIME on the server; none takes a
    // timestamp argument. Guard that property at the source level.
    let sources = fairlock_test_support::lua_sources();
    assert_eq!(
        sources.len(),
        26,
        "the 5 files of lua/lib/ and the 21 operations"
    );
    // lua/lib/'s files are one library (its steps take the time read by
    // server_time as arguments), each operation a script of its own.
    let (lib, ops): (Vec<_>, Vec<_>) = sources
        .into_iter()
        .partition(|(path, _)| path.parent().is_some_and(|dir| dir.ends_with("lib")));
    let lib_code: String = lib.into_iter().map(|(_, code)| code).collect();
    let whole_lib = (std::path::PathBuf::from("lua/lib/"), lib_code);
    for (path, code) in ops.into_iter().chain([whole_lib]) {
        assert!(
            !code.contains("os.time") && !code.contains("os.clock"),
            "{path:?}"
        );
        if code.contains("now_ms") || code.contains("now_us") {
            let uses_server_time =
                code.contains("server_time()") || code.contains("redis.call('TIME')");
            assert!(uses_server_time, "{path:?} computes time without TIME");
        }
    }
}
