//! The one overlap checker: the holds a test saw, each as the interval its
//! holder believed it held the lock ([`Span`]), and the check that no two
//! holds of a lock that excludes every other hold overlapped, their fencing
//! tokens growing from one to the next ([`assert_exclusive`]); the same
//! for holds recorded by many threads, by lock name ([`HoldLog`]); and
//! every overlapping pair ([`overlapping`]) for a test that weighs them.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One hold as its holder saw it: believed held from `from` (its acquire
/// call returned) to `to` (just before its release started), with its
/// fencing token. `T` is the clock: an `Instant` on the test's own threads,
/// CLOCK_MONOTONIC nanoseconds across processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span<T = Instant> {
    pub from: T,
    pub to: T,
    pub token: u64,
}

/// Every pair of `spans` that overlap (one starts before the other ended;
/// touching is not overlapping), each as indices into `spans`, the one
/// that started first (or, starting together, comes first in `spans`)
/// first; in order of those starts.
pub fn overlapping<T: Ord + Copy>(spans: &[Span<T>]) -> Vec<(usize, usize)> {
    let mut by_start: Vec<usize> = (0..spans.len()).collect();
    by_start.sort_by_key(|&i| spans[i].from);
    let mut pairs = Vec::new();
    for (at, &a) in by_start.iter().enumerate() {
        for &b in by_start[at + 1..]
            .iter()
            .take_while(|&&b| spans[b].from < spans[a].to)
        {
            pairs.push((a, b));
        }
    }
    pairs
}

/// Panics, naming `what`, when two of `spans` (the holds of one lock that
/// admits one holder at a time) overlap, or when a hold's fencing token is
/// not above the token of the hold before it.
pub fn assert_exclusive<T: Ord + Copy + Debug>(what: &str, spans: &[Span<T>]) {
    if let Some(&(a, b)) = overlapping(spans).first() {
        panic!(
            "{what}: two holders at once: {:?} and {:?}",
            spans[a], spans[b]
        );
    }
    let mut in_order = spans.to_vec();
    in_order.sort_by_key(|span| span.from);
    for pair in in_order.windows(2) {
        assert!(
            pair[0].token < pair[1].token,
            "{what}: tokens must grow with the holds: {pair:?}"
        );
    }
}

/// The spans of holds by lock name, recorded by the threads of a test
/// while they run and checked together after. Cheap to clone: the clones
/// share one log.
#[derive(Debug, Clone, Default)]
pub struct HoldLog {
    spans: Arc<Mutex<BTreeMap<String, Vec<Span>>>>,
}

impl HoldLog {
    pub fn new() -> HoldLog {
        HoldLog::default()
    }

    /// Records one hold of the lock `name`.
    pub fn record(&self, name: &str, span: Span) {
        let mut spans = self.spans.lock().unwrap();
        spans.entry(name.to_owned()).or_default().push(span);
    }

    /// The holds recorded of each name, in the order they were recorded.
    pub fn spans(&self) -> BTreeMap<String, Vec<Span>> {
        self.spans.lock().unwrap().clone()
    }

    /// Holds recorded, of every name.
    pub fn len(&self) -> usize {
        self.spans.lock().unwrap().values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// [`assert_exclusive`] for each name's holds, named by it.
    pub fn assert_exclusive(&self) {
        for (name, spans) in self.spans() {
            assert_exclusive(&name, &spans);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(from: u64, to: u64, token: u64) -> Span<u64> {
        Span { from, to, token }
    }

    #[test]
    fn every_overlapping_pair_is_found_and_touching_is_not_overlapping() {
        let spans = [
            span(0, 10, 1),
            span(10, 20, 2),
            span(12, 13, 3),
            span(5, 6, 4),
        ];
        assert_eq!(overlapping(&spans), [(0, 3), (1, 2)]);
        assert!(overlapping(&[span(0, 10, 1), span(10, 20, 2)]).is_empty());
        assert_eq!(overlapping(&[span(0, 100, 1), span(50, 50, 2)]), [(0, 1)]);
    }

    #[test]
    fn holds_one_after_another_with_growing_tokens_are_exclusive() {
        assert_exclusive("ok", &[span(5, 9, 3), span(0, 5, 2), span(9, 9, 4)]);
        let log = HoldLog::new();
        log.record(
            "a",
            Span {
                from: Instant::now(),
                to: Instant::now(),
                token: 1,
            },
        );
        log.record(
            "b",
            Span {
                from: Instant::now(),
                to: Instant::now(),
                token: 1,
            },
        );
        log.assert_exclusive();
        assert_eq!(log.len(), 2);
    }

    #[test]
    #[should_panic(expected = "n: two holders at once")]
    fn an_overlap_is_caught() {
        assert_exclusive("n", &[span(0, 10, 1), span(20, 30, 3), span(9, 12, 2)]);
    }

    #[test]
    #[should_panic(expected = "n: tokens must grow")]
    fn a_token_out_of_order_is_caught() {
        assert_exclusive("n", &[span(0, 10, 2), span(10, 12, 1)]);
    }
}
