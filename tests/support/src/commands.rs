//! Reading the RESP commands a client sends, one by one, from the bytes
//! on their way to the server: how [`Relay`](crate::Relay) records what a
//! call of the API costs in round trips.

/// The first whole command in `bytes`: how many bytes it takes and its
/// name, upper case; `None` while it is not all there.
pub(crate) fn command(bytes: &[u8]) -> Option<(usize, String)> {
    let (args, mut at) = line(bytes, 0, b'*')?;
    let mut name = None;
    for _ in 0..args {
        let (len, start) = line(bytes, at, b'$')?;
        let end = start + len + 2;
        if bytes.len() < end {
            return None;
        }
        name.get_or_insert_with(|| {
            String::from_utf8_lossy(&bytes[start..start + len]).to_ascii_uppercase()
        });
        at = end;
    }
    Some((at, name.unwrap_or_default()))
}

/// The number on the line at `at` that starts with `kind` (`*3\r\n`), and
/// where the next line starts; `None` while the line is not all there.
fn line(bytes: &[u8], at: usize, kind: u8) -> Option<(usize, usize)> {
    let rest = bytes.get(at..)?;
    let end = rest.windows(2).position(|w| w == b"\r\n")?;
    assert_eq!(
        rest.first(),
        Some(&kind),
        "relay: not a RESP command: {:?}",
        String::from_utf8_lossy(&rest[..end])
    );
    let n = std::str::from_utf8(&rest[1..end])
        .ok()
        .and_then(|n| n.parse().ok())
        .expect("relay: a RESP length");
    Some((n, at + end + 2))
}

#[cfg(test)]
mod tests {
    use super::command;

    #[test]
    fn commands_are_read_whole_and_one_by_one() {
        let two = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$4\r\nping\r\n";
        assert_eq!(command(two), Some((20, "GET".to_owned())));
        assert_eq!(command(&two[20..]), Some((14, "PING".to_owned())));
        for cut in 0..20 {
            assert_eq!(command(&two[..cut]), None, "{cut}");
        }
    }
}
