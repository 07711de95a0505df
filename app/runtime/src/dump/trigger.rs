//! What starts a dump: `POST /trigger` on the metrics endpoint ([`Triggers::http`]), a
//! datagram to a dump's `udp_trigger`, SIGUSR1. One watcher thread reads the datagrams and
//! the signal (every 20 ms) and hands each trigger to its dump's thread.
//!
//! A window is written as a query (the HTTP query string, or the datagram's text):
//! `last_ms=500` (the 500 ms before the trigger), `start_ns=..&end_ns=..` (Unix ns, receive
//! time), or `all=1` (all the history holds); HTTP also takes `dump=NAME` (needed when
//! there are several dumps).

use super::report::DumpReport;
use crate::error::RuntimeError;
use crate::observe::http::Response;
use rtdaq_config::model::Config;
use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The packets a dump writes, by receive time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// The last `ms` before the trigger.
    Last {
        /// Milliseconds.
        ms: u64,
    },
    /// `start_ns ..= end_ns`, ns since the Unix epoch.
    Between {
        /// Start.
        start_ns: u64,
        /// End.
        end_ns: u64,
    },
    /// All a history holds.
    All,
}

impl Window {
    /// The window as `(start_ns, end_ns)`, now.
    pub fn resolve(self) -> (u64, u64) {
        let now = crate::pacer::wall_clock_ns();
        match self {
            Window::Last { ms } => (now.saturating_sub(ms * 1_000_000), now),
            Window::Between { start_ns, end_ns } => (start_ns, end_ns),
            Window::All => (0, now),
        }
    }

    /// Parses `last_ms=N`, `start_ns=A&end_ns=B` or `all=1` (other keys ignored: `dump`).
    pub fn parse(query: &str) -> Result<Window, String> {
        let mut last = None;
        let (mut start, mut end, mut all) = (None, None, false);
        for kv in query.trim().split('&').filter(|s| !s.is_empty()) {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let num = || {
                v.trim()
                    .parse::<u64>()
                    .map_err(|_| format!("{k}={v:?} is not a whole number"))
            };
            match k.trim() {
                "last_ms" => last = Some(num()?),
                "start_ns" => start = Some(num()?),
                "end_ns" => end = Some(num()?),
                "all" => all = true,
                _ => {}
            }
        }
        match (last, start, end, all) {
            (Some(ms), None, None, false) if ms > 0 => Ok(Window::Last { ms }),
            (None, Some(s), Some(e), false) if s <= e => Ok(Window::Between {
                start_ns: s,
                end_ns: e,
            }),
            (None, None, None, true) => Ok(Window::All),
            _ => Err("give one window: last_ms=N (N > 0), start_ns=A&end_ns=B (Unix ns, A <= B) or all=1".into()),
        }
    }
}

/// One trigger for a dump thread.
pub struct Request {
    /// The window.
    pub window: Window,
    /// `http`, `udp` or `signal`.
    pub source: &'static str,
    /// Where the dump's outcome goes (HTTP waits for it).
    pub reply: Option<Sender<Result<DumpReport, String>>>,
}

struct Inner {
    /// Each dump's name and its thread's inbox (`None` once stopped: the thread ends).
    dumps: Vec<(String, Mutex<Option<Sender<Request>>>)>,
    stop: AtomicBool,
    watcher: Mutex<Option<std::thread::JoinHandle<()>>>,
    signal: signal_hook::SigId,
}

/// The triggers of a run's dumps (cloned into the metrics endpoint).
#[derive(Clone)]
pub struct Triggers(Arc<Inner>);

impl std::fmt::Debug for Triggers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Triggers").finish_non_exhaustive()
    }
}

impl Triggers {
    /// The triggers of `config`'s dumps and each dump thread's inbox: UDP sockets bound,
    /// SIGUSR1 taken, the watcher started.
    pub(super) fn new(config: &Config) -> Result<(Self, Vec<Receiver<Request>>), RuntimeError> {
        let mut sockets = Vec::new();
        for (k, d) in config.dumps.iter().enumerate() {
            let Some(addr) = d.udp_trigger else { continue };
            let s = UdpSocket::bind(addr)
                .and_then(|s| s.set_nonblocking(true).map(|()| s))
                .map_err(|e| RuntimeError::Dump {
                    key: format!("dumps[{k}].udp_trigger"),
                    message: format!("cannot receive on {addr}: {e}"),
                })?;
            sockets.push((k, s));
        }
        let flag = Arc::new(AtomicBool::new(false));
        let signal = signal_hook::flag::register(signal_hook::consts::SIGUSR1, Arc::clone(&flag))
            .map_err(|e| RuntimeError::Dump {
            key: "dumps[0]".into(),
            message: format!("cannot take SIGUSR1 for dump triggers: {e}"),
        })?;
        let (mut senders, mut inboxes) = (Vec::new(), Vec::new());
        for d in &config.dumps {
            let (tx, rx) = channel();
            senders.push((d.name.clone(), Mutex::new(Some(tx))));
            inboxes.push(rx);
        }
        let windows: Vec<Window> = config
            .dumps
            .iter()
            .map(|d| {
                d.signal_window_ms
                    .map_or(Window::All, |ms| Window::Last { ms })
            })
            .collect();
        let t = Triggers(Arc::new(Inner {
            dumps: senders,
            stop: AtomicBool::new(false),
            watcher: Mutex::new(None),
            signal,
        }));
        let me = t.clone();
        let h = std::thread::Builder::new()
            .name("dump triggers".into())
            .spawn(move || me.watch(&sockets, &flag, &windows))
            .map_err(|e| RuntimeError::Dump {
                key: "dumps[0]".into(),
                message: format!("cannot start the trigger thread: {e}"),
            })?;
        *t.0.watcher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(h);
        Ok((t, inboxes))
    }

    fn send(&self, k: usize, req: Request) -> bool {
        self.0.dumps[k]
            .1
            .lock()
            .map(|tx| tx.as_ref().is_some_and(|tx| tx.send(req).is_ok()))
            .unwrap_or(false)
    }

    /// The watcher: datagrams and SIGUSR1 until stopped.
    fn watch(&self, sockets: &[(usize, UdpSocket)], flag: &AtomicBool, windows: &[Window]) {
        let mut buf = [0u8; 512];
        while !self.0.stop.load(Relaxed) {
            if flag.swap(false, Relaxed) {
                for (k, w) in windows.iter().enumerate() {
                    self.send(
                        k,
                        Request {
                            window: *w,
                            source: "signal",
                            reply: None,
                        },
                    );
                }
            }
            for (k, s) in sockets {
                while let Ok((n, from)) = s.recv_from(&mut buf) {
                    let text = String::from_utf8_lossy(&buf[..n]);
                    match Window::parse(&text) {
                        Ok(window) => {
                            self.send(
                                *k,
                                Request {
                                    window,
                                    source: "udp",
                                    reply: None,
                                },
                            );
                        }
                        Err(e) => log::warn!("dump trigger from {from}: {e:?} in {text:?}"),
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `POST /trigger?QUERY`: dumps the window, answers with the dump's index (JSON) once
    /// written; `400` for a bad query, `404` for an unknown dump, `500` when writing failed.
    pub fn http(&self, method: &str, query: &str) -> Response {
        if method != "POST" {
            let mut r = Response::text(
                405,
                "POST /trigger?last_ms=N (or start_ns=A&end_ns=B, all=1; dump=NAME)\n",
            );
            r.headers.push("Allow: POST");
            return r;
        }
        let name = query
            .split('&')
            .find_map(|kv| kv.strip_prefix("dump="))
            .map(str::to_string);
        let k = match (&name, self.0.dumps.len()) {
            (None, 1) => 0,
            (None, _) => return Response::text(400, "several dumps: say which, dump=NAME\n"),
            (Some(n), _) => match self.0.dumps.iter().position(|(d, _)| d == n) {
                Some(k) => k,
                None => return Response::text(404, &format!("no dump named {n:?}\n")),
            },
        };
        let window = match Window::parse(query) {
            Ok(w) => w,
            Err(e) => return Response::text(400, &format!("{e}\n")),
        };
        let (tx, rx) = channel();
        if !self.send(
            k,
            Request {
                window,
                source: "http",
                reply: Some(tx),
            },
        ) {
            return Response::text(503, "the run is ending: no more dumps\n");
        }
        let (_, end) = window.resolve();
        let wait = end.saturating_sub(crate::pacer::wall_clock_ns());
        match rx.recv_timeout(Duration::from_nanos(wait) + Duration::from_secs(60)) {
            Ok(Ok(r)) => Response {
                status: 200,
                content_type: "application/json",
                headers: Vec::new(),
                body: serde_json::to_vec_pretty(&r).unwrap_or_default(),
            },
            Ok(Err(e)) => Response::text(500, &format!("{e}\n")),
            Err(_) => Response::text(504, "the dump did not finish within 60 s\n"),
        }
    }

    /// Stops the watcher and gives SIGUSR1 back; the dump threads end once their inboxes
    /// are empty.
    pub(super) fn stop(self) {
        self.0.stop.store(true, Relaxed);
        let h = self
            .0
            .watcher
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(h) = h {
            let _ = h.join();
        }
        signal_hook::low_level::unregister(self.0.signal);
        // Every clone shares these senders: dropping them closes the dump threads' inboxes
        // (a trigger the endpoint takes from now on is answered 503).
        for (_, tx) in &self.0.dumps {
            tx.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Window;

    #[test]
    fn windows_parse() {
        assert_eq!(Window::parse("last_ms=500"), Ok(Window::Last { ms: 500 }));
        assert_eq!(
            Window::parse("dump=x&start_ns=10&end_ns=20"),
            Ok(Window::Between {
                start_ns: 10,
                end_ns: 20
            })
        );
        assert_eq!(Window::parse(" all=1\n"), Ok(Window::All));
        for bad in [
            "",
            "last_ms=0",
            "last_ms=x",
            "start_ns=5",
            "start_ns=9&end_ns=3",
            "last_ms=1&all=1",
        ] {
            assert!(Window::parse(bad).is_err(), "{bad:?}");
        }
        let (s, e) = Window::Last { ms: 250 }.resolve();
        assert_eq!(e - s, 250_000_000);
    }
}
