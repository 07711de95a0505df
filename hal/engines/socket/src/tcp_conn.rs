//! TCP connections: listening, accepting, connecting, and handing connections to queues.
//!
//! A TCP interface has `connections` connections, numbered `k = 0..connections` in the
//! order they were accepted (server) or opened (client); connection `k` carries
//! `ConnId(k + 1)`, is read by RX queue `k mod n_rx` and written by TX queue `k mod n_tx`
//! (a `dup` of the descriptor when the interface has both).
//!
//! - **Client** (`role = "client"`): `open` connects every connection, each with bounded
//!   retries ([`SocketOptions::connect_attempts`](crate::SocketOptions) ×
//!   `connect_backoff`, about 5 s by default), and fails with an error naming
//!   `interfaces[i].address` when the peer never listens.
//! - **Server** (`role = "server"`): `open` binds and listens (before any client of the same
//!   config connects) but does not wait for peers. The first RX queue of the interface (the
//!   first TX queue when it has no RX queue) accepts without blocking from its own `poll` /
//!   `send` (the listener is in its `ppoll` set while it sleeps), so peers may connect at any
//!   time during the run. Connections are handed to their queues through a [`ConnTable`] of
//!   atomic descriptor slots. The listener stays open for the whole run: a peer that closes
//!   (or resets) frees its slot, and the next peer to connect takes it over with the same
//!   connection id (an instrument that reconnects keeps its id). A peer arriving while all
//!   `connections` slots are busy is accepted and closed at once (counted in
//!   `RxStats::rejected`), so it sees end-of-stream instead of hanging in the backlog.

use rtdaq_netsys::OsError;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use rtdaq_config::model::{Address, SocketUri, Sockopt, Transport};
use rtdaq_config::Config;

use crate::ctx::OpenCtx;
use crate::error::{connect_is_retryable, explain_bind, explain_connect, Result, SocketError};
use crate::sockopt::{apply_sockopts, apply_sockopts_quiet, set_buffer, BufDir};
use crate::sys::consts::{IPPROTO_TCP, SOL_SOCKET, SO_REUSEADDR, TCP_NODELAY};
use crate::sys::{FdSlot, Socket};

/// The connections of one TCP interface, handed from the thread that made them to the
/// queues that serve them.
///
/// Slot `k` (connection id `k + 1`) holds connection `k`. A slot whose peer left is marked
/// **vacant** by the queue that noticed (the RX side when the interface has one, else the TX
/// side); the acceptor fills vacant slots with new peers. Every publish bumps an epoch, so a
/// queue looks for new sockets only when something was published since its last look.
#[derive(Debug)]
pub(crate) struct ConnTable {
    rx: Box<[FdSlot]>,
    tx: Box<[FdSlot]>,
    vacant: Box<[AtomicBool]>,
    /// Publications so far (`Release` after the slots were filled).
    epoch: AtomicU32,
}

impl ConnTable {
    /// A table for `n` connections; `rx`/`tx`: whether the interface has queues of that kind.
    pub(crate) fn new(n: u32, rx: bool, tx: bool) -> Arc<ConnTable> {
        let slots = |on: bool| {
            (0..if on { n } else { 0 })
                .map(|_| FdSlot::new())
                .collect::<Box<[_]>>()
        };
        Arc::new(ConnTable {
            rx: slots(rx),
            tx: slots(tx),
            vacant: (0..n).map(|_| AtomicBool::new(false)).collect(),
            epoch: AtomicU32::new(0),
        })
    }

    /// Publishes connection `k`: its socket goes to the RX side, a duplicate to the TX side
    /// (or the socket itself when there is no RX side). A socket of an earlier peer of slot
    /// `k` that no queue took yet is closed. Never allocates.
    fn publish(&self, k: u32, sock: Socket) -> std::io::Result<()> {
        let i = k as usize;
        let put = |slot: &FdSlot, s: Socket| {
            drop(slot.take());
            let _ = slot.put(s);
        };
        match (self.rx.get(i), self.tx.get(i)) {
            (Some(r), Some(t)) => {
                let dup = sock.try_clone()?;
                put(r, sock);
                put(t, dup);
            }
            (Some(r), None) => put(r, sock),
            (None, Some(t)) => put(t, sock),
            (None, None) => {}
        }
        self.epoch.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// A connection published for queue `q` of `nq` on side `rx` (true) or TX since the
    /// queue last found none (`seen`: the epoch of that look, updated). Never allocates.
    #[inline]
    pub(crate) fn adopt(
        &self,
        seen: &mut u32,
        q: usize,
        nq: usize,
        rx: bool,
    ) -> Option<(u32, Socket)> {
        let epoch = self.epoch.load(Ordering::Acquire);
        if epoch == *seen || nq == 0 {
            return None;
        }
        let slots = if rx { &self.rx } else { &self.tx };
        for k in (q..slots.len()).step_by(nq) {
            if let Some(s) = slots[k].take() {
                return Some((k as u32, s));
            }
        }
        *seen = epoch;
        None
    }

    /// The queue serving connection `k` lost it (the peer closed or reset): the slot may
    /// take a new peer. Only the side that owns the connection's primary socket (RX when the
    /// interface has RX queues) frees the slot. Never allocates.
    pub(crate) fn release(&self, k: u32, rx: bool) {
        let has_rx = !self.rx.is_empty();
        if rx == has_rx {
            if let Some(v) = self.vacant.get(k as usize) {
                v.store(true, Ordering::Release);
            }
        }
    }

    /// Claims a vacant slot, lowest first. Never allocates.
    fn reclaim(&self) -> Option<u32> {
        self.vacant
            .iter()
            .position(|v| {
                v.compare_exchange(true, false, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
            .map(|k| k as u32)
    }
}

/// Accepts the connections of a TCP server interface, from the hot path of one queue.
#[derive(Debug)]
pub(crate) struct Acceptor {
    listener: Option<Socket>,
    table: Arc<ConnTable>,
    next: u32,
    total: u32,
    sockopts: Box<[Sockopt]>,
    /// `accept` failures.
    pub(crate) errors: u32,
    /// Peers accepted into a slot an earlier peer had left.
    pub(crate) reaccepted: u32,
    /// Peers beyond `connections`: accepted and closed at once.
    pub(crate) rejected: u32,
    /// Sockopt failures on accepted sockets.
    pub(crate) sockopt_errors: u32,
}

impl Acceptor {
    /// The listener (open for the whole run).
    #[inline]
    pub(crate) fn listener(&self) -> Option<&Socket> {
        self.listener.as_ref()
    }

    /// Connections accepted so far into a slot (first peers and replacements).
    #[inline]
    pub(crate) fn accepted(&self) -> u32 {
        self.next + self.reaccepted
    }

    /// Accepts every pending peer without waiting: into the next unused slot, else into a
    /// slot an earlier peer left (the replacement gets that slot's connection id); with
    /// every slot busy the peer is closed at once and counted in `rejected`. Never
    /// allocates, never logs.
    pub(crate) fn accept_pending(&mut self) {
        let Some(l) = &self.listener else { return };
        loop {
            match l.accept() {
                Ok(Some((s, _peer))) => {
                    let slot = if self.next < self.total {
                        self.next += 1;
                        Some(self.next - 1)
                    } else {
                        let k = self.table.reclaim();
                        self.reaccepted += u32::from(k.is_some());
                        k
                    };
                    let Some(k) = slot else {
                        self.rejected += 1;
                        drop(s);
                        continue;
                    };
                    let _ = s.set_int(IPPROTO_TCP, TCP_NODELAY, 1);
                    self.sockopt_errors += apply_sockopts_quiet(&s, &self.sockopts);
                    if self.table.publish(k, s).is_err() {
                        self.errors += 1;
                    }
                }
                Ok(None) => return,
                Err(_) => {
                    self.errors += 1;
                    return;
                }
            }
        }
    }
}

/// The fixed record size of TCP interface `i`: the generator's `payload_size` when the
/// generator sends on a TCP interface at the same address (its own or its peer), else
/// `max_message_size`, else one segment (`mtu − 40`).
pub(crate) fn message_size(cfg: &Config, i: usize) -> (usize, String) {
    let iface = &cfg.interfaces[i];
    let here = match &iface.address {
        Address::Socket(u) => Some(*u),
        _ => None,
    };
    if let Some(g) = &cfg.generator {
        let there = match cfg.interfaces.get(g.interface.0).map(|x| &x.address) {
            Some(Address::Socket(u)) if u.transport == Transport::Tcp => Some(*u),
            _ => None,
        };
        if there.is_some() && there == here {
            return (g.payload_size as usize, "generator.payload_size".to_owned());
        }
    }
    if let Some(m) = iface.max_message_size {
        return (m as usize, format!("interfaces[{i}].max_message_size"));
    }
    (
        iface.mtu.saturating_sub(40).max(1) as usize,
        format!("interfaces[{i}].mtu − 40"),
    )
}

/// Options common to listeners and client sockets: buffers, `TCP_NODELAY`, passthrough.
fn tcp_options(ctx: &mut OpenCtx<'_, '_>, sock: &Socket, key: &str) -> Result<()> {
    if let Some(b) = ctx.sock.rcvbuf {
        set_buffer(
            sock,
            BufDir::Rcv,
            b,
            ctx.opts.force_buffers,
            &mut ctx.warned_rcv,
        )?;
    }
    if let Some(b) = ctx.sock.sndbuf {
        set_buffer(
            sock,
            BufDir::Snd,
            b,
            ctx.opts.force_buffers,
            &mut ctx.warned_snd,
        )?;
    }
    sock.set_int(IPPROTO_TCP, TCP_NODELAY, 1)
        .map_err(|source| {
            SocketError::SetOption(OsError::new(
                key.to_owned(),
                format!("setsockopt(TCP_NODELAY) failed ({source})"),
                source,
            ))
        })?;
    apply_sockopts(sock, &ctx.sock.sockopts)
}

/// Binds and listens for server interface `i`. Cold path.
pub(crate) fn listen(ctx: &mut OpenCtx<'_, '_>, i: usize, uri: SocketUri) -> Result<Socket> {
    let key = OpenCtx::addr_key(i);
    let sock = Socket::tcp().map_err(|source| SocketError::Create {
        key: key.clone(),
        uri: uri.to_string(),
        source,
    })?;
    sock.set_int(SOL_SOCKET, SO_REUSEADDR, 1)
        .map_err(|source| {
            SocketError::SetOption(OsError::new(
                key.clone(),
                format!("setsockopt(SO_REUSEADDR) failed ({source})"),
                source,
            ))
        })?;
    tcp_options(ctx, &sock, &key)?;
    let bind_err = |source: std::io::Error| SocketError::Bind {
        detail: explain_bind(&source, &key, &uri, false),
        key: key.clone(),
        uri: uri.to_string(),
        source,
    };
    sock.bind(&SocketAddrV4::new(uri.ip, uri.port))
        .map_err(bind_err)?;
    let backlog = ctx.cfg.interfaces[i].connections.clamp(1, 4096) as i32;
    sock.listen(backlog).map_err(|source| SocketError::Listen {
        detail: explain_bind(&source, &key, &uri, false),
        key: key.clone(),
        uri: uri.to_string(),
        source,
    })?;
    Ok(sock)
}

/// An acceptor for server interface `i` over `listener`.
pub(crate) fn acceptor(
    ctx: &OpenCtx<'_, '_>,
    i: usize,
    listener: Socket,
    table: Arc<ConnTable>,
) -> Acceptor {
    Acceptor {
        listener: Some(listener),
        table,
        next: 0,
        total: ctx.cfg.interfaces[i].connections,
        sockopts: ctx.sock.sockopts.clone().into_boxed_slice(),
        errors: 0,
        sockopt_errors: 0,
        reaccepted: 0,
        rejected: 0,
    }
}

/// Opens every connection of client interface `i` and publishes them. Cold path.
pub(crate) fn connect_all(
    ctx: &mut OpenCtx<'_, '_>,
    i: usize,
    uri: SocketUri,
    table: &ConnTable,
) -> Result<()> {
    let key = OpenCtx::addr_key(i);
    let addr = SocketAddrV4::new(uri.ip, uri.port);
    for k in 0..ctx.cfg.interfaces[i].connections {
        let sock = connect_one(ctx, &key, uri, addr)?;
        table
            .publish(k, sock)
            .map_err(|source| SocketError::Create {
                key: key.clone(),
                uri: uri.to_string(),
                source,
            })?;
    }
    Ok(())
}

/// One connection with bounded retries.
fn connect_one(
    ctx: &mut OpenCtx<'_, '_>,
    key: &str,
    uri: SocketUri,
    addr: SocketAddrV4,
) -> Result<Socket> {
    let start = Instant::now();
    let attempts = ctx.opts.connect_attempts.max(1);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let sock = Socket::tcp().map_err(|source| SocketError::Create {
            key: key.to_owned(),
            uri: uri.to_string(),
            source,
        })?;
        tcp_options(ctx, &sock, key)?;
        match sock.connect_timeout(&addr, ctx.opts.connect_timeout) {
            Ok(()) => {
                if attempt > 1 {
                    log::info!("{key} = \"{uri}\": connected after {attempt} attempts");
                }
                return Ok(sock);
            }
            Err(e) if attempt < attempts && connect_is_retryable(&e) => {
                std::thread::sleep(ctx.opts.connect_backoff);
            }
            Err(source) => {
                return Err(SocketError::Connect {
                    detail: explain_connect(&source, key, &uri, attempt, start.elapsed()),
                    key: key.to_owned(),
                    uri: uri.to_string(),
                    attempts: attempt,
                    source,
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra_iface: &str, generator: &str) -> Config {
        let text = format!(
            "name = \"t\"\nplatform = \"host\"\n[engine]\nkind = \"socket\"\n\
             [[memory_regions]]\nname = \"r\"\nkind = \"host\"\nbuf_size = 8192\nbuf_count = 256\n\
             [[interfaces]]\nname = \"s\"\naddress = \"tcp://127.0.0.1:6000\"\nrole = \"server\"\n{extra_iface}\n\
             [[interfaces.rx_queues]]\nid = 0\ncpu_core = 0\nmemory_regions = [\"r\"]\nmode = \"direct\"\n\
             [[interfaces]]\nname = \"c\"\naddress = \"tcp://127.0.0.1:6000\"\nrole = \"client\"\nmax_message_size = 4096\n\
             [[interfaces.tx_queues]]\nid = 0\ncpu_core = 0\nmemory_regions = [\"r\"]\n{generator}"
        );
        rtdaq_config::load_str(&text).unwrap()
    }

    #[test]
    fn record_size_comes_from_generator_then_max_message_size_then_mtu() {
        let g =
            "[generator]\ninterface = \"c\"\ntx_queue = 0\npayload_size = 4000\nunpaced = true\n";
        let c = config("max_message_size = 4096", g);
        assert_eq!(
            message_size(&c, 0),
            (4000, "generator.payload_size".to_owned())
        );
        assert_eq!(message_size(&c, 1).0, 4000);
        let c = config("max_message_size = 2048", "");
        assert_eq!(
            message_size(&c, 0),
            (2048, "interfaces[0].max_message_size".to_owned())
        );
        let c = config("", "");
        assert_eq!(message_size(&c, 0).0, 1460);
    }
}
