//! The test files sit where cargo does not find them by itself (tests/ is
//! the tests' package, cli/tests/ declares its one target), so a file
//! nobody declares would never run. This checks that every `tests/*.rs` is
//! a module of the suite (tests/main.rs) or a `[[test]]` of tests/Cargo.toml
//! (never both), and every `cli/tests/*.rs` a module of cli/tests/main.rs.

use std::collections::BTreeSet;
use std::path::Path;

/// The names of the `.rs` files directly in `dir`, without `.rs`.
fn rust_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{dir:?}: {e}"))
        .map(|entry| entry.expect("a directory entry").file_name())
        .filter_map(|name| name.to_str()?.strip_suffix(".rs").map(String::from))
        .collect()
}

/// The modules `root` declares from files (`mod name;` lines).
fn declared_modules(root: &Path) -> BTreeSet<String> {
    std::fs::read_to_string(root)
        .unwrap_or_else(|e| panic!("{root:?}: {e}"))
        .lines()
        .filter_map(|line| line.strip_prefix("mod ")?.strip_suffix(';'))
        .map(String::from)
        .collect()
}

#[test]
fn every_test_file_is_declared_once() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files = rust_files(dir);
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("tests/Cargo.toml");
    let targets: BTreeSet<String> = manifest
        .split("[[test]]")
        .skip(1)
        .map(|target| {
            let path = target
                .lines()
                .find_map(|line| line.trim().strip_prefix("path = \""))
                .unwrap_or_else(|| panic!("a [[test]] without a path: {target}"));
            path.trim_end_matches('"')
                .trim_end_matches(".rs")
                .to_string()
        })
        .collect();
    let modules = declared_modules(&dir.join("main.rs"));
    assert!(
        files.len() >= 30,
        "too few test files found in {dir:?}: {files:?}"
    );
    assert!(targets.contains("main"), "the suite is not a [[test]]");
    let twice: Vec<_> = modules.intersection(&targets).collect();
    assert!(
        twice.is_empty(),
        "both a module of tests/main.rs and a [[test]] of its own: {twice:?}"
    );
    let declared: BTreeSet<String> = modules.union(&targets).cloned().collect();
    let missing: Vec<_> = files.difference(&declared).collect();
    let stale: Vec<_> = targets.difference(&files).collect();
    assert!(
        missing.is_empty(),
        "tests/*.rs neither a module of tests/main.rs nor a [[test]]: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "tests/Cargo.toml declares files that are gone: {stale:?}"
    );

    let cli = dir.join("../cli/tests");
    let mut files = rust_files(&cli);
    files.remove("main");
    let modules = declared_modules(&cli.join("main.rs"));
    let missing: Vec<_> = files.difference(&modules).collect();
    assert!(
        missing.is_empty(),
        "cli/tests/*.rs not a module of cli/tests/main.rs: {missing:?}"
    );
}

/// The crate docs' "Features" section lists exactly the user features of
/// the library's Cargo.toml: a feature the docs name but the manifest lacks
/// (one that was removed or renamed) fails here, and so does a feature
/// nobody documented.
#[test]
fn the_crate_docs_list_exactly_the_features_the_manifest_has() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let lib = std::fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs");
    let section = lib
        .split("//! ## Features")
        .nth(1)
        .expect("src/lib.rs has a \"## Features\" section");
    let documented: BTreeSet<String> = section
        .lines()
        .skip(1) // the rest of the heading's line
        .take_while(|line| line.starts_with("//!"))
        .filter_map(|line| line.strip_prefix("//! - `"))
        .filter_map(|rest| rest.split_once('`').map(|(name, _)| name.to_string()))
        .collect();
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let features: BTreeSet<String> = manifest
        .split("\n[features]\n")
        .nth(1)
        .expect("Cargo.toml has a [features] table")
        .lines()
        .take_while(|line| !line.starts_with('['))
        .filter_map(|line| line.split_once(" = ").map(|(name, _)| name.trim()))
        .filter(|name| !name.starts_with('#') && *name != "default")
        .map(String::from)
        .collect();
    assert!(!features.is_empty(), "no feature read from Cargo.toml");
    assert_eq!(
        documented, features,
        "src/lib.rs's Features section and Cargo.toml's [features] differ"
    );
}
