//! The `fairlock` command's tests, linked into one binary as cargo's own
//! tests/testsuite is: each file of cli/tests/ is a module here (a test's
//! name starts with its file's, `cli_kinds::...`), and `cli_support` is
//! what they share. tests/manifest.rs checks every file is declared here.

mod cli;
mod cli_elect;
mod cli_kinds;
mod cli_revoke;
mod cli_status;
mod cli_support;
mod cli_watch;
mod cli_words;
