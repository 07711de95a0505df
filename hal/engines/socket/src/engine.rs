//! [`SocketEngine`] and its queue types [`SocketRx`] / [`SocketTx`].

use rtdaq_netsys::KeyError;
use std::io;
use std::net::SocketAddrV4;
use std::sync::Arc;

use rtdaq_config::model::{TcpRole, Transport};
use rtdaq_config::Config;
use rtdaq_core::traits::{Engine, EngineArgs, LaunchClock, RxQueue, TimedTx, TxQueue};
use rtdaq_core::{Burst, QueueId};

use crate::ctx::{Dir, OpenCtx};
use crate::error::{Result, SocketError};
use crate::options::SocketOptions;
use crate::stats::{RxStats, TxStats};
use crate::sys::Socket;
use crate::tcp_conn::{self, ConnTable};
use crate::tcp_rx::{TcpRx, TcpRxSetup};
use crate::tcp_tx::{TcpTx, TcpTxSetup};
use crate::tx_burst::TxBatch;
use crate::udp_rx::UdpRx;
use crate::udp_tx::UdpTx;
use crate::MAX_BATCH;

/// The socket engine: kernel UDP/TCP sockets for every interface of the config.
///
/// `N` is the burst capacity (packets per [`Burst`] / [`TxBatch`]), [`MAX_BATCH`] by default.
pub struct SocketEngine<'a, const N: usize = MAX_BATCH> {
    rx: Vec<SocketRx<'a, N>>,
    tx: Vec<SocketTx<'a, N>>,
}

/// One RX queue of the socket engine (UDP socket, or a TCP queue's connections).
pub struct SocketRx<'a, const N: usize = MAX_BATCH> {
    kind: RxKind<'a, N>,
    interface: usize,
    queue: usize,
}

enum RxKind<'a, const N: usize> {
    Udp(Box<UdpRx<'a, N>>),
    Tcp(Box<TcpRx<'a, N>>),
}

/// One TX queue of the socket engine.
pub struct SocketTx<'a, const N: usize = MAX_BATCH> {
    kind: TxKind<'a, N>,
    interface: usize,
    queue: usize,
}

enum TxKind<'a, const N: usize> {
    Udp(Box<UdpTx<'a, N>>),
    Tcp(Box<TcpTx<'a, N>>),
}

impl<'a, const N: usize> SocketEngine<'a, N> {
    /// Opens every socket of the config with explicit tuning (see [`SocketOptions`]);
    /// [`Engine::open`] is `open_with(args, &SocketOptions::default())`. Cold path.
    ///
    /// Order: TCP servers listen first, then each interface in config order opens its UDP
    /// sockets or connects its TCP clients (so a client of a server in the same config finds
    /// it listening). Servers do not wait for peers here: their first queue accepts from its
    /// `poll` (see `docs/engines/socket.md`).
    ///
    /// # Errors
    /// [`SocketError`], naming the config key to change.
    pub fn open_with(args: EngineArgs<'a, Config>, opts: &SocketOptions) -> Result<Self> {
        let cfg: &'a Config = args.config;
        let mut ctx = OpenCtx::new(args, cfg, opts)?;
        if N == 0 {
            return Err(SocketError::Config(KeyError::new(
                "interfaces[].rx_queues[].batch_size".to_owned(),
                "the engine was built with a burst capacity of 0".to_owned(),
            )));
        }
        let mut listeners: Vec<Option<Socket>> = Vec::with_capacity(cfg.interfaces.len());
        for (i, iface) in cfg.interfaces.iter().enumerate() {
            let uri = ctx.uri(i)?;
            let l = match (uri.transport, iface.role) {
                (Transport::Udp, _) | (Transport::Tcp, Some(TcpRole::Client)) => None,
                (Transport::Tcp, Some(TcpRole::Server)) => {
                    Some(tcp_conn::listen(&mut ctx, i, uri)?)
                }
                (Transport::Rdma, _) => {
                    return Err(SocketError::Config(KeyError::new(
                        format!("interfaces[{i}].address"),
                        "rdma:// is for engine.kind = \"ibverbs\"".to_owned(),
                    )))
                }
                (Transport::Tcp, None) => {
                    return Err(SocketError::Config(KeyError::new(
                        format!("interfaces[{i}].role"),
                        "tcp:// interfaces need role = \"server\" or \"client\"".to_owned(),
                    )))
                }
            };
            listeners.push(l);
        }
        let mut engine = SocketEngine {
            rx: Vec::new(),
            tx: Vec::new(),
        };
        for (i, iface) in cfg.interfaces.iter().enumerate() {
            let uri = ctx.uri(i)?;
            match uri.transport {
                Transport::Udp => {
                    for (j, q) in iface.rx_queues.iter().enumerate() {
                        let res = ctx.resources(Dir::Rx, i, j)?;
                        let u = UdpRx::open(&mut ctx, i, j, uri, q, res)?;
                        engine.rx.push(SocketRx {
                            kind: RxKind::Udp(Box::new(u)),
                            interface: i,
                            queue: j,
                        });
                    }
                    for (j, q) in iface.tx_queues.iter().enumerate() {
                        let res = ctx.resources(Dir::Tx, i, j)?;
                        let u = UdpTx::open(&mut ctx, i, j, uri, q, res)?;
                        engine.tx.push(SocketTx {
                            kind: TxKind::Udp(Box::new(u)),
                            interface: i,
                            queue: j,
                        });
                    }
                }
                // rdma:// was refused above.
                Transport::Tcp | Transport::Rdma => {
                    let (n_rx, n_tx) = (iface.rx_queues.len(), iface.tx_queues.len());
                    let conns = iface.connections.max(1);
                    let table = ConnTable::new(conns, n_rx > 0, n_tx > 0);
                    let (message, why) = tcp_conn::message_size(cfg, i);
                    let mut acceptor = match listeners[i].take() {
                        Some(l) => Some(tcp_conn::acceptor(&ctx, i, l, Arc::clone(&table))),
                        None => {
                            tcp_conn::connect_all(&mut ctx, i, uri, &table)?;
                            None
                        }
                    };
                    log::info!(
                        "interfaces[{i}].address = \"{uri}\": TCP {}, {conns} connection(s), records of {message} B ({why})",
                        iface.role.map_or("?", TcpRole::as_str)
                    );
                    for (j, q) in iface.rx_queues.iter().enumerate() {
                        let res = ctx.resources(Dir::Rx, i, j)?;
                        if res.pool.slot_size() < message {
                            return Err(SocketError::Resources(KeyError::new(format!("interfaces[{i}].rx_queues[{j}].memory_regions[0]"), format!(
                                    "buffers of {} B cannot hold a TCP record of {message} B ({why}); use a region with buf_size ≥ {message}",
                                    res.pool.slot_size()
                                ))));
                        }
                        let setup = TcpRxSetup {
                            table: Arc::clone(&table),
                            acceptor: if j == 0 { acceptor.take() } else { None },
                            queue: j,
                            queues: n_rx,
                            connections: conns,
                            message,
                            res,
                            key: format!("interfaces[{i}].rx_queues[{j}]"),
                        };
                        engine.rx.push(SocketRx {
                            kind: RxKind::Tcp(Box::new(TcpRx::new(setup, q))),
                            interface: i,
                            queue: j,
                        });
                    }
                    for (j, q) in iface.tx_queues.iter().enumerate() {
                        let res = ctx.resources(Dir::Tx, i, j)?;
                        let setup = TcpTxSetup {
                            table: Arc::clone(&table),
                            acceptor: if j == 0 { acceptor.take() } else { None },
                            queue: j,
                            queues: n_tx,
                            connections: conns,
                            res,
                            key: format!("interfaces[{i}].tx_queues[{j}]"),
                            stall: opts.tx_stall,
                        };
                        engine.tx.push(SocketTx {
                            kind: TxKind::Tcp(Box::new(TcpTx::new(setup, q))),
                            interface: i,
                            queue: j,
                        });
                    }
                }
            }
        }
        Ok(engine)
    }

    /// The RX queues, in config order.
    pub fn rx(&self) -> &[SocketRx<'a, N>] {
        &self.rx
    }

    /// The TX queues, in config order.
    pub fn tx(&self) -> &[SocketTx<'a, N>] {
        &self.tx
    }

    /// The TX queues, mutably (e.g. to [`set_destination`](SocketTx::set_destination)).
    pub fn tx_mut(&mut self) -> &mut [SocketTx<'a, N>] {
        &mut self.tx
    }

    /// The queues, in config order (what [`Engine::split`] hands out).
    pub fn into_queues(self) -> (Vec<SocketRx<'a, N>>, Vec<SocketTx<'a, N>>) {
        (self.rx, self.tx)
    }
}

impl<'a, const N: usize> Engine<'a> for SocketEngine<'a, N> {
    const NAME: &'static str = "socket";
    const FRAMES: bool = false;
    type Config = EngineArgs<'a, Config>;
    type Rx = SocketRx<'a, N>;
    type Tx = SocketTx<'a, N>;
    type Error = SocketError;

    fn open(cfg: Self::Config) -> Result<Self> {
        Self::open_with(cfg, &SocketOptions::default())
    }

    /// UDP TX queues send at launch times when `generator.pacing = "txtime"` armed them
    /// (see [`TimedTx`]); the others answer [`TimedTx::launch_clock`] with `None`.
    fn timed_tx(tx: &mut Self::Tx) -> Option<&mut dyn TimedTx<Burst = TxBatch<'a, N>>> {
        Some(tx)
    }

    fn split(self, rx: &mut dyn FnMut(Self::Rx), tx: &mut dyn FnMut(Self::Tx)) {
        self.rx.into_iter().for_each(&mut *rx);
        self.tx.into_iter().for_each(&mut *tx);
    }
}

impl<const N: usize> SocketRx<'_, N> {
    /// Index of the queue's interface in the config.
    pub fn interface(&self) -> usize {
        self.interface
    }

    /// Index of the queue within its interface's `rx_queues`.
    pub fn queue(&self) -> usize {
        self.queue
    }

    /// `Udp` or `Tcp`.
    pub fn transport(&self) -> Transport {
        match &self.kind {
            RxKind::Udp(_) => Transport::Udp,
            RxKind::Tcp(_) => Transport::Tcp,
        }
    }

    /// UDP: the bound address. TCP: the first connection's local address (or the listener's).
    pub fn local_addr(&self) -> Option<SocketAddrV4> {
        match &self.kind {
            RxKind::Udp(u) => Some(u.local_addr()),
            RxKind::Tcp(t) => t.socket().and_then(|s| s.local_addr().ok()),
        }
    }

    /// UDP: the effective `SO_RCVBUF` the kernel reported after `engine.socket.rcvbuf` was
    /// applied (Linux reports twice the usable size); `None` when the key is unset or on TCP.
    pub fn rcvbuf(&self) -> Option<usize> {
        match &self.kind {
            RxKind::Udp(u) => u.rcvbuf(),
            RxKind::Tcp(_) => None,
        }
    }

    /// UDP: whether `UDP_GRO` is in use (requested, supported, and buffers ≥ 64 KiB).
    pub fn gro(&self) -> bool {
        matches!(&self.kind, RxKind::Udp(u) if u.gro())
    }

    /// TCP: bytes per record.
    pub fn message_size(&self) -> Option<usize> {
        match &self.kind {
            RxKind::Udp(_) => None,
            RxKind::Tcp(t) => Some(t.message_size()),
        }
    }

    /// Engine events (errors, connections, GRO) so far.
    pub fn stats(&self) -> RxStats {
        match &self.kind {
            RxKind::Udp(u) => u.stats(),
            RxKind::Tcp(t) => t.stats(),
        }
    }

    /// Reads an integer socket option of the queue's socket (TCP: the first open connection,
    /// else the listener), e.g. to check `engine.socket.sockopts`. Cold path.
    ///
    /// # Errors
    /// The `getsockopt` error; `NotConnected` for a TCP queue with no socket.
    pub fn sockopt(&self, level: i32, option: i32) -> io::Result<i32> {
        let s = match &self.kind {
            RxKind::Udp(u) => Some(u.socket()),
            RxKind::Tcp(t) => t.socket(),
        };
        s.ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?
            .get_int(level, option)
    }
}

impl<'a, const N: usize> RxQueue for SocketRx<'a, N> {
    type Burst = Burst<'a, N>;

    fn new_burst(&self) -> Burst<'a, N> {
        Burst::new(QueueId(self.queue as u16))
    }

    #[inline]
    fn poll(&mut self, burst: &mut Burst<'a, N>) -> usize {
        match &mut self.kind {
            RxKind::Udp(u) => u.poll(burst),
            RxKind::Tcp(t) => t.poll(burst),
        }
    }

    /// Both kinds: a UDP socket's receive buffer holds datagrams (its overflow is read
    /// back from `SO_MEMINFO` as `kernel` drops), a TCP connection's window stops its peer.
    fn holds_backlog(&self) -> bool {
        true
    }
}

impl<const N: usize> SocketTx<'_, N> {
    /// Index of the queue's interface in the config.
    pub fn interface(&self) -> usize {
        self.interface
    }

    /// Index of the queue within its interface's `tx_queues`.
    pub fn queue(&self) -> usize {
        self.queue
    }

    /// `Udp` or `Tcp`.
    pub fn transport(&self) -> Transport {
        match &self.kind {
            TxKind::Udp(_) => Transport::Udp,
            TxKind::Tcp(_) => Transport::Tcp,
        }
    }

    /// UDP: where datagrams go (the generator's `destination` when it targets this queue,
    /// else the interface address). TCP: `None` (records go to the connections).
    pub fn destination(&self) -> Option<SocketAddrV4> {
        match &self.kind {
            TxKind::Udp(u) => Some(u.destination()),
            TxKind::Tcp(_) => None,
        }
    }

    /// UDP: sends to `dest` from now on. Cold path.
    ///
    /// # Errors
    /// [`SocketError::Config`] on a TCP queue (it writes to its connections).
    pub fn set_destination(&mut self, dest: SocketAddrV4) -> Result<()> {
        match &mut self.kind {
            TxKind::Udp(u) => {
                u.set_destination(dest);
                Ok(())
            }
            TxKind::Tcp(_) => Err(SocketError::Config(KeyError::new(
                format!("interfaces[{}].address", self.interface),
                "a TCP TX queue writes to its connections; it has no destination".to_owned(),
            ))),
        }
    }

    /// UDP: the source address (of lane 0). TCP: the first connection's local address.
    pub fn local_addr(&self) -> Option<SocketAddrV4> {
        match &self.kind {
            TxKind::Udp(u) => Some(u.local_addr()),
            TxKind::Tcp(t) => t.socket().and_then(|s| s.local_addr().ok()),
        }
    }

    /// How many lanes the queue sends on (≥ 1); see the **lane rule** below.
    ///
    /// - UDP: `generator.streams` when `[generator]` targets this queue, else 1. Each lane
    ///   is its own socket bound to the interface's IP with port 0, so each has a distinct
    ///   source port (and `SO_REUSEPORT` receivers hash each lane to one queue); all lanes
    ///   send to the same [`destination`](Self::destination).
    /// - TCP: one lane per connection this queue writes. With one TX queue that is
    ///   `interfaces[].connections`, connection `k` (connect order on a client, accept order
    ///   on a server) being lane `k`. With `n_tx` TX queues, queue `q` writes connections
    ///   `k ≡ q (mod n_tx)`, and connection `k` is its lane `k / n_tx`. A server lane whose
    ///   peer has not connected yet (or a lane whose connection failed) still counts as a
    ///   lane: its packets are dropped and counted `kernel`.
    ///
    /// **Lane rule:** the j-th packet handed to [`send`](TxQueue::send) on this queue (j
    /// counts every packet of every burst passed to `send` since open, accepted or not,
    /// starting at 0) goes out on lane `j % lanes`. Within a lane, packets leave in that
    /// order; there is no order between lanes. A runtime that stamps one sequence stream per
    /// lane can rely on it across bursts of any size and on partly refused sends.
    pub fn lanes(&self) -> usize {
        match &self.kind {
            TxKind::Udp(u) => u.lanes(),
            TxKind::Tcp(t) => t.lanes(),
        }
    }

    /// The local (source) address of `lane` (see [`lanes`](Self::lanes)): UDP: that lane's
    /// socket; TCP: that lane's connection, while it is open. `None` out of range.
    pub fn lane_local_addr(&self, lane: usize) -> Option<SocketAddrV4> {
        match &self.kind {
            TxKind::Udp(u) => u.lane_addr(lane),
            TxKind::Tcp(t) => t.lane_socket(lane).and_then(|s| s.local_addr().ok()),
        }
    }

    /// UDP: the effective `SO_SNDBUF` after `engine.socket.sndbuf` (every lane's socket).
    pub fn sndbuf(&self) -> Option<usize> {
        match &self.kind {
            TxKind::Udp(u) => u.sndbuf(),
            TxKind::Tcp(_) => None,
        }
    }

    /// UDP: whether GSO is in use (requested, supported, no fallback yet).
    pub fn gso(&self) -> bool {
        matches!(&self.kind, TxKind::Udp(u) if u.gso())
    }

    /// TCP: connections this queue writes to right now.
    pub fn connections(&self) -> usize {
        match &self.kind {
            TxKind::Udp(_) => 0,
            TxKind::Tcp(t) => t.open_connections(),
        }
    }

    /// Engine events so far.
    pub fn stats(&self) -> TxStats {
        match &self.kind {
            TxKind::Udp(u) => u.stats(),
            TxKind::Tcp(t) => t.stats(),
        }
    }

    /// Reads an integer socket option of the queue's socket (UDP: lane 0's; TCP: the first
    /// open connection, else the listener). Cold path.
    ///
    /// # Errors
    /// The `getsockopt` error; `NotConnected` for a TCP queue with no socket.
    pub fn sockopt(&self, level: i32, option: i32) -> io::Result<i32> {
        let s = match &self.kind {
            TxKind::Udp(u) => Some(u.socket()),
            TxKind::Tcp(t) => t.socket(),
        };
        s.ok_or_else(|| io::Error::from(io::ErrorKind::NotConnected))?
            .get_int(level, option)
    }
}

impl<'a, const N: usize> TxQueue for SocketTx<'a, N> {
    type Burst = TxBatch<'a, N>;

    fn new_burst(&self) -> TxBatch<'a, N> {
        TxBatch::new(QueueId(self.queue as u16))
    }

    /// Adds up to `n` empty buffers (bounded by the burst's free room); returns how many
    /// packets the burst now holds. Never blocks, never allocates.
    #[inline]
    fn reserve(&mut self, burst: &mut TxBatch<'a, N>, n: usize) -> usize {
        match &mut self.kind {
            TxKind::Udp(u) => u.reserve(burst, n),
            TxKind::Tcp(t) => t.reserve(burst, n),
        }
    }

    #[inline]
    fn send(&mut self, burst: &mut TxBatch<'a, N>) -> usize {
        match &mut self.kind {
            TxKind::Udp(u) => u.send(burst),
            TxKind::Tcp(t) => t.send(burst),
        }
    }
}

impl<'a, const N: usize> TimedTx for SocketTx<'a, N> {
    fn launch_clock(&self) -> Option<LaunchClock> {
        match &self.kind {
            TxKind::Udp(u) => u.launch_clock(),
            TxKind::Tcp(_) => None,
        }
    }

    #[inline]
    fn send_at(&mut self, burst: &mut TxBatch<'a, N>, at_ns: &[u64]) -> usize {
        match &mut self.kind {
            TxKind::Udp(u) => u.send_at(burst, at_ns),
            TxKind::Tcp(t) => t.send(burst),
        }
    }

    fn settle(&mut self, wait_ns: u64) -> u64 {
        match &mut self.kind {
            TxKind::Udp(u) => u.settle(wait_ns),
            TxKind::Tcp(_) => 0,
        }
    }
}

impl<const N: usize> std::fmt::Debug for SocketRx<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketRx")
            .field("interface", &self.interface)
            .field("queue", &self.queue)
            .field("transport", &self.transport().as_str())
            .field("local", &self.local_addr())
            .finish()
    }
}

impl<const N: usize> std::fmt::Debug for SocketTx<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketTx")
            .field("interface", &self.interface)
            .field("queue", &self.queue)
            .field("transport", &self.transport().as_str())
            .field("destination", &self.destination())
            .field("lanes", &self.lanes())
            .finish()
    }
}

impl<const N: usize> std::fmt::Debug for SocketEngine<'_, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SocketEngine")
            .field("rx", &self.rx)
            .field("tx", &self.tx)
            .finish()
    }
}
