//! The UCX sender of an egress sink (`protocol = "ucx"`, the `ucx` feature): one thread that
//! takes the sink's filled buffers in order and sends each as one tagged UCX message
//! (`ucp_tag_send_nbx`) to the next destination in turn: a 40-byte header
//! ([`rtdaq_core::format::egress_msg`]: stream, sequence, time of the first payload, data
//! length) written into the buffer's headroom, then the payloads, with no copy.
//!
//! - **Memory**: the ring's buffers and as many spare ones are registered with UCX
//!   (`ucp_mem_map`) at set-up; each send passes its buffer's registration. A buffer in
//!   flight is owned by its transfer: the sender swaps it out of the ring slot for a spare
//!   one (pointers exchanged, nothing copied or allocated) and releases the slot at once;
//!   the buffer becomes a spare again when UCX completes the send. With no spare left (UCX
//!   or the receiver is behind) the sender stops taking from the ring, which fills, and the
//!   consumer counts `egress_full`.
//! - **Connections**: the worker and one endpoint per destination are made on the sender's
//!   thread (UCX endpoints belong to their worker's thread) before the start goes on: the
//!   start waits for the thread to say every destination answered (exit 2 naming the key
//!   when one does not, after `connect_wait_ms`). A destination whose endpoint fails
//!   (receiver gone: `UCS_ERR_CONNECTION_RESET`, `UCS_ERR_UNREACHABLE`, ...) is dropped;
//!   its messages count as `peer_gone` until a reconnection, tried every `reconnect_ms`,
//!   succeeds (counted in `reconnects`). Sequence numbers run on, so the receiver sees the
//!   gap.
//! - **End**: after the consumer's last buffer, an end-of-stream message to every
//!   connected destination, a flush, and the endpoints close.
//!
//! The Rust side allocates nothing after set-up (the allocation audit is armed), except
//! while reconnecting, which is disarmed around: a new endpoint's error state is boxed.
//! UCX's own C allocations (its memory pools grow on demand) are outside the audit.

use super::common::EgressCounters;
use super::heap::HeapBuf;
use crate::error::RuntimeError;
use rtdaq_config::model::Egress;
use rtdaq_core::format::egress_msg::{MsgHeader, HEADER_LEN};
use rtdaq_core::slot_ring::SlotConsumer;
use rtdaq_platform::alloc_audit;
use rtdaq_ucx_sys::{Context, Endpoint, Features, MemHandle, Poll, SendTransfer, Worker};
use std::net::SocketAddr;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::time::{Duration, Instant};

/// How long an idle sender sleeps before it looks at the ring again.
const IDLE: Duration = Duration::from_micros(20);
/// How long a sender with nothing in flight and nothing to send sleeps: a buffer waits at
/// most this long more (against `flush_ms` and the time it takes to fill), and the thread
/// does not wake 50 000 times a second for nothing.
const IDLE_EMPTY: Duration = Duration::from_micros(200);
/// Spare buffers (sends in flight at most), or the ring's size when smaller (`config check`
/// counts them in the sink's memory).
const MAX_IN_FLIGHT: usize = rtdaq_config::model::UCX_MAX_IN_FLIGHT as usize;
/// How long one connection attempt may take to answer at start.
const CONNECT_TRY: Duration = Duration::from_secs(2);
/// How long the end waits for the last sends and flushes.
const END_WAIT: Duration = Duration::from_secs(2);

/// What the start hears from a UCX sender thread: ready, or the key and message of the
/// destination that did not answer.
pub type Ready = Result<(), (String, String)>;

/// The registrations of a sink's buffers, made before the ring is built, and its worker.
pub struct Registered {
    /// Made here, on the starting thread (off the queue cores, normal scheduling), not on
    /// the pinned sender: threads UCX starts with a worker inherit their creator's CPU set
    /// and scheduling class, and on the sender's core at its SCHED_FIFO priority they can
    /// wait behind it. (Seen: a worker made on the sender thread, with a sender that spun
    /// while its buffers were in flight, sent ~200 messages/s instead of ~1 400; both were
    /// changed together, so which one mattered was not isolated.)
    worker: Worker,
    /// By `HeapBuf::mem_id`.
    mems: Vec<MemHandle>,
    /// Spare buffers, with their ids.
    spares: Vec<(Box<[u8]>, u32)>,
}

/// Creates the UCX context of `eg` (`egress[id]`) and registers `bufs` (the ring's) and as
/// many spares: each buffer gets its `mem_id`.
pub fn register(eg: &Egress, id: usize, bufs: &mut [HeapBuf]) -> Result<Registered, RuntimeError> {
    let err = |key: &str, message: String| RuntimeError::Egress {
        key: format!("egress[{id}]{key}"),
        message,
    };
    let ucx = eg
        .ucx
        .as_ref()
        .ok_or_else(|| err(".protocol", "not a ucx sink".into()))?;
    // PUT_ENABLE=n (the TCP transport's `UCX_TCP_PUT_ENABLE`; options given to a context
    // name a transport's field without its prefix, else UCX warns "invalid configuration"
    // and ignores them): UCX 1.13's TCP rendezvous over PUT can abort the process on an
    // assertion (tcp_ep.c:939, seen in the sys crate's loopback tests); the appliance never
    // takes that path. It costs bandwidth over TCP (docs/benchmarks/egress.md); no other
    // 1.13 transport has the field.
    let mut options: Vec<(&str, &str)> = vec![("PUT_ENABLE", "n")];
    options.extend(ucx.transports.iter().map(|t| ("TLS", t.as_str())));
    let ctx = Context::with_options(
        Features {
            tag: true,
            am: false,
        },
        &options,
    )
    .map_err(|e| {
        err(
            ".ucx_transports",
            format!(
                "UCX {} cannot start: {e} (`ucx_info -d` lists this host's transports)",
                Context::version()
            ),
        )
    })?;
    let spares_n = bufs.len().min(MAX_IN_FLIGHT);
    let cap = bufs.first().map_or(0, |b| b.capacity());
    let mut spares: Vec<(Box<[u8]>, u32)> = (0..spares_n)
        .map(|k| (vec![0u8; cap].into_boxed_slice(), (bufs.len() + k) as u32))
        .collect();
    let mut mems = Vec::with_capacity(bufs.len() + spares_n);
    let map_err = |e| err("", format!("ucp_mem_map of an egress buffer failed: {e}"));
    for (k, b) in bufs.iter_mut().enumerate() {
        b.mem_id = k as u32;
        mems.push(MemHandle::map(&ctx, b.mem_mut()).map_err(map_err)?);
    }
    for (mem, _) in &mut spares {
        mems.push(MemHandle::map(&ctx, mem).map_err(map_err)?);
    }
    let worker =
        Worker::new(&ctx).map_err(|e| err("", format!("ucp_worker_create failed: {e}")))?;
    Ok(Registered {
        worker,
        mems,
        spares,
    })
}

/// A send in flight and what it carries.
struct InFlight<'w> {
    t: SendTransfer<'w, Box<[u8]>>,
    id: u32,
    /// Index of its destination.
    dest: usize,
    payloads: u32,
    bytes: u64,
}

/// One destination: its address and, while connected, its endpoint.
struct Dest<'w> {
    addr: SocketAddr,
    ep: Option<Endpoint<'w>>,
    /// When to try again after it went away.
    retry_at: Instant,
    /// A new endpoint after a failure, whose first send has not completed yet: that
    /// completion counts the reconnection.
    fresh: bool,
}

/// The UCX sender of one queue's egress sink; [`run`](UcxSender::run) is its thread.
pub struct UcxSender {
    label: String,
    id: usize,
    cons: SlotConsumer<'static, HeapBuf>,
    counters: &'static EgressCounters,
    stream: u32,
    dests: Vec<SocketAddr>,
    tag: u64,
    connect_wait: Duration,
    reconnect: Duration,
    rate_bps: Option<f64>,
    /// Each message is one whole unit (`unit = "heap"`, `"time_slot"`).
    units: bool,
    reg: Registered,
    ready: SyncSender<Ready>,
}

impl UcxSender {
    /// The sender of `eg` (`egress[id]`) over `cons` (buffers registered in `reg`), the
    /// `stream`-th of the sink's senders; and the receiver the start waits on.
    pub fn new(
        eg: &Egress,
        id: usize,
        cons: SlotConsumer<'static, HeapBuf>,
        counters: &'static EgressCounters,
        (stream, reg): (u64, Registered),
        label: String,
    ) -> Result<(Self, Receiver<Ready>), RuntimeError> {
        let ucx = eg.ucx.as_ref().ok_or_else(|| RuntimeError::Egress {
            key: format!("egress[{id}].protocol"),
            message: "not a ucx sink".into(),
        })?;
        let (ready, rx) = sync_channel(1);
        let sender = UcxSender {
            label,
            id,
            cons,
            counters,
            stream: stream as u32,
            dests: eg.destinations.iter().map(|&a| SocketAddr::V4(a)).collect(),
            tag: ucx.tag,
            connect_wait: Duration::from_millis(ucx.connect_wait_ms),
            reconnect: Duration::from_millis(ucx.reconnect_ms),
            rate_bps: eg.rate_bps,
            units: eg.units.is_some(),
            reg,
            ready,
        };
        Ok((sender, rx))
    }

    /// How long the start waits for the `Ready` word.
    pub fn ready_within(eg: &Egress) -> Duration {
        let wait = eg.ucx.as_ref().map_or(0, |u| u.connect_wait_ms);
        Duration::from_millis(wait)
            + CONNECT_TRY * eg.destinations.len() as u32
            + Duration::from_secs(5)
    }

    /// The sink's name in messages.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The sender thread: connects, says so, then sends every buffer the consumer hands
    /// over until it is done and the ring is empty, then the end of stream.
    pub fn run(self) -> u64 {
        let UcxSender {
            id,
            mut cons,
            counters,
            stream,
            dests,
            tag,
            connect_wait,
            reconnect,
            rate_bps,
            units,
            reg,
            ready,
            ..
        } = self;
        let Registered {
            worker,
            mems,
            mut spares,
        } = reg;
        let mut dests = match connect_all(&worker, &dests, connect_wait, id) {
            Ok(d) => d,
            Err(e) => {
                let _ = ready.send(Err(e));
                return 0;
            }
        };
        let _ = ready.send(Ok(()));
        let mut s = Sending {
            worker: &worker,
            counters,
            stream,
            tag,
            reconnect,
            rate_bps,
            units,
            next_send_ns: crate::pacer::now_ns() as f64,
            seq: 0,
            next_dest: 0,
            mems: &mems,
            in_flight: Vec::with_capacity(spares.len()),
        };
        let mut turns = crate::stall::StallClock::start(
            &counters.stall,
            crate::pacer::now_ns(),
            crate::stall::ThreadKind::Writer,
        );
        alloc_audit::arm_current_thread();
        loop {
            turns.tick(crate::pacer::now_ns());
            let events = worker.progress();
            s.reap(&mut dests, &mut spares);
            s.watch(&mut dests);
            let done = counters.producer_done.load(Acquire);
            if spares.is_empty() {
                // Every buffer in flight: wait for UCX, without spinning at SCHED_FIFO.
                if events == 0 {
                    std::thread::sleep(IDLE);
                }
                continue;
            }
            match cons.front() {
                Some(h) => {
                    s.send(h, &mut dests, &mut spares);
                    let released = cons.release();
                    debug_assert!(released.is_ok());
                }
                None if done => break,
                None if s.in_flight.is_empty() => std::thread::sleep(IDLE_EMPTY),
                None => std::thread::sleep(IDLE),
            }
        }
        alloc_audit::disarm_current_thread();
        s.finish(&mut dests, &mut spares);
        drop(dests);
        rtdaq_platform::rt::thread_cpu_ns().unwrap_or(0)
    }
}

/// Connects to every destination, each within `wait` (at least one try), and checks that it
/// answers (a flush completes).
fn connect_all<'w>(
    worker: &'w Worker,
    addrs: &[SocketAddr],
    wait: Duration,
    id: usize,
) -> Result<Vec<Dest<'w>>, (String, String)> {
    let mut out = Vec::with_capacity(addrs.len());
    for (k, &addr) in addrs.iter().enumerate() {
        let until = Instant::now() + wait;
        let ep = loop {
            let tried = Endpoint::connect(worker, addr).and_then(|ep| {
                ep.flush_blocking(CONNECT_TRY)?;
                Ok(ep)
            });
            match tried {
                Ok(ep) => break ep,
                Err(e) if Instant::now() >= until => {
                    let waited = if wait.is_zero() {
                        "; set connect_wait_ms to wait for it".to_string()
                    } else {
                        format!(" within connect_wait_ms = {}", wait.as_millis())
                    };
                    return Err((
                        format!("egress[{id}].destinations[{k}]"),
                        format!("no UCX listener answered at {addr}: {e}{waited} (start the receiver first)"),
                    ));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        out.push(Dest {
            addr,
            ep: Some(ep),
            retry_at: Instant::now(),
            fresh: false,
        });
    }
    Ok(out)
}

/// The sender loop's state (borrowing the worker its endpoints and transfers belong to).
struct Sending<'w, 'm> {
    worker: &'w Worker,
    counters: &'static EgressCounters,
    stream: u32,
    tag: u64,
    reconnect: Duration,
    rate_bps: Option<f64>,
    units: bool,
    next_send_ns: f64,
    /// The next message's sequence number.
    seq: u64,
    next_dest: usize,
    mems: &'m [MemHandle],
    in_flight: Vec<InFlight<'w>>,
}

impl<'w> Sending<'w, '_> {
    /// Sends buffer `h` to the next destination (its memory swapped for a spare's), or
    /// counts its payloads as `peer_gone` when that destination is not connected.
    fn send(
        &mut self,
        h: &mut HeapBuf,
        dests: &mut [Dest<'w>],
        spares: &mut Vec<(Box<[u8]>, u32)>,
    ) {
        let seq = self.seq;
        self.seq += 1;
        let d = self.next_dest;
        self.next_dest = (d + 1) % dests.len();
        let payloads = h.payloads;
        let (Some(ep), false) = (dests[d].ep.as_ref(), spares.is_empty()) else {
            EgressCounters::add(&self.counters.dropped_peer_gone, u64::from(payloads));
            return;
        };
        let header = MsgHeader {
            end: false,
            unit: self.units,
            stream: self.stream,
            payloads,
            seq,
            time_ns: h.first_rx_ns,
            data_len: h.len as u64,
        };
        let len = h.message_len();
        let _ = header.emit(h.mem_mut());
        let Some(mut spare) = spares.pop() else {
            return;
        };
        h.swap_mem(&mut spare);
        let (buf, id) = spare;
        super::spead::pace(self.rate_bps, &mut self.next_send_ns, len as u64);
        let t = ep.tag_send_prefix_owned(buf, len, self.tag, self.mems.get(id as usize));
        self.in_flight.push(InFlight {
            t,
            id,
            dest: d,
            payloads,
            bytes: len as u64,
        });
        EgressCounters::add(&self.counters.heaps, 1);
    }

    /// Completed sends: counted, their buffers back among the spares; the first completed
    /// send of a new endpoint counts its reconnection.
    fn reap(&mut self, dests: &mut [Dest<'w>], spares: &mut Vec<(Box<[u8]>, u32)>) {
        let c = self.counters;
        let mut k = 0;
        while k < self.in_flight.len() {
            let poll = self.in_flight[k].t.check();
            if poll == Poll::InProgress {
                k += 1;
                continue;
            }
            let f = self.in_flight.swap_remove(k);
            match poll {
                Poll::Done => {
                    if let Some(d) = dests.get_mut(f.dest).filter(|d| d.fresh) {
                        d.fresh = false;
                        EgressCounters::add(&c.reconnects, 1);
                    }
                    EgressCounters::add(&c.payloads_sent, u64::from(f.payloads));
                    EgressCounters::add(&c.datagrams, 1);
                    EgressCounters::add(&c.bytes, f.bytes);
                }
                Poll::Failed(st) => {
                    EgressCounters::add(&c.dropped_peer_gone, u64::from(f.payloads));
                    let _ = c.first_ucx_status.compare_exchange(
                        0,
                        i32::from(st.raw()),
                        Relaxed,
                        Relaxed,
                    );
                }
                Poll::InProgress => {}
            }
            if let Ok(buf) = f.t.into_buf() {
                spares.push((buf, f.id));
            }
        }
    }

    /// Drops the endpoints that failed; reconnects the ones whose retry time came.
    fn watch(&mut self, dests: &mut [Dest<'w>]) {
        let c = self.counters;
        for d in dests.iter_mut() {
            match &d.ep {
                Some(ep) => {
                    if let Some(st) = ep.failed() {
                        let _ = c.first_ucx_status.compare_exchange(
                            0,
                            i32::from(st.raw()),
                            Relaxed,
                            Relaxed,
                        );
                        // Closing parks what UCX still holds: allocation, outside the audit.
                        alloc_audit::disarm_current_thread();
                        d.ep = None;
                        alloc_audit::arm_current_thread();
                        d.retry_at = Instant::now() + self.reconnect;
                    }
                }
                None if Instant::now() >= d.retry_at => {
                    alloc_audit::disarm_current_thread();
                    d.ep = Endpoint::connect(self.worker, d.addr).ok();
                    alloc_audit::arm_current_thread();
                    d.retry_at = Instant::now() + self.reconnect;
                    d.fresh = d.ep.is_some();
                }
                None => {}
            }
        }
    }

    /// The end: every send completes (or fails), then an end-of-stream message to each
    /// connected destination, and a flush.
    fn finish(&mut self, dests: &mut [Dest<'w>], spares: &mut Vec<(Box<[u8]>, u32)>) {
        let until = Instant::now() + END_WAIT;
        while !self.in_flight.is_empty() && Instant::now() < until {
            if self.worker.progress() == 0 {
                std::thread::sleep(IDLE);
            }
            self.reap(dests, spares);
        }
        for d in dests.iter() {
            let (Some(ep), Some((mut buf, id))) = (d.ep.as_ref(), spares.pop()) else {
                continue;
            };
            let end = MsgHeader {
                end: true,
                stream: self.stream,
                seq: self.seq,
                ..MsgHeader::default()
            };
            let _ = end.emit(&mut buf);
            let mut t =
                ep.tag_send_prefix_owned(buf, HEADER_LEN, self.tag, self.mems.get(id as usize));
            let _ = self
                .worker
                .progress_until(END_WAIT, || t.check() != Poll::InProgress);
            if t.check() == Poll::Done {
                EgressCounters::add(&self.counters.datagrams, 1);
                EgressCounters::add(&self.counters.bytes, HEADER_LEN as u64);
            }
            let _ = ep.flush_blocking(END_WAIT);
        }
        // Sends that never completed: their payloads were not delivered.
        for f in self.in_flight.drain(..) {
            EgressCounters::add(&self.counters.dropped_peer_gone, u64::from(f.payloads));
        }
    }
}
