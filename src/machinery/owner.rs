//! Owner ids: who an acquire call is, as Redis records it (a thread of
//! this client, or one unbound call), built without `fmt` and, for a
//! thread, once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::connections::resp::Decimal;
use crate::machinery::shared::Shared;

thread_local! {
    /// Number of the current thread inside this process, for owner ids.
    static THREAD_NUMBER: u64 = {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        NEXT.fetch_add(1, Ordering::Relaxed)
    };

    /// The current thread's last owner id (see [`Shared::owner_id`]).
    static BOUND_OWNER: std::cell::RefCell<Option<Arc<str>>> =
        const { std::cell::RefCell::new(None) };
}

impl Shared {
    /// The owner id of an acquire call: the calling thread's
    /// (`<client id>:<thread number>`: re-entrancy is per client and
    /// thread), or with `unbound_call` that call's own, whatever thread
    /// asks (`<client id>:u<call>`); then `@<tag>` when the call has one
    /// (an election's candidate: its value), else `@<identity>` when the
    /// client has one.
    ///
    /// Every acquire call takes one: a thread's own id is built once and
    /// handed out again while its calls go to the same client with the
    /// same suffix ([`BOUND_OWNER`]); a call's own is built in one
    /// allocation of its size, without `fmt`.
    pub(crate) fn owner_id(&self, unbound_call: Option<u64>, tag: Option<&str>) -> Arc<str> {
        let suffix = tag.or(self.config().identity.as_deref());
        let Some(call) = unbound_call else {
            let number = Decimal::of(THREAD_NUMBER.with(|n| *n));
            return BOUND_OWNER.with_borrow_mut(|last| match last {
                Some(owner) if self.spells(owner, "", &number, suffix) => Arc::clone(owner),
                _ => Arc::clone(last.insert(self.build_owner("", &number, suffix).into())),
            });
        };
        self.build_owner("u", &Decimal::of(call), suffix).into()
    }

    /// `<client id>:<kind><number>[@<suffix>]`.
    fn build_owner(&self, kind: &str, number: &Decimal, suffix: Option<&str>) -> String {
        let number = number.as_str();
        let size = self.client_id().len() + 1 + kind.len() + number.len();
        let mut owner = String::with_capacity(size + suffix.map_or(0, |s| 1 + s.len()));
        owner.push_str(self.client_id());
        owner.push(':');
        owner.push_str(kind);
        owner.push_str(number);
        if let Some(suffix) = suffix {
            owner.push('@');
            owner.push_str(suffix);
        }
        owner
    }

    /// Whether `owner` is what [`build_owner`](Self::build_owner) builds
    /// from the same parts.
    fn spells(&self, owner: &str, kind: &str, number: &Decimal, suffix: Option<&str>) -> bool {
        let rest = owner
            .strip_prefix(self.client_id())
            .and_then(|rest| rest.strip_prefix(':'))
            .and_then(|rest| rest.strip_prefix(kind))
            .and_then(|rest| rest.strip_prefix(number.as_str()));
        match (rest, suffix) {
            (Some(rest), None) => rest.is_empty(),
            (Some(rest), Some(suffix)) => rest.strip_prefix('@') == Some(suffix),
            (None, _) => false,
        }
    }
}
