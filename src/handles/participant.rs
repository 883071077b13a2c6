//! `Participant`: who holds or waits, as a status names it (its owner id,
//! taken apart by [`protocol::owner`](crate::protocol::owner)).

use crate::protocol::owner;

/// One participant of a lock: a thread of some client, an unbound call
/// of it, or an election's candidate. [`owner`](Self::owner) is the id
/// Redis keeps, and what `Display` prints; the other methods take it apart.
///
/// ```
/// let who = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:7@web-3");
/// assert_eq!(who.client_id(), "6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b");
/// assert_eq!(who.thread(), Some(7));
/// assert_eq!(who.identity(), Some("web-3"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Participant {
    /// Private, so that its format may grow without breaking anyone: the
    /// methods are the way to read it.
    owner: String,
}

impl std::fmt::Display for Participant {
    /// The owner id.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.owner)
    }
}

impl Participant {
    /// The participant whose owner id is `owner`, as a status reports it
    /// (for code that reads statuses, and its tests).
    ///
    /// ```
    /// let who = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:7");
    /// assert_eq!(who.owner(), "6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:7");
    /// assert_eq!(who.to_string(), who.owner());
    /// ```
    pub fn new(owner: impl Into<String>) -> Self {
        let owner = owner.into();
        Participant { owner }
    }

    /// The owner id as Redis keeps it: `<client id>:<thread number>` for a
    /// thread's acquisitions, `<client id>:u<call>` for an
    /// [unbound](crate::FairMutex::unbound) one, then `@<identity>` when
    /// the client has one; an [election](crate::Election)'s candidate is
    /// `<client id>:u<call>@<value>`.
    ///
    /// ```
    /// let who = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:u12@web-3");
    /// assert_eq!(who.owner(), "6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:u12@web-3");
    /// ```
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The id of the client (see [`Client::id`](crate::Client::id)).
    ///
    /// ```
    /// let who = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:u12");
    /// assert_eq!(who.client_id(), "6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b");
    /// ```
    pub fn client_id(&self) -> &str {
        owner::client_of(&self.owner).unwrap_or(&self.owner)
    }

    /// The thread's number inside its process; `None` for an
    /// [unbound](crate::FairMutex::unbound) acquisition, which no thread
    /// owns.
    ///
    /// ```
    /// let thread = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:3");
    /// assert_eq!(thread.thread(), Some(3));
    /// let unbound = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:u12");
    /// assert_eq!(unbound.thread(), None);
    /// ```
    pub fn thread(&self) -> Option<u64> {
        owner::caller_of(&self.owner).0.parse().ok()
    }

    /// The identity its client was built with
    /// ([`ClientBuilder::identity`](crate::ClientBuilder::identity)), if
    /// any; for an [election](crate::Election)'s candidate, the value it
    /// campaigns with.
    ///
    /// ```
    /// let named = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:3@web-3/worker-7");
    /// assert_eq!(named.identity(), Some("web-3/worker-7"));
    /// let unnamed = fairlock::Participant::new("6f1c9e2ab0d54e3f8a7b1c2d3e4f5a6b:3");
    /// assert_eq!(unnamed.identity(), None);
    /// ```
    pub fn identity(&self) -> Option<&str> {
        owner::caller_of(&self.owner).1
    }
}
