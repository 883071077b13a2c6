//! Durations on the command line (`500ms`, `10s`, `1.5s`, `5m`, `2h`,
//! `4m05s`) and in messages (`850ms`, `4.2s`, `4m05s`, `1h02m`), each form
//! taken where the other is written.

use std::time::Duration;

/// The units accepted, with how many milliseconds each is.
const UNITS: [(&str, f64); 4] = [
    ("ms", 1.0),
    ("s", 1_000.0),
    ("m", 60_000.0),
    ("h", 3_600_000.0),
];

/// Longest duration accepted: a year is longer than any sane wait or lease.
const MAX: Duration = Duration::from_secs(366 * 24 * 3600);

/// Parses a number with a unit: `500ms`, `10s`, `1.5s`, `5m`, `2h`; or
/// several, largest unit first, as [`human`] writes them (`4m05s`,
/// `1h02m`, `1h30m15s`): a duration fairlock prints is one it takes.
/// A bare number is refused (seconds or milliseconds? say which).
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let mut rest = text;
    let mut ms = 0.0;
    // The units taken so far come before this one in UNITS' order, reversed.
    let mut smallest: Option<usize> = None;
    loop {
        let split = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(split);
        if number.is_empty() {
            return Err(format!(
                "{text:?} is not a duration (write e.g. 500ms, 10s, 5m or 2h)"
            ));
        }
        let value: f64 = number
            .parse()
            .map_err(|_| format!("{number:?} is not a number (write e.g. 500ms, 10s, 1.5s)"))?;
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(format!(
                "{text:?} has no unit (write {number}s for seconds, {number}ms for milliseconds)"
            ));
        }
        let Some(index) = UNITS.iter().position(|(name, _)| *name == unit) else {
            return Err(format!(
                "unknown unit {unit:?} in {text:?} (use ms, s, m or h)"
            ));
        };
        if smallest.is_some_and(|before| index >= before) {
            return Err(format!(
                "{text:?} is not a duration (several parts go from the largest unit down, \
                 each once: e.g. 1h30m, 4m05s)"
            ));
        }
        smallest = Some(index);
        ms += value * UNITS[index].1;
        if next.is_empty() {
            break;
        }
        rest = next;
    }
    if !ms.is_finite() || ms > MAX.as_millis() as f64 {
        return Err(format!("{text:?} is too long (a year at most)"));
    }
    Ok(Duration::from_micros((ms * 1000.0).round() as u64))
}

/// A short human form: `850ms`, `4.2s`, `4m05s`, `1h02m`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1_000 {
        format!("{ms}ms")
    } else if ms < 60_000 {
        format!("{:.1}s", d.as_secs_f64())
    } else if ms < 3_600_000 {
        let s = d.as_secs();
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        let m = d.as_secs() / 60;
        format!("{}h{:02}m", m / 60, m % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_forms() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse(" 7s "), Ok(Duration::from_secs(7)));
        assert_eq!(parse("5m30s"), Ok(Duration::from_secs(330)));
        assert_eq!(parse("1h02m"), Ok(Duration::from_secs(3_720)));
        assert_eq!(parse("1h30m15s"), Ok(Duration::from_secs(5_415)));
        assert_eq!(parse("1s500ms"), Ok(Duration::from_millis(1_500)));
    }

    /// Every duration a message says is one an option takes as written.
    #[test]
    fn what_human_writes_parses_back() {
        for ms in [
            0, 1, 850, 999, 1_000, 4_240, 59_949, 60_000, 245_000, 3_599_000,
        ]
        .into_iter()
        .chain([3_600_000, 3_720_000, 86_400_000, 365 * 86_400_000])
        {
            let shown = human(Duration::from_millis(ms));
            let back = parse(&shown).unwrap_or_else(|err| panic!("{ms} ms as {shown:?}: {err}"));
            // Seconds are shown to a tenth and minutes and hours whole.
            let slack = Duration::from_millis(if ms < 60_000 { 50 } else { 60_000 });
            assert!(
                back.abs_diff(Duration::from_millis(ms)) <= slack,
                "{ms} ms as {shown:?} read back as {back:?}"
            );
        }
    }

    #[test]
    fn refuses_anything_else_with_a_reason() {
        for (text, why) in [
            ("10", "has no unit"),
            ("ten", "not a duration"),
            ("", "not a duration"),
            ("5x", "unknown unit"),
            ("5 s", "unknown unit"),
            ("-1s", "not a duration"),
            ("1.2.3s", "not a number"),
            ("5s5m", "largest unit down"),
            ("5m5m", "largest unit down"),
            ("5m30", "has no unit"),
            ("1e3s", "unknown unit"),
            ("9999999999h", "too long"),
        ] {
            let err = parse(text).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
            assert!(!err.contains('\n'), "{text:?}: {err}");
        }
    }

    #[test]
    fn human_forms() {
        assert_eq!(human(Duration::from_millis(850)), "850ms");
        assert_eq!(human(Duration::from_millis(4_240)), "4.2s");
        assert_eq!(human(Duration::from_secs(245)), "4m05s");
        assert_eq!(human(Duration::from_secs(3_720)), "1h02m");
    }
}
