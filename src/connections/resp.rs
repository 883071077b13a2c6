//! Packing a command in RESP straight into one buffer, sized once.
//!
//! Every lock call is one FCALL (or EVALSHA) of a dozen short arguments.
//! The redis crate's `Cmd` copies them into a buffer of its own (growing it
//! argument by argument) and its `Pipeline` copies them once more into the bytes it
//! sends; for a call that costs Redis a few microseconds, that was a
//! quarter of the client's instructions. Here the arguments' sizes are
//! added up first and each byte is written once, into a buffer that never
//! grows. The bytes are exactly the crate's (an array of bulk strings), so
//! any connection takes them, a cluster connection included (it reads the
//! keys back from them to route the call).

/// Appends the command `args` (its name first) to `out` as a RESP array of
/// bulk strings, reserving its exact size first. `args` is walked twice
/// (to size, then to write), hence `Clone`.
pub(crate) fn write_command<'a, I>(out: &mut Vec<u8>, args: I)
where
    I: Iterator<Item = &'a [u8]> + Clone,
{
    let (count, size) = args.clone().fold((0, 0), |(count, size), arg| {
        (count + 1, size + bulk_len(arg.len()))
    });
    out.reserve(1 + decimal_len(count) + 2 + size);
    write_header(out, b'*', count);
    for arg in args {
        write_header(out, b'$', arg.len());
        out.extend_from_slice(arg);
        out.push(b'\r');
        out.push(b'\n');
    }
}

/// Appends one RESP header, `<sigil><n>\r\n`, byte by byte: almost every
/// length is one or two digits, and a copy of a few bytes costs more.
fn write_header(out: &mut Vec<u8>, sigil: u8, n: usize) {
    out.push(sigil);
    if n < 10 {
        out.push(b'0' + n as u8);
    } else if n < 100 {
        out.push(b'0' + (n / 10) as u8);
        out.push(b'0' + (n % 10) as u8);
    } else {
        out.extend_from_slice(Decimal::of(n as u64).as_bytes());
    }
    out.push(b'\r');
    out.push(b'\n');
}

/// The packed size of one bulk string of `len` bytes: `$<len>\r\n<bytes>\r\n`.
fn bulk_len(len: usize) -> usize {
    1 + decimal_len(len) + 2 + len + 2
}

/// Digits of `n` in decimal.
fn decimal_len(n: usize) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// A number's decimal digits, on the stack (no `fmt`, no allocation).
pub(crate) struct Decimal {
    digits: [u8; 20],
    start: usize,
}

impl Decimal {
    pub(crate) fn of(n: impl Into<u64>) -> Decimal {
        let mut n = n.into();
        let mut digits = [0u8; 20];
        let mut start = digits.len();
        loop {
            start -= 1;
            digits[start] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        Decimal { digits, start }
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.digits[self.start..]
    }

    pub(crate) fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).expect("ASCII digits")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_of_every_width() {
        for n in [0, 9, 10, 99, 100, 65_535, u64::MAX] {
            let out = Decimal::of(n);
            assert_eq!(out.as_bytes(), n.to_string().as_bytes());
            assert_eq!(decimal_len(n as usize), out.as_bytes().len());
            assert_eq!(out.as_str(), n.to_string());
        }
    }
}
