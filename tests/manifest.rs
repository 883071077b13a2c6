//! The tests' package declares its targets one by one (tests/Cargo.toml:
//! the files sit in tests/ itself, where cargo does not look for a package's
//! tests), so a test file left out of it would never run. This checks that
//! every `tests/*.rs` is a `[[test]]` of that manifest, and nothing more.

use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn every_test_file_is_a_declared_test_target() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let files: BTreeSet<String> = std::fs::read_dir(dir)
        .expect("tests/ is readable")
        .map(|entry| entry.expect("a directory entry").file_name())
        .filter_map(|name| name.to_str()?.strip_suffix(".rs").map(String::from))
        .collect();
    let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("tests/Cargo.toml");
    let declared: BTreeSet<String> = manifest
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
    assert!(
        files.len() >= 30,
        "too few test files found in {dir:?}: {files:?}"
    );
    let missing: Vec<_> = files.difference(&declared).collect();
    let stale: Vec<_> = declared.difference(&files).collect();
    assert!(
        missing.is_empty(),
        "tests/*.rs not declared in tests/Cargo.toml: {missing:?}"
    );
    assert!(
        stale.is_empty(),
        "tests/Cargo.toml declares files that are gone: {stale:?}"
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
