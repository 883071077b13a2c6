//! The least-privilege ACL user of docs/security.md, as the tests apply it:
//! the very `ACL SETUSER fairlock on ...` line docs/security.md prints, and the server's
//! `ACL LOG` of what it denied.

/// The `ACL SETUSER fairlock on ...` line of docs/security.md, as printed there.
pub fn readme_acl_line() -> String {
    let readme = include_str!("../../../docs/security.md");
    let lines: Vec<&str> = readme
        .lines()
        .filter(|l| l.starts_with("ACL SETUSER fairlock on "))
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "docs/security.md must print one ACL line: {lines:?}"
    );
    lines[0].to_owned()
}

/// The rules of docs/security.md's line for Redis Functions, which it says
/// to leave out on Redis 6.2 (or where loading a library is not wanted).
pub const FUNCTION_RULES: [&str; 2] = ["+fcall", "+function|load"];

/// Creates the docs/security.md user on `conn` with `password` (on Redis
/// 6.2 without [`FUNCTION_RULES`], as docs/security.md says).
pub fn create_acl_user(conn: &mut redis::Connection, password: &str) {
    let info: String = redis::cmd("INFO").arg("server").query(conn).unwrap();
    let leave_out: &[&str] = if info.contains("redis_version:6.") {
        &FUNCTION_RULES
    } else {
        &[]
    };
    create_acl_user_without(conn, password, leave_out);
}

/// As [`create_acl_user`], with the rules `leave_out` left out of the line.
pub fn create_acl_user_without(conn: &mut redis::Connection, password: &str, leave_out: &[&str]) {
    let line = readme_acl_line();
    let words: Vec<String> = line
        .split_whitespace()
        .skip(2)
        .filter(|w| !leave_out.contains(w))
        .map(|w| w.replace("<password>", password))
        .collect();
    assert!(
        words.iter().any(|w| w == &format!(">{password}")),
        "docs/security.md's ACL line sets the password with `><password>`: {line}"
    );
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(&words)
        .query(conn)
        .unwrap_or_else(|err| panic!("docs/security.md's ACL line rejected: {err}: {line}"));
}

/// Creates the user `mute` (password `mute`) on `conn`: allowed every
/// command and key and the wake channels, but no other channel, so that
/// it may not publish an election's announcements.
pub fn create_mute_user(conn: &mut redis::Connection) {
    let () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("mute")
        .arg("on")
        .arg(">mute")
        .arg("~*")
        .arg("resetchannels")
        .arg("&fairlock:wake:*")
        .arg("+@all")
        .query(conn)
        .unwrap();
}

/// Denials the server logged since the last reset (ACL LOG).
pub fn acl_denials(conn: &mut redis::Connection) -> Vec<redis::Value> {
    redis::cmd("ACL").arg("LOG").query(conn).unwrap()
}
