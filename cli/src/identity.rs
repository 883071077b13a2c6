//! Who this fairlock is in every status: `--identity`, checked as the
//! library checks it, or by default `USER@HOST:PID` (as ps and ssh would
//! name it), so that a holder shows with its machine and process; and the
//! host name an election's candidate campaigns with by default.

use fairlock::MAX_IDENTITY_LEN;

/// Whether `c` may be in an identity (the library's rule: it rides in
/// every owner id, which the scripts keep in space-separated values).
fn allowed(c: char) -> bool {
    c.is_ascii_alphanumeric() || "._-/@:+".contains(c)
}

/// Parses `--identity` (and `FAIRLOCK_IDENTITY`): a usage error, not the
/// library's InvalidConfig, since it is the command line's.
pub fn parse(text: &str) -> Result<String, String> {
    if (1..=MAX_IDENTITY_LEN).contains(&text.len()) && text.chars().all(allowed) {
        Ok(text.to_owned())
    } else {
        Err(format!(
            "an identity must be 1 to {MAX_IDENTITY_LEN} bytes of ASCII letters, digits and . _ - / @ : +"
        ))
    }
}

/// `USER@HOST:PID`: the user from `$USER` or the uid's name (else the uid),
/// the host name, this process's id; a character an identity may not hold
/// becomes `-`, and a host name too long for 64 bytes is cut.
pub fn default() -> String {
    of(&user(), &hostname().unwrap_or_default(), std::process::id())
}

/// `USER@HOST:PID` of these, made an identity.
fn of(user: &str, host: &str, pid: u32) -> String {
    let clean = |text: &str, or: &str| -> String {
        let text: String = text
            .chars()
            .map(|c| if allowed(c) { c } else { '-' })
            .collect();
        if text.is_empty() {
            or.to_owned()
        } else {
            text
        }
    };
    let user = clean(user, "user");
    let host = clean(host, "localhost");
    let pid = format!(":{pid}");
    // The pid whole, then the user, then as much of the host as fits.
    let user: String = user
        .chars()
        .take(MAX_IDENTITY_LEN / 2 - pid.len())
        .collect();
    let room = MAX_IDENTITY_LEN - pid.len() - user.len() - 1;
    let host: String = host.chars().take(room).collect();
    format!("{user}@{host}{pid}")
}

/// This machine's name (gethostname(2)); `None` if it has none.
pub fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let ok = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } == 0;
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let host = String::from_utf8_lossy(&buf[..end]).into_owned();
    (ok && !host.is_empty()).then_some(host)
}

/// `$USER`, else the name of this process's uid, else the uid.
fn user() -> String {
    if let Some(user) = std::env::var("USER").ok().filter(|u| !u.is_empty()) {
        return user;
    }
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as libc::c_char; 1024];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes the entry into pwd and its strings into
    // buf (of buf.len() bytes), and sets found to &pwd or null.
    let rc = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut found) };
    if rc == 0 && !found.is_null() && !pwd.pw_name.is_null() {
        // SAFETY: pw_name points at a NUL-terminated string inside buf.
        let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
        let name = name.to_string_lossy();
        if !name.is_empty() {
            return name.into_owned();
        }
    }
    uid.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_user_at_host_colon_pid_and_a_valid_identity() {
        assert_eq!(of("cron", "web-3", 4242), "cron@web-3:4242");
        assert_eq!(
            of("jo doe", "h\u{e9}te_1", 7),
            "jo-doe@h-te_1:7",
            "a character an identity may not hold becomes -"
        );
        assert_eq!(of("", "", 1), "user@localhost:1");
        let long = of(&"u".repeat(100), &"h".repeat(300), u32::MAX);
        assert_eq!(long.len(), MAX_IDENTITY_LEN, "{long}");
        assert!(long.ends_with(&format!(":{}", u32::MAX)), "{long}");
        assert!(parse(&long).is_ok());
        let mine = default();
        assert!(parse(&mine).is_ok(), "{mine}");
        assert!(
            mine.ends_with(&format!(":{}", std::process::id())),
            "{mine}"
        );
    }

    #[test]
    fn a_bad_identity_is_refused() {
        for bad in ["", "two words", "tab\there", &"x".repeat(65)] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse("cron@web-3").unwrap(), "cron@web-3");
    }
}
