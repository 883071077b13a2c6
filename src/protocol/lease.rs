//! The lease a hold is granted with: renewed by its client's watchdog, or
//! fixed. One value, so that the length and whether anyone renews it never
//! travel apart.

use std::time::Duration;

/// How long a hold lasts unless renewed, and whether its client's watchdog
/// renews it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lease {
    /// Renewed by the watchdog while a guard stands for the hold.
    Renewed(Duration),
    /// Never renewed: the hold ends by itself this long after its grant.
    Fixed(Duration),
}

impl Lease {
    /// Its length.
    pub fn duration(self) -> Duration {
        match self {
            Lease::Renewed(lease) | Lease::Fixed(lease) => lease,
        }
    }

    /// Whether nobody renews it.
    pub fn is_fixed(self) -> bool {
        matches!(self, Lease::Fixed(_))
    }

    /// As the scripts take it: the length in ms, then `"1"` when fixed or
    /// `"0"` when renewed.
    pub fn args(self) -> [String; 2] {
        let fixed = if self.is_fixed() { "1" } else { "0" };
        [self.duration().as_millis().to_string(), fixed.to_owned()]
    }
}
