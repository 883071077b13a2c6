//! A loopback proxy in front of one server that records the commands its
//! clients send, so that a test can say how many round trips a call of the
//! API costs. The server's own counts cannot: every server counts the
//! commands a script runs (in `INFO commandstats`, `INFO stats`, the slow
//! log) as it counts a client's, and MONITOR is no cheap witness.
//!
//! A client connects to [`CommandCounter::url`] instead of the server; for
//! each connection the proxy opens one to the server and copies bytes both
//! ways, one thread per direction, reading each RESP command (an array of
//! bulk strings, as the redis crate sends every command, pipelined ones
//! one by one) on its way to the server. Every thread is joined on drop.

use std::io::{ErrorKind as Io, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a blocked thread checks whether the proxy closes.
const POLL: Duration = Duration::from_millis(20);

/// A command-recording proxy to one upstream port; see the module
/// documentation.
pub struct CommandCounter {
    port: u16,
    state: Arc<State>,
    acceptor: Option<JoinHandle<()>>,
}

struct State {
    upstream: u16,
    closing: AtomicBool,
    /// The name (first argument, upper case) of every command sent so far,
    /// in the order the proxy read them.
    sent: Mutex<Vec<String>>,
    links: Mutex<Vec<Link>>,
}

/// A client's connection and the proxy's to the server, to shut them
/// down, and the threads that copy between them.
struct Link {
    sockets: [TcpStream; 2],
    pumps: [JoinHandle<()>; 2],
}

impl CommandCounter {
    /// Starts a proxy on a free loopback port in front of
    /// `127.0.0.1:<upstream_port>`.
    pub fn start(upstream_port: u16) -> CommandCounter {
        let listener = TcpListener::bind("127.0.0.1:0").expect("counter: bind a loopback port");
        listener
            .set_nonblocking(true)
            .expect("counter: non-blocking listener");
        let port = listener
            .local_addr()
            .expect("counter: local address")
            .port();
        let state = Arc::new(State {
            upstream: upstream_port,
            closing: AtomicBool::new(false),
            sent: Mutex::new(Vec::new()),
            links: Mutex::new(Vec::new()),
        });
        let acceptor = {
            let state = Arc::clone(&state);
            std::thread::Builder::new()
                .name(format!("counter-{port}-accept"))
                .spawn(move || accept_loop(&state, listener))
                .expect("counter: spawn the acceptor")
        };
        CommandCounter {
            port,
            state,
            acceptor: Some(acceptor),
        }
    }

    /// `redis://127.0.0.1:<proxy port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The names of the commands sent so far (upper case), in order.
    pub fn sent(&self) -> Vec<String> {
        self.state.sent.lock().unwrap().clone()
    }

    /// How many commands were sent so far.
    pub fn count(&self) -> usize {
        self.state.sent.lock().unwrap().len()
    }

    /// The names of the commands `f` made the clients send (those the
    /// proxy read while it ran), and what it returned.
    pub fn during<T>(&self, f: impl FnOnce() -> T) -> (Vec<String>, T) {
        let before = self.count();
        let out = f();
        (self.sent()[before..].to_vec(), out)
    }
}

impl Drop for CommandCounter {
    fn drop(&mut self) {
        self.state.closing.store(true, SeqCst);
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let links = std::mem::take(&mut *self.state.links.lock().unwrap());
        for link in &links {
            for socket in &link.sockets {
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
        for link in links {
            for pump in link.pumps {
                let _ = pump.join();
            }
        }
    }
}

fn accept_loop(state: &Arc<State>, listener: TcpListener) {
    while !state.closing.load(SeqCst) {
        let client = match listener.accept() {
            Ok((client, _)) => client,
            Err(err) if matches!(err.kind(), Io::WouldBlock | Io::Interrupted) => {
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            Err(err) => panic!("counter: accept: {err}"),
        };
        let upstream = std::net::SocketAddr::from(([127, 0, 0, 1], state.upstream));
        let Ok(server) = TcpStream::connect_timeout(&upstream, Duration::from_secs(1)) else {
            let _ = client.shutdown(Shutdown::Both);
            continue;
        };
        for s in [&client, &server] {
            s.set_nonblocking(false).expect("counter: blocking socket");
            s.set_nodelay(true).expect("counter: no delay");
            s.set_read_timeout(Some(POLL))
                .expect("counter: read timeout");
        }
        let clone = |s: &TcpStream| s.try_clone().expect("counter: clone a socket");
        let up = {
            let (state, from, to) = (Arc::clone(state), clone(&client), clone(&server));
            std::thread::spawn(move || pump(&state, from, to, true))
        };
        let down = {
            let (state, from, to) = (Arc::clone(state), clone(&server), clone(&client));
            std::thread::spawn(move || pump(&state, from, to, false))
        };
        state.links.lock().unwrap().push(Link {
            sockets: [client, server],
            pumps: [up, down],
        });
    }
}

/// Copies `from` to `to` until either closes or the proxy does; on the
/// way to the server (`up`), records each whole command read, before it
/// is passed on (so a reply never comes before its command is counted).
fn pump(state: &State, mut from: TcpStream, mut to: TcpStream, up: bool) {
    let mut buf = [0u8; 16 * 1024];
    let mut pending: Vec<u8> = Vec::new();
    while !state.closing.load(SeqCst) {
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(err) if matches!(err.kind(), Io::WouldBlock | Io::TimedOut | Io::Interrupted) => {
                continue
            }
            Err(_) => break,
        };
        if up {
            pending.extend_from_slice(&buf[..n]);
            let mut sent = state.sent.lock().unwrap();
            while let Some((used, name)) = command(&pending) {
                sent.push(name);
                pending.drain(..used);
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// The first whole command in `bytes`: how many bytes it takes and its
/// name, upper case; `None` while it is not all there.
fn command(bytes: &[u8]) -> Option<(usize, String)> {
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
        "counter: not a RESP command: {:?}",
        String::from_utf8_lossy(&rest[..end])
    );
    let n = std::str::from_utf8(&rest[1..end])
        .ok()
        .and_then(|n| n.parse().ok())
        .expect("counter: a RESP length");
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
