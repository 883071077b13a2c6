//! An election's announcements, as its scripts publish them (the mutex's
//! files assembled with the election's ANNOUNCE: `Engine::Election`): every
//! step that grants its lock says on the election's channel who leads
//! (`<term> <value> <owner>`), every step that frees it with nobody to hand
//! it to says that the term ended (`resigned <term>`), in the same atomic
//! call, and nothing else does; the mutex's scripts, on the same steps,
//! publish nothing but their wake messages. An announcement the caller's
//! ACL user may not publish fails alone: the grant or release stands.

use std::time::Duration;

use fairlock::__test_support::{election_channel, ElectionMessage};

use super::driver::*;

/// A channel only the test publishes on: what came before it on a
/// subscription is what was published before the test's own publish.
const MARK: &str = "test:mark";

/// Every message published on one server, in order.
struct Published<'c>(redis::PubSub<'c>);

impl<'c> Published<'c> {
    fn on(conn: &'c mut redis::Connection) -> Self {
        let mut pubsub = conn.as_pubsub();
        pubsub.psubscribe("*").unwrap();
        pubsub
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        Published(pubsub)
    }

    /// What was published since the last call, (channel, payload) in
    /// order: up to a mark published now through `conn` (a server delivers
    /// one subscription's messages in the order they were published).
    fn since(&mut self, conn: &mut redis::Connection) -> Vec<(String, String)> {
        let _: i64 = redis::cmd("PUBLISH").arg(MARK).arg("").query(conn).unwrap();
        let mut published = Vec::new();
        loop {
            let (channel, payload) = message(&mut self.0);
            if channel == MARK {
                return published;
            }
            published.push((channel, payload));
        }
    }
}

/// The Leads message of `owner` ("<client>:u<call>@<value>") with `term`.
fn leads(term: u64, owner: &str) -> ElectionMessage {
    ElectionMessage::Leads {
        term,
        value: owner.split_once('@').unwrap().1.to_owned(),
        owner: owner.to_owned(),
    }
}

fn resigned(term: u64) -> ElectionMessage {
    ElectionMessage::Resigned { term }
}

/// The token of the holder the lock key records now.
fn holder_token(s: &mut Lock) -> u64 {
    let key = s.keys.all[0].clone();
    holder_of(&mut s.conn, &key)
        .expect("a holder")
        .1
        .parse()
        .unwrap()
}

/// One step of [`tour`]: what it did, what the server published while it
/// ran, and what an election says for it.
struct Step {
    what: &'static str,
    published: Vec<(String, String)>,
    announces: Vec<ElectionMessage>,
}

/// The name of the lock [`tour`] runs on.
const TOUR: &str = "tour";

/// Every way a lock of kind `k` (a mutex or an election: the same files)
/// is granted or freed, one step each: a free lock taken; a release, a
/// force release, an abandon, a try after a lease ran out, a cancel and a
/// heartbeat each handing it to a waiter; a release (both paths), an
/// abandon and a force release each freeing it with nobody to hand it to;
/// and steps that neither grant nor free (a queued call, a repeat of a
/// take, of a release, of a force release and of an abandon, a force
/// release of a free lock).
fn tour(k: LockKind) -> Vec<Step> {
    const M: Ask = Ask::Mutex;
    let mut s = Lock::new(k, TOUR);
    let mut sub = s.server.conn();
    let mut heard = Published::on(&mut sub);
    let mut steps = Vec::new();
    let mut step = |s: &mut Lock, what, announces| {
        steps.push(Step {
            what,
            published: heard.since(&mut s.conn),
            announces,
        })
    };

    let a = s.take("a:u1@alpha", 1, M);
    step(
        &mut s,
        "a free lock taken",
        vec![leads(a.token, "a:u1@alpha")],
    );
    match s.attempt("a:u1@alpha", 1, Mode::First, M) {
        AcquireReply::Acquired { token, .. } => assert_eq!(token, a.token),
        other => panic!("{other:?}"),
    }
    step(&mut s, "the same take delivered again", vec![]);
    s.queue("b:u2@x@y", 2, M);
    s.queue("c:u3@gamma", 3, M);
    step(&mut s, "two calls queued", vec![]);
    let b = s.handed(&a).remove(0);
    step(
        &mut s,
        "a release handing over",
        vec![leads(b.token, "b:u2@x@y")],
    );
    let freed = s.force_release("op#1");
    assert_eq!(freed.holder.as_deref(), Some("b:u2@x@y"));
    let c = holder_token(&mut s);
    step(
        &mut s,
        "a force release handing over",
        vec![leads(c, "c:u3@gamma")],
    );
    s.queue("d:u4@delta", 4, M);
    assert_eq!(s.abandon(entry("c:u3@gamma", 3, M)), AbandonReply::Released);
    let d = holder_token(&mut s);
    step(
        &mut s,
        "an abandon handing over",
        vec![leads(d, "d:u4@delta")],
    );
    assert_eq!(s.release(&hold("d:u4@delta", 4, M, d)), RELEASED);
    step(&mut s, "a release freeing", vec![resigned(d)]);
    s.release(&hold("d:u4@delta", 4, M, d));
    step(&mut s, "the same release delivered again", vec![]);

    // A release finding only a dead waiter: its slower path frees it too.
    let e = s.take("e:u5@eps", 5, M);
    s.queue("f:u6@phi", 6, M);
    // Its deadline (in the queue key: "~<entry>" scored 2^50 + the
    // deadline, lua/lib/queue.lua) long past.
    let queue = s.keys.all[1].clone();
    let () = s
        .conn
        .zadd(
            &queue,
            format!("~{}", queued("f:u6@phi", 6, M)),
            fairlock_test_support::fake_queue::DEADLINE_BASE,
        )
        .unwrap();
    step(&mut s, "a take", vec![leads(e.token, "e:u5@eps")]);
    assert_eq!(s.release(&e), RELEASED);
    step(
        &mut s,
        "a release freeing past a dead waiter",
        vec![resigned(e.token)],
    );

    let g = s.take("g:u7@g", 7, M);
    assert_eq!(s.abandon(entry("g:u7@g", 7, M)), AbandonReply::Released);
    step(
        &mut s,
        "a take, then its abandon freeing",
        vec![leads(g.token, "g:u7@g"), resigned(g.token)],
    );
    let h = s.take("h:u8@h", 8, M);
    assert_eq!(s.force_release("op#2").holder.as_deref(), Some("h:u8@h"));
    step(
        &mut s,
        "a take, then a force release freeing",
        vec![leads(h.token, "h:u8@h"), resigned(h.token)],
    );
    assert_eq!(s.force_release("op#2").holder.as_deref(), Some("h:u8@h"));
    step(&mut s, "the same force release delivered again", vec![]);
    assert_eq!(s.abandon(entry("g:u7@g", 7, M)), AbandonReply::Nothing);
    step(&mut s, "the same abandon delivered again", vec![]);
    assert_eq!(s.force_release("op#3").holder, None);
    step(&mut s, "a force release of a free lock", vec![]);

    // Leases that run out: whoever comes next hands the lock over. The
    // lapse itself ran no script, so nothing said the term ended.
    let i = s.take_fixed("i:u9@i", 9, M, SHORT);
    s.queue("j:u10@j", 10, M);
    step(&mut s, "a short take", vec![leads(i.token, "i:u9@i")]);
    sleep(SHORT + Duration::from_millis(50));
    match s.attempt("t:u11@t", 11, Mode::Try, M) {
        AcquireReply::Waiting { position: None, .. } => {}
        other => panic!("{other:?}"),
    }
    let j = holder_token(&mut s);
    step(
        &mut s,
        "a try handing a lapsed lock to its waiter",
        vec![leads(j, "j:u10@j")],
    );
    assert_eq!(s.release(&hold("j:u10@j", 10, M, j)), RELEASED);
    let k_hold = s.take_fixed("k:u12@k", 12, M, SHORT);
    s.queue("l:u13@l", 13, M);
    // m's grant is a short fixed lease too.
    s.attempt_with("m:u14@m", 14, Mode::First, M, 0, Lease::Fixed(SHORT))
        .unwrap();
    s.queue("n:u15@n", 15, M);
    step(
        &mut s,
        "a release freeing, a short take and three queued",
        vec![resigned(j), leads(k_hold.token, "k:u12@k")],
    );
    sleep(SHORT + Duration::from_millis(50));
    assert_eq!(s.cancel(entry("l:u13@l", 13, M)), CancelReply::Left);
    let m = holder_token(&mut s);
    step(
        &mut s,
        "a cancel handing a lapsed lock to the next waiter",
        vec![leads(m, "m:u14@m")],
    );
    sleep(SHORT + Duration::from_millis(50));
    let beat = s.heartbeat(LONG, &[entry("n:u15@n", 15, M)]);
    let n = holder_token(&mut s);
    assert_eq!(beat.statuses, [WaiterStatus::Owns(n)]);
    step(
        &mut s,
        "a heartbeat handing a lapsed lock to its waiter",
        vec![leads(n, "n:u15@n")],
    );
    steps
}

#[test]
fn every_grant_and_every_free_of_an_election_is_announced_in_its_call() {
    let channel = election_channel(PREFIX, TOUR);
    for step in tour(LockKind::Election) {
        let (announced, other): (Vec<_>, Vec<_>) =
            step.published.iter().partition(|(on, _)| *on == channel);
        assert!(
            other.iter().all(|(on, _)| on.starts_with("fairlock:wake:")),
            "{}: {other:?}",
            step.what
        );
        let announced: Vec<&str> = announced.iter().map(|(_, p)| p.as_str()).collect();
        let expected: Vec<String> = step.announces.iter().map(|m| m.payload()).collect();
        assert_eq!(announced, expected, "{}", step.what);
        for (payload, message) in announced.iter().zip(&step.announces) {
            assert_eq!(
                ElectionMessage::parse(payload.as_bytes()).as_ref(),
                Some(message),
                "{payload}"
            );
        }
    }
}

#[test]
fn the_mutexs_scripts_publish_nothing_but_wake_messages() {
    let steps = tour(LockKind::Mutex);
    let mut wakes = 0;
    for step in &steps {
        for (channel, payload) in &step.published {
            assert!(
                channel.starts_with("fairlock:wake:"),
                "{}: {channel} {payload}",
                step.what
            );
            wakes += 1;
        }
    }
    // The same steps, on an election, announce: those are the mutex's
    // chances to have published something.
    let chances: usize = steps.iter().map(|s| s.announces.len()).sum();
    assert!(chances >= 12 && wakes > 0, "{chances} {wakes}");
}

/// The announcements are made as the caller's ACL user: one it may not
/// publish fails alone (the server logs the denial), and every grant and
/// release goes on as if the message had been lost.
#[test]
fn an_announcement_the_user_may_not_publish_leaves_the_step_standing() {
    const M: Ask = Ask::Mutex;
    let mut s = Lock::new(LockKind::Election, "denied");
    create_mute_user(&mut s.conn);
    s.run_as("mute", "mute");
    let mut sub = s.server.conn();
    let mut heard = Published::on(&mut sub);
    let a = s.take("a:u1@alpha", 1, M);
    s.queue("b:u2@beta", 2, M);
    let b = s.handed(&a).remove(0);
    assert_eq!(s.holders(), [member(&b)]);
    assert_eq!(s.release(&b), RELEASED);
    assert!(s.holders().is_empty());
    let published = heard.since(&mut s.conn);
    assert!(
        published
            .iter()
            .all(|(on, _)| on.starts_with("fairlock:wake:")),
        "{published:?}"
    );
    let denials = format!("{:?}", acl_denials(&mut s.conn));
    assert!(
        denials.contains("fairlock:election:denied"),
        "the announcements were refused: {denials}"
    );
}
