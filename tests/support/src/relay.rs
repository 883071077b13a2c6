//! A TCP relay on loopback in front of one upstream server (a redis-server
//! of the test), to put real network faults between a client and Redis
//! while Redis and every other client go on as usual.
//!
//! A client connects to [`Relay::url`] instead of the server; for each
//! connection the relay opens one to the upstream port and copies bytes
//! both ways, one thread per direction (so each direction keeps its order).
//!
//! Two faults, independent of each other:
//! - [`stall`](Relay::stall) / [`resume`](Relay::resume): a paused process
//!   or a slow link. Every byte, both ways, on every connection (also ones
//!   accepted during the stall) is held back, and delivered in order on
//!   resume. Nothing is lost; the sockets stay open.
//!   [`stall_new`](Relay::stall_new) holds back only the connections
//!   accepted from then on: a server that answers a client's open
//!   connections and no new one.
//! - [`cut`](Relay::cut) / [`heal`](Relay::heal): a partition that loses
//!   data. Every open connection is severed (both of its sockets shut
//!   down, bytes held or in flight in the relay discarded), and until the
//!   heal every new connection is accepted and closed at once. After the
//!   heal new connections pass normally; severed ones stay closed.
//!
//! And a NAT or load balancer that forgot idle flows: [`forget`](Relay::forget)
//! closes the open connections at the server and leaves the client's side
//! open and silent until the client sends something (then it is closed).
//!
//! And one-way faults: [`stall_replies`](Relay::stall_replies) holds back
//! what the servers send while the clients' requests pass (they arrive and
//! run, their replies wait), until [`resume`](Relay::resume);
//! [`lose_next_reply`](Relay::lose_next_reply) drops the next bytes a
//! server sends (a request ran, its reply is lost) and resets that
//! connection, as a middlebox that drops a flow does.
//!
//! And a DNS name that a failover moves: [`repoint`](Relay::repoint) sends
//! the connections accepted from then on to another server, the open ones
//! staying with the one they reach.
//!
//! And a link's latency: [`set_delay`](Relay::set_delay) holds each chunk
//! a fixed time in each direction (a ~1 ms round trip is `set_delay` of
//! 500 µs), so a test or a bench can put fairlock on an emulated network
//! link. Chunks keep their order; a chunk read while another waits is not
//! delayed further by it.
//!
//! Every thread of the relay is joined on drop, within a bound: dropping
//! never hangs a test (it panics instead, unless the test already does).

use std::io::{ErrorKind as Io, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::wait_until;

/// How often a relay thread blocked in a read or a stall checks whether it
/// is to stop.
const POLL: Duration = Duration::from_millis(20);
/// The most the relay waits for its threads to stop (on a cut or a drop).
const STOP_BOUND: Duration = Duration::from_secs(5);
/// The most opening a connection to the upstream server may take.
const UPSTREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// A loopback relay to one upstream port; see the module documentation.
pub struct Relay {
    port: u16,
    state: Arc<State>,
    acceptor: Option<JoinHandle<()>>,
}

struct State {
    /// The upstream port new connections are relayed to.
    upstream: AtomicU16,
    /// What the relay does now; `changed` is signalled on every change.
    mode: Mutex<Mode>,
    changed: Condvar,
    closing: AtomicBool,
    /// Connections that pass bytes now (severed ones are taken out).
    links: Mutex<Vec<Link>>,
    held_bytes: AtomicU64,
    /// Added to each chunk in each direction, in microseconds.
    delay_us: AtomicU64,
    accepted: AtomicU64,
    refused: AtomicU64,
    severed: AtomicU64,
    /// The name of every command the clients sent so far (upper case), in
    /// the order the relay read them, when it records them
    /// ([`Relay::recording`]).
    recording: AtomicBool,
    sent: Mutex<Vec<String>>,
}

#[derive(Default, Clone, Copy)]
struct Mode {
    stalled: bool,
    /// Connections accepted while set are stalled ([`Relay::stall_new`]).
    stall_new: bool,
    /// What servers send is held back ([`Relay::stall_replies`]).
    stall_replies: bool,
    cut: bool,
    /// After this many more chunks read from servers, the next one is
    /// dropped and its link severed ([`Relay::lose_reply_after`]).
    lose_reply: Option<u64>,
}

/// One client connection and its connection to the upstream server.
struct Link {
    /// Clones of the client's and the upstream socket, to shut them down.
    sockets: [TcpStream; 2],
    /// Set when the link is severed: a pump then drops what it holds.
    severed: Arc<AtomicBool>,
    /// Set when the link is forgotten ([`Relay::forget`]).
    forgotten: Arc<AtomicBool>,
    pumps: Vec<JoinHandle<()>>,
}

impl Link {
    fn sever(&self) {
        self.severed.store(true, SeqCst);
        for socket in &self.sockets {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }

    fn is_finished(&self) -> bool {
        self.pumps.iter().all(JoinHandle::is_finished)
    }
}

impl Relay {
    /// Starts a relay on a free loopback port in front of
    /// `127.0.0.1:<upstream_port>`.
    pub fn start(upstream_port: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("relay: bind a loopback port");
        listener
            .set_nonblocking(true)
            .expect("relay: non-blocking listener");
        let port = listener.local_addr().expect("relay: local address").port();
        let state = Arc::new(State {
            upstream: AtomicU16::new(upstream_port),
            mode: Mutex::new(Mode::default()),
            changed: Condvar::new(),
            closing: AtomicBool::new(false),
            links: Mutex::new(Vec::new()),
            held_bytes: AtomicU64::new(0),
            delay_us: AtomicU64::new(0),
            accepted: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            severed: AtomicU64::new(0),
            recording: AtomicBool::new(false),
            sent: Mutex::new(Vec::new()),
        });
        let acceptor = {
            let state = Arc::clone(&state);
            std::thread::Builder::new()
                .name(format!("relay-{port}-accept"))
                .spawn(move || accept_loop(&state, listener))
                .expect("relay: spawn the acceptor")
        };
        Relay {
            port,
            state,
            acceptor: Some(acceptor),
        }
    }

    /// The relay's own port (clients connect here).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:<relay port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// From now on every byte, both ways, on every connection (open ones
    /// and ones accepted later) is held back until [`resume`](Self::resume).
    pub fn stall(&self) {
        self.set_mode(|mode| mode.stalled = true);
    }

    /// Delivers what was held back, in order, and everything after it.
    pub fn resume(&self) {
        self.set_mode(|mode| {
            (mode.stalled, mode.stall_new, mode.stall_replies) = (false, false, false)
        });
    }

    /// A one-way partition: from now on what the servers send, on every
    /// connection, is held back until [`resume`](Self::resume), while what
    /// the clients send passes (requests arrive and run; their replies
    /// wait).
    pub fn stall_replies(&self) {
        self.set_mode(|mode| mode.stall_replies = true);
    }

    /// From now on every connection accepted (not the open ones) is held
    /// back as in a [`stall`](Self::stall), until [`resume`](Self::resume):
    /// a server that answers the connections a client has and not a new
    /// one (a subscription opened again).
    pub fn stall_new(&self) {
        self.set_mode(|mode| mode.stall_new = true);
    }

    /// A partition that loses data: every open connection is severed at
    /// once (both sockets shut down: the client reads end-of-stream; bytes
    /// the relay held or had read are discarded) and every connection made
    /// until [`heal`](Self::heal) is accepted and closed at once. Returns
    /// when no relay thread of a severed connection can send anything any
    /// more.
    pub fn cut(&self) {
        let severed: Vec<Link> = {
            let mut mode = self.state.lock_mode();
            mode.cut = true;
            // Under the mode lock: the acceptor adds no link meanwhile.
            let links = std::mem::take(&mut *self.state.lock_links());
            for link in &links {
                link.sever();
            }
            self.state.changed.notify_all();
            links
        };
        self.state.severed.fetch_add(severed.len() as u64, SeqCst);
        join_links(severed, "relay: the pumps of severed connections");
    }

    /// Ends a [`cut`](Self::cut): new connections pass normally again
    /// (also one that reached the port just before and was not accepted
    /// yet: the relay accepts every couple of milliseconds).
    pub fn heal(&self) {
        self.set_mode(|mode| mode.cut = false);
    }

    /// The next bytes any server sends on an open or new connection (a
    /// reply: the request ran) are dropped and that connection is severed
    /// (the client reads end-of-stream); every other connection, and every
    /// one after, passes normally.
    pub fn lose_next_reply(&self) {
        self.lose_reply_after(0);
    }

    /// As [`lose_next_reply`](Self::lose_next_reply), after `passed` more
    /// reads from the servers passed (one reply each when a client waits
    /// for each reply before its next request).
    pub fn lose_reply_after(&self, passed: u64) {
        self.set_mode(|mode| mode.lose_reply = Some(passed));
    }

    /// A NAT or load balancer that forgot the flows open now (an idle
    /// timeout): each open connection is closed at the server, its client
    /// reads nothing more, not even its end, until it sends something,
    /// which closes it (the reset a forgotten flow gets). New connections
    /// pass.
    pub fn forget(&self) {
        for link in self.state.lock_links().iter() {
            link.forgotten.store(true, SeqCst);
            let _ = link.sockets[1].shutdown(Shutdown::Both);
        }
    }

    /// Relays the connections accepted from now on to
    /// `127.0.0.1:<upstream_port>`, as a DNS name moved by a failover:
    /// open ones stay with the server they reach.
    pub fn repoint(&self, upstream_port: u16) {
        self.state.upstream.store(upstream_port, SeqCst);
    }

    /// From now on each chunk read, either way, is delivered `one_way`
    /// after it was read (`Duration::ZERO`: at once). The round trip
    /// through the relay grows by twice `one_way`.
    pub fn set_delay(&self, one_way: Duration) {
        let us = u64::try_from(one_way.as_micros()).expect("relay: delay in range");
        self.state.delay_us.store(us, SeqCst);
    }

    /// A relay (as [`start`](Self::start)) that records the commands its
    /// clients send ([`sent`](Self::sent), [`during`](Self::during)).
    pub fn recording(upstream_port: u16) -> Relay {
        let relay = Self::start(upstream_port);
        relay.state.recording.store(true, SeqCst);
        relay
    }

    /// Starts a relay whose link adds `one_way` each way (see
    /// [`set_delay`](Self::set_delay)).
    pub fn with_delay(upstream_port: u16, one_way: Duration) -> Relay {
        let relay = Self::start(upstream_port);
        relay.set_delay(one_way);
        relay
    }

    /// Bytes the relay read during a stall and held back (more may wait
    /// unread in the sockets' kernel buffers).
    pub fn held_bytes(&self) -> u64 {
        self.state.held_bytes.load(SeqCst)
    }

    /// Connections passing bytes now (not closed, not severed).
    pub fn open_connections(&self) -> usize {
        let mut links = self.state.lock_links();
        links.retain(|link| !link.is_finished());
        links.len()
    }

    /// Connections accepted and relayed so far.
    pub fn accepted_connections(&self) -> u64 {
        self.state.accepted.load(SeqCst)
    }

    /// Connections closed at once during a cut (or because the upstream
    /// server could not be reached).
    pub fn refused_connections(&self) -> u64 {
        self.state.refused.load(SeqCst)
    }

    /// Open connections severed by [`cut`](Self::cut)s and lost replies
    /// ([`lose_next_reply`](Self::lose_next_reply)) so far.
    pub fn severed_connections(&self) -> u64 {
        self.state.severed.load(SeqCst)
    }

    /// The names of the commands the clients sent through a
    /// [`recording`](Self::recording) relay so far (upper case), in the
    /// order it read them: what a call of the API
    /// costs in round trips, which the server's own counts cannot tell
    /// (they count the commands a script runs as they count a client's).
    pub fn sent(&self) -> Vec<String> {
        self.state.sent.lock().unwrap().clone()
    }

    /// The names of the commands `f` made the clients send (those the relay
    /// read while it ran), and what it returned.
    pub fn during<T>(&self, f: impl FnOnce() -> T) -> (Vec<String>, T) {
        let before = self.state.sent.lock().unwrap().len();
        let out = f();
        (self.sent()[before..].to_vec(), out)
    }

    fn set_mode(&self, change: impl FnOnce(&mut Mode)) {
        let mut mode = self.state.lock_mode();
        change(&mut mode);
        self.state.changed.notify_all();
    }
}

impl State {
    /// The mode; a thread that panicked holding it left it consistent.
    fn lock_mode(&self) -> MutexGuard<'_, Mode> {
        self.mode.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lock_links(&self) -> MutexGuard<'_, Vec<Link>> {
        self.links.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn closing(&self) -> bool {
        self.closing.load(SeqCst)
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.state.closing.store(true, SeqCst);
        {
            let _mode = self.state.lock_mode();
            self.state.changed.notify_all();
        }
        // The acceptor polls `closing` every few ms; once it is finished it
        // adds no link.
        let mut stopped = true;
        if let Some(acceptor) = self.acceptor.take() {
            if wait_until(STOP_BOUND, || acceptor.is_finished()) {
                let _ = acceptor.join();
            } else {
                stopped = false;
            }
        }
        let links = std::mem::take(&mut *self.state.lock_links());
        for link in &links {
            link.sever();
        }
        let joined = join_links_within(links, STOP_BOUND);
        if (!stopped || !joined) && !std::thread::panicking() {
            panic!("relay threads did not stop within {STOP_BOUND:?}");
        }
    }
}

/// Joins the pumps of `links`, which are being severed, within
/// [`STOP_BOUND`]; panics with `what` otherwise (unless already panicking).
fn join_links(links: Vec<Link>, what: &str) {
    if !join_links_within(links, STOP_BOUND) && !std::thread::panicking() {
        panic!("{what} did not stop within {STOP_BOUND:?}");
    }
}

/// Joins the pumps of `links` if all of them finish within `bound`.
fn join_links_within(links: Vec<Link>, bound: Duration) -> bool {
    if !wait_until(bound, || links.iter().all(Link::is_finished)) {
        return false;
    }
    for link in links {
        for pump in link.pumps {
            let _ = pump.join();
        }
    }
    true
}

/// Accepts connections until the relay closes: relays each, or closes it
/// at once during a cut.
fn accept_loop(state: &Arc<State>, listener: TcpListener) {
    while !state.closing() {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(err) if matches!(err.kind(), Io::WouldBlock | Io::Interrupted) => {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(err) => panic!("relay: accept: {err}"),
        };
        // Under the mode lock, so that a cut either sees this link or
        // made the relay refuse it.
        let mode = state.lock_mode();
        if mode.cut {
            // Counted first: whoever sees the connection end sees the count.
            state.refused.fetch_add(1, SeqCst);
            let _ = client.shutdown(Shutdown::Both);
            drop(client);
            continue;
        }
        if let Some(link) = open_link(state, client, mode.stall_new) {
            let mut links = state.lock_links();
            // Forget connections that closed by themselves.
            let (done, open): (Vec<Link>, Vec<Link>) = std::mem::take(&mut *links)
                .into_iter()
                .partition(Link::is_finished);
            *links = open;
            links.push(link);
            drop(links);
            drop(mode);
            join_links(done, "relay: the pumps of closed connections");
        }
    }
}

/// Connects `client` to the upstream server and starts its two pumps;
/// `None` (the client closed) when the upstream server cannot be reached.
/// A `held` link is stalled while the relay stalls new connections.
fn open_link(state: &Arc<State>, client: TcpStream, held: bool) -> Option<Link> {
    let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], state.upstream.load(SeqCst)));
    let server = match TcpStream::connect_timeout(&upstream, UPSTREAM_CONNECT_TIMEOUT) {
        Ok(server) => server,
        Err(_) => {
            state.refused.fetch_add(1, SeqCst);
            let _ = client.shutdown(Shutdown::Both);
            return None;
        }
    };
    let setup = |s: &TcpStream| {
        s.set_nonblocking(false)?;
        s.set_nodelay(true)?;
        s.set_read_timeout(Some(POLL))
    };
    state.accepted.fetch_add(1, SeqCst);
    setup(&client).expect("relay: set up the client socket");
    setup(&server).expect("relay: set up the upstream socket");
    let clone = |s: &TcpStream| s.try_clone().expect("relay: clone a socket");
    let severed = Arc::new(AtomicBool::new(false));
    let forgotten = Arc::new(AtomicBool::new(false));
    let ways = [
        ("up", clone(&client), clone(&server)),
        ("down", clone(&server), clone(&client)),
    ];
    let mut pumps = Vec::with_capacity(4);
    for (way, from, to) in ways {
        let (chunks, due) = std::sync::mpsc::channel();
        let (reader_state, reader_severed) = (Arc::clone(state), Arc::clone(&severed));
        let reader_forgotten = Arc::clone(&forgotten);
        pumps.push(
            std::thread::Builder::new()
                .name(format!("relay-{way}"))
                .spawn(move || {
                    let record = way == "up" && reader_state.recording.load(SeqCst);
                    let flags = [&*reader_severed, &*reader_forgotten];
                    pump(
                        &reader_state,
                        flags,
                        from,
                        chunks,
                        record,
                        held,
                        way == "down",
                    )
                })
                .expect("relay: spawn a pump"),
        );
        let (state, severed) = (Arc::clone(state), Arc::clone(&severed));
        let forgotten = Arc::clone(&forgotten);
        pumps.push(
            std::thread::Builder::new()
                .name(format!("relay-{way}-out"))
                .spawn(move || deliver(&state, [&*severed, &*forgotten], due, to))
                .expect("relay: spawn a pump"),
        );
    }
    Some(Link {
        sockets: [client, server],
        severed,
        forgotten,
        pumps,
    })
}

/// A chunk read from one side, and when it is to be written to the other.
type Chunk = (std::time::Instant, Vec<u8>);

/// Reads `from` until either side closes, the link is severed or the relay
/// closes, and hands each chunk to [`deliver`], stamped with its delivery
/// time. A chunk read during a stall waits for the stall to end; a chunk
/// held when the link is severed is dropped. At the end `from` is shut
/// down; [`deliver`] shuts the other socket down once it wrote what was
/// read, so the other direction stops too. On a forgotten link (`severed`,
/// `forgotten`) the first bytes read end it. `way_down`: `from` is the
/// server's side, whose chunks a stall of replies holds and a lost reply
/// drops (severing the link).
fn pump(
    state: &State,
    [severed, forgotten]: [&AtomicBool; 2],
    mut from: TcpStream,
    chunks: std::sync::mpsc::Sender<Chunk>,
    record: bool,
    held: bool,
    way_down: bool,
) {
    let stop = || severed.load(SeqCst) || state.closing();
    let mut buf = [0u8; 16 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    while !stop() {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if matches!(err.kind(), Io::WouldBlock | Io::TimedOut | Io::Interrupted) => {
                continue
            }
            Err(_) => break,
        };
        if forgotten.load(SeqCst) {
            break;
        }
        if record {
            // Each whole command read, before it is passed on (so a reply
            // never comes before its command is recorded).
            pending.extend_from_slice(&buf[..n]);
            let mut sent = state.sent.lock().unwrap();
            while let Some((used, name)) = crate::commands::command(&pending) {
                sent.push(name);
                pending.drain(..used);
            }
        }
        let read_at = std::time::Instant::now();
        let mut mode = state.lock_mode();
        if way_down && mode.lose_reply.is_some() {
            let passed = mode.lose_reply.take().filter(|&n| n > 0);
            mode.lose_reply = passed.map(|n| n - 1);
            if passed.is_none() {
                state.severed.fetch_add(1, SeqCst);
                severed.store(true, SeqCst);
                break;
            }
        }
        let stalled = |mode: &Mode| {
            mode.stalled || (held && mode.stall_new) || (way_down && mode.stall_replies)
        };
        if stalled(&mode) {
            state.held_bytes.fetch_add(n as u64, SeqCst);
        }
        while stalled(&mode) && !stop() {
            mode = state
                .changed
                .wait_timeout(mode, POLL)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        drop(mode);
        let due = read_at + Duration::from_micros(state.delay_us.load(SeqCst));
        if stop() || chunks.send((due, buf[..n].to_vec())).is_err() {
            break;
        }
    }
    drop(chunks);
    let _ = from.shutdown(Shutdown::Both);
}

/// Writes each chunk to `to` at its delivery time, in order, until the
/// reader is done or the link is severed or forgotten (`to` then left
/// open) or the relay closes.
fn deliver(
    state: &State,
    [severed, forgotten]: [&AtomicBool; 2],
    due: std::sync::mpsc::Receiver<Chunk>,
    mut to: TcpStream,
) {
    let stop = || severed.load(SeqCst) || forgotten.load(SeqCst) || state.closing();
    loop {
        let (at, bytes) = match due.recv_timeout(POLL) {
            Ok(chunk) => chunk,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) if !stop() => continue,
            Err(_) => break,
        };
        let wait = at.saturating_duration_since(std::time::Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        if stop() || to.write_all(&bytes).is_err() {
            break;
        }
    }
    if !forgotten.load(SeqCst) {
        let _ = to.shutdown(Shutdown::Both);
    }
}
