//! The metrics endpoint's HTTP server: a fixed set of threads, started where the caller says.
//!
//! The HTTP/1.x request head is parsed by the `httparse` crate (hyper's parser); what is
//! written here is only the part a general-purpose server would get wrong for an appliance:
//!
//! - **Fixed threads.** [`Listener::bind`] only binds the socket (a bad address stops the
//!   run before anything starts). [`serve`] starts exactly one acceptor and [`WORKERS`]
//!   workers, once, on the calling thread's CPUs (the runtime calls it after the main thread
//!   left the queue cores, so the threads inherit the housekeeping CPUs), and never another:
//!   a flood of scrapes cannot grow the process (tiny_http, used before, grew its worker
//!   pool with every concurrent connection and started its threads at bind time, on the
//!   queue cores).
//! - **Bounded work.** Accepted connections wait in a queue of [`PENDING`]; past that the
//!   acceptor answers `503` at once and closes. Each connection carries one request
//!   (`Connection: close`), its head at most [`MAX_HEAD`] bytes (`431` beyond), read within
//!   [`IO_TIMEOUT`] (a client that sends nothing is dropped): a slow or idle client holds
//!   one worker for at most that long.
//! - **No work on the data path.** Nothing here runs on a queue thread; the handler reads
//!   counters the queue threads publish.
//!
//! [`Server::stop`] wakes the acceptor (a connection to itself) and joins every thread.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{
    AtomicBool, AtomicU64,
    Ordering::{Relaxed, SeqCst},
};
use std::sync::mpsc::{sync_channel, Receiver, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Worker threads: requests answered at the same time.
pub const WORKERS: usize = 2;
/// Accepted connections waiting for a worker; more are answered `503`.
pub const PENDING: usize = 16;
/// Largest request head (request line and headers).
pub const MAX_HEAD: usize = 16 * 1024;
/// Time a client has to send its request, and to take the response.
pub const IO_TIMEOUT: Duration = Duration::from_secs(2);

/// A request as the handler sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `GET`, `HEAD`, ...
    pub method: &'a str,
    /// The path, without the query.
    pub path: &'a str,
    /// The query (after `?`; empty when none).
    pub query: &'a str,
}

/// A response: status, content type, body.
#[derive(Debug, Clone)]
pub struct Response {
    /// HTTP status code.
    pub status: u16,
    /// `Content-Type`.
    pub content_type: &'static str,
    /// Extra header lines (`Allow: GET, HEAD`), each without its line end.
    pub headers: Vec<&'static str>,
    /// The body (not sent for `HEAD`; its length is).
    pub body: Vec<u8>,
}

impl Response {
    /// A plain-text response.
    pub fn text(status: u16, body: &str) -> Self {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            headers: Vec::new(),
            body: body.as_bytes().to_vec(),
        }
    }
}

/// Answers requests; shared by the workers.
pub trait Handler: Send + Sync + 'static {
    /// The response to `req`.
    fn handle(&self, req: &Request<'_>) -> Response;
}

/// A bound socket, no thread yet.
#[derive(Debug)]
pub struct Listener {
    sock: TcpListener,
    addr: SocketAddr,
}

impl Listener {
    /// Binds `addr` (port 0: any free port).
    ///
    /// # Errors
    /// The bind's I/O error.
    pub fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let sock = TcpListener::bind(addr)?;
        let addr = sock.local_addr()?;
        Ok(Listener { sock, addr })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

/// The running server: [`stop`](Server::stop) it.
#[derive(Debug)]
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: JoinHandle<()>,
    workers: Vec<JoinHandle<()>>,
    /// Connections answered `503` (every worker busy, the queue full).
    refused: Arc<AtomicU64>,
}

/// Starts the acceptor and [`WORKERS`] workers named `{name}-accept`, `{name}-N`.
///
/// # Errors
/// A thread that cannot be spawned (those already started are stopped again).
pub fn serve<H: Handler>(l: Listener, handler: Arc<H>, name: &str) -> std::io::Result<Server> {
    let (tx, rx) = sync_channel::<TcpStream>(PENDING);
    let rx = Arc::new(Mutex::new(rx));
    let mut workers = Vec::with_capacity(WORKERS);
    for k in 0..WORKERS {
        let (rx, h) = (Arc::clone(&rx), Arc::clone(&handler));
        match std::thread::Builder::new()
            .name(format!("{name}-{k}"))
            .spawn(move || work(&rx, &*h))
        {
            Ok(w) => workers.push(w),
            Err(e) => {
                drop(tx);
                for w in workers {
                    let _ = w.join();
                }
                return Err(e);
            }
        }
    }
    let stop = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicU64::new(0));
    let (flag, count) = (Arc::clone(&stop), Arc::clone(&refused));
    let addr = l.addr;
    let acceptor = std::thread::Builder::new()
        .name(format!("{name}-accept"))
        .spawn(move || accept(&l.sock, &tx, &flag, &count));
    let acceptor = match acceptor {
        Ok(a) => a,
        Err(e) => {
            // The workers end when the sender (moved into the failed closure) is dropped.
            for w in workers {
                let _ = w.join();
            }
            return Err(e);
        }
    };
    Ok(Server {
        addr,
        stop,
        acceptor,
        workers,
        refused,
    })
}

impl Server {
    /// Connections answered `503` so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Relaxed)
    }

    /// Stops accepting, lets the workers answer what they hold, joins every thread.
    pub fn stop(self) {
        self.stop.store(true, SeqCst);
        // Wake the acceptor from accept(): it sees the flag and ends, dropping the queue.
        let wake = match self.addr {
            SocketAddr::V4(a) if a.ip().is_unspecified() => {
                SocketAddr::from(([127, 0, 0, 1], a.port()))
            }
            SocketAddr::V6(a) if a.ip().is_unspecified() => {
                SocketAddr::from((std::net::Ipv6Addr::LOCALHOST, a.port()))
            }
            a => a,
        };
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        let _ = self.acceptor.join();
        for w in self.workers {
            let _ = w.join();
        }
    }
}

fn accept(
    sock: &TcpListener,
    queue: &std::sync::mpsc::SyncSender<TcpStream>,
    stop: &AtomicBool,
    refused: &AtomicU64,
) {
    loop {
        let conn = sock.accept();
        if stop.load(SeqCst) {
            return;
        }
        match conn {
            Ok((s, _)) => match queue.try_send(s) {
                Ok(()) => {}
                Err(TrySendError::Full(mut s)) => {
                    if refused.fetch_add(1, Relaxed) == 0 {
                        log::warn!("metrics endpoint: every worker busy and {PENDING} connections waiting: answering 503 (counted)");
                    }
                    let _ = s.set_write_timeout(Some(Duration::from_millis(100)));
                    let _ = s.write_all(
                        b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                    );
                    finish(s);
                }
                Err(TrySendError::Disconnected(_)) => return,
            },
            // A connection reset before it was accepted, or out of descriptors: go on.
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

fn work(queue: &Mutex<Receiver<TcpStream>>, h: &dyn Handler) {
    loop {
        let next = match queue.lock() {
            Ok(q) => q.recv(),
            Err(_) => return,
        };
        let Ok(s) = next else { return };
        answer(s, h);
    }
}

/// Reads one request head from `s`, answers it and closes.
fn answer(mut s: TcpStream, h: &dyn Handler) {
    let _ = s.set_read_timeout(Some(IO_TIMEOUT));
    let _ = s.set_write_timeout(Some(IO_TIMEOUT));
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    let (version, resp, head_only) = loop {
        if len == buf.len() {
            break (1, Response::text(431, "request head too large\n"), false);
        }
        match s.read(&mut buf[len..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => len += n,
        }
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(_)) => {
                let method = req.method.unwrap_or("");
                let full = req.path.unwrap_or("/");
                let (path, query) = full.split_once('?').unwrap_or((full, ""));
                let r = h.handle(&Request {
                    method,
                    path,
                    query,
                });
                break (req.version.unwrap_or(1), r, method == "HEAD");
            }
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => {
                break (1, Response::text(431, "too many headers\n"), false);
            }
            Err(e) => {
                break (
                    1,
                    Response::text(400, &format!("bad request: {e}\n")),
                    false,
                )
            }
        }
    };
    let mut head = format!(
        "HTTP/1.{version} {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        resp.status,
        reason(resp.status),
        resp.content_type,
        resp.body.len()
    );
    for extra in &resp.headers {
        head.push_str(extra);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    if s.write_all(head.as_bytes()).is_ok() && !head_only {
        let _ = s.write_all(&resp.body);
    }
    finish(s);
}

/// How long [`finish`] reads what a client still sends after its answer.
const LINGER: Duration = Duration::from_millis(200);

/// Ends a connection without a reset: FIN after the answer, then what the client still sends
/// (a request a 503 or 431 did not read) is read and dropped until it closes, for at most
/// [`LINGER`]. Closing a socket with unread bytes sends RST instead of FIN, and the client
/// may then lose the answer (ECONNRESET before it read the 503).
fn finish(mut s: TcpStream) {
    let _ = s.shutdown(std::net::Shutdown::Write);
    let _ = s.set_read_timeout(Some(LINGER));
    let mut sink = [0u8; 4096];
    let until = std::time::Instant::now() + LINGER;
    while std::time::Instant::now() < until {
        match s.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Echo;
    impl Handler for Echo {
        fn handle(&self, r: &Request<'_>) -> Response {
            Response::text(200, &format!("{} {}", r.method, r.path))
        }
    }

    fn exchange(addr: SocketAddr, req: &[u8]) -> String {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(req).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    /// Threads whose name starts with `prefix`, once it is `want` (a new thread names
    /// itself as it starts) or after a second.
    fn threads_named(prefix: &str, want: usize) -> usize {
        let count = || {
            std::fs::read_dir("/proc/self/task")
                .unwrap()
                .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
                .filter(|c| c.trim_end().starts_with(prefix))
                .count()
        };
        let t0 = std::time::Instant::now();
        while count() != want && t0.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(5));
        }
        count()
    }

    /// One request per connection, parsed whole (also when it arrives in pieces); a query
    /// is cut off; `HEAD` gets the length and no body; bad heads get 400/431; a hundred
    /// connections at once leave the thread count at 1 + WORKERS; stop joins everything.
    #[test]
    fn fixed_threads_answer_every_request_and_refuse_garbage() {
        let l = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.addr();
        assert_eq!(threads_named("httptest", 0), 0, "bind starts no thread");
        let srv = serve(l, Arc::new(Echo), "httptest").unwrap();
        assert_eq!(threads_named("httptest", 1 + WORKERS), 1 + WORKERS);
        let r = exchange(addr, b"GET /metrics?x=1 HTTP/1.0\r\n\r\n");
        assert!(
            r.starts_with("HTTP/1.0 200 OK\r\n") && r.ends_with("GET /metrics"),
            "{r}"
        );
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"GET /status HT").unwrap();
        std::thread::sleep(Duration::from_millis(50));
        s.write_all(b"TP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut r = String::new();
        s.read_to_string(&mut r).unwrap();
        assert!(
            r.starts_with("HTTP/1.1 200") && r.contains("Connection: close"),
            "{r}"
        );
        let r = exchange(addr, b"HEAD / HTTP/1.1\r\n\r\n");
        assert!(
            r.contains("Content-Length: 6\r\n") && r.ends_with("\r\n\r\n"),
            "{r}"
        );
        assert!(exchange(addr, b"\x00\x01garbage\r\n\r\n").starts_with("HTTP/1.1 400"));
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n", "a".repeat(MAX_HEAD));
        assert!(exchange(addr, big.as_bytes()).starts_with("HTTP/1.1 431"));
        let many: Vec<_> = (0..100)
            .map(|_| std::thread::spawn(move || exchange(addr, b"GET /x HTTP/1.1\r\n\r\n")))
            .collect();
        for m in many {
            let r = m.join().unwrap();
            assert!(
                r.starts_with("HTTP/1.1 200") || r.starts_with("HTTP/1.1 503"),
                "{r}"
            );
        }
        assert_eq!(threads_named("httptest", 1 + WORKERS), 1 + WORKERS);
        srv.stop();
        assert_eq!(threads_named("httptest", 0), 0, "stop joins every thread");
    }

    /// A client that connects and sends nothing holds a worker for at most IO_TIMEOUT.
    #[test]
    fn a_silent_client_is_dropped_after_the_timeout() {
        let l = Listener::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = l.addr();
        let srv = serve(l, Arc::new(Echo), "httpslow").unwrap();
        let silent: Vec<TcpStream> = (0..WORKERS)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        let t0 = std::time::Instant::now();
        let r = exchange(addr, b"GET /after HTTP/1.1\r\n\r\n");
        assert!(r.ends_with("GET /after"), "{r}");
        let waited = t0.elapsed();
        assert!(
            waited >= Duration::from_millis(1500) && waited < IO_TIMEOUT * 3,
            "answered after {waited:?}"
        );
        drop(silent);
        srv.stop();
    }
}
