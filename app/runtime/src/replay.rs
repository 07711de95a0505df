//! Replay: the generator sends the packets of a pcap file (`[generator] replay`, or
//! `rtdaq run --replay FILE`) instead of generated ones.
//!
//! **Streamed through a fixed window.** The file is never read whole: a reader thread
//! (normal priority, on the housekeeping CPUs like the record writers) reads it in order
//! into a window of `generator.replay_window_mib` (default 64 MiB), allocated once before
//! the run and split into [`CHUNKS`] chunks of whole records. The TX thread sends a chunk's
//! packets and hands the chunk back; the reader refills it. So a recording of any size
//! replays with the same footprint, and a reader that falls behind (a slow disk) delays
//! packets (counted as `waits` for the reader, logged at the end) but never drops one. The
//! first window is read before the run starts, so a file that is not pcap, has a bad link
//! type or a bad record near its start stops the run there (exit 2), and a file that fits
//! in the window is checked whole before anything is sent (as "nothing to send", a record
//! larger than the TX buffers); a bad record further in stops the replay when the reader
//! gets there and fails the run (a failed thread, named in the report), never silently.
//!
//! Formats: link types Ethernet, raw IPv4 and Linux cooked capture; pcap with micro- or
//! nanosecond timestamps, either byte order. The socket engine sends each packet's UDP
//! payload to `generator.destination`; raw engines send the Ethernet frames as recorded. A
//! frame for the socket engine that is not IPv4/UDP is skipped and counted (logged); a packet
//! larger than the TX buffers is an error with its record number.
//!
//! Timing ([`ReplayTiming`]): as recorded (the gaps between the file's timestamps divided by
//! `replay_speed`), or at the generator's rate. Packets that carry an rtdaq sequence header
//! get the send time as their tx timestamp (raw frames only when their UDP checksum is 0,
//! which the timestamp would otherwise break), so latency stays meaningful; sequence
//! numbers and payloads are sent as recorded, and a replayed rtdaq recording validates at
//! the receiver like the original stream. Each loop (`replay_loops`) reads and sends the file
//! again: the receiver counts the repeats as duplicates, and only the first loop's packets
//! count as generated.
//!
//! Reading the file with the same `rtdaq_core::wire::pcap` code the recorder writes with
//! keeps one implementation of the format, cross-checked against tcpdump, tshark and
//! capinfos by the tests.

use crate::error::RuntimeError;
use crate::generator::GenTotals;
use crate::launcher::{Launcher, TimedOf};
use crate::pacer::{now_ns, wall_clock_ns, Pacer};
use crate::queue::rest::{cooperate, idle};
use rtdaq_config::model::ReplayTiming;
use rtdaq_core::traits::{TxBurst, TxQueue};
use rtdaq_core::wire::pcap::{
    PcapFileHeader, PcapRecord, LINKTYPE_ETHERNET, LINKTYPE_LINUX_SLL, LINKTYPE_RAW,
};
use rtdaq_core::wire::{parse_frame, Ipv4Header, SeqHeader, UdpHeader, PROTO_UDP};
use rtdaq_platform::alloc_audit;
use std::fs::File;
use std::io::{BufReader, ErrorKind, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering::Acquire};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TryRecvError};

/// Chunks the window is split into: the reader fills one while the TX thread sends others.
pub const CHUNKS: usize = 8;
/// Read buffer of the file (the reader's system calls are this large).
const READ_BUFFER: usize = 1 << 20;

/// One packet to send: where its bytes are in its chunk, when it was recorded.
#[derive(Debug, Clone, Copy)]
struct Pkt {
    off: u32,
    len: u32,
    ts_ns: u64,
    /// Offset of the rtdaq tx timestamp inside the packet's bytes, when it may be rewritten.
    stamp_at: Option<u32>,
}

/// One chunk of the window: whole records' bytes and where each packet is in them.
#[derive(Debug)]
pub struct Chunk {
    data: Box<[u8]>,
    used: usize,
    pkts: Vec<Pkt>,
    /// The loop (pass over the file) its packets belong to, from 0.
    pass: u32,
    /// The last chunk of its pass.
    pass_end: bool,
    /// The last chunk of the replay.
    last: bool,
}

impl Chunk {
    fn new(bytes: usize) -> Box<Chunk> {
        Box::new(Chunk {
            data: vec![0u8; bytes].into_boxed_slice(),
            used: 0,
            // Every record has a 16-byte header: a chunk never holds more packets.
            pkts: Vec::with_capacity(bytes / PcapRecord::LEN + 1),
            pass: 0,
            pass_end: false,
            last: false,
        })
    }

    /// Packets in the chunk.
    pub fn len(&self) -> usize {
        self.pkts.len()
    }

    /// True when it holds no packet (a pass can end on an empty chunk).
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Bytes of packet `i`.
    fn bytes(&self, i: usize) -> &[u8] {
        let p = self.pkts[i];
        &self.data[p.off as usize..p.off as usize + p.len as usize]
    }
}

fn bad(path: &Path, why: impl std::fmt::Display) -> RuntimeError {
    RuntimeError::Replay(format!("{}: {why}", path.display()))
}

/// Where the IPv4 header starts in a packet of link type `linktype`.
fn l3_offset(linktype: u32, pkt: &[u8]) -> Option<usize> {
    match linktype {
        LINKTYPE_RAW => Some(0),
        LINKTYPE_LINUX_SLL => (pkt.get(14..16)? == [0x08, 0x00]).then_some(16),
        _ => None,
    }
}

/// The UDP payload range of an IPv4 packet starting at `l3` (no fragments).
fn udp_payload_at(pkt: &[u8], l3: usize) -> Option<(usize, usize)> {
    let ip = Ipv4Header::parse(pkt.get(l3..)?).ok()?;
    if ip.protocol != PROTO_UDP || ip.more_frags || ip.frag_offset != 0 {
        return None;
    }
    let l4 = l3 + usize::from(ip.header_len);
    let udp = UdpHeader::parse(pkt.get(l4..)?).ok()?;
    let start = l4 + UdpHeader::LEN;
    let len = usize::from(udp.length).checked_sub(UdpHeader::LEN)?;
    (start + len <= pkt.len()).then_some((start, len))
}

/// What of a record is sent: `(start in the record, length, tx timestamp offset in the
/// sent bytes)`, or `None` when the socket engine cannot send it (not IPv4/UDP). `frames`:
/// the engine sends Ethernet frames (the whole record).
fn classify(pkt: &[u8], linktype: u32, frames: bool) -> Option<(usize, usize, Option<u32>)> {
    if frames {
        let stamp = parse_frame(pkt).ok().and_then(|f| f.udp).and_then(|u| {
            let po = usize::from(u.payload_offset);
            let zero_csum = pkt.get(po - 2..po) == Some(&[0, 0]);
            let payload = pkt.get(po..po + usize::from(u.payload_len))?;
            (zero_csum && SeqHeader::parse(payload).is_ok()).then_some((po + 16) as u32)
        });
        return Some((0, pkt.len(), stamp));
    }
    let (po, plen) = match linktype {
        LINKTYPE_ETHERNET => parse_frame(pkt)
            .ok()
            .and_then(|f| f.udp)
            .map(|u| (usize::from(u.payload_offset), usize::from(u.payload_len))),
        lt => l3_offset(lt, pkt).and_then(|l3| udp_payload_at(pkt, l3)),
    }?;
    let stamp = SeqHeader::parse(&pkt[po..po + plen]).is_ok().then_some(16);
    Some((po, plen, stamp))
}

/// Reads the file in order into chunks: before the run (the first window) and then on the
/// reader thread.
#[derive(Debug)]
struct Reader {
    file: BufReader<File>,
    path: PathBuf,
    hdr: PcapFileHeader,
    frames: bool,
    max_len: usize,
    loops: u32,
    pass: u32,
    /// Records read in this pass.
    n: u64,
    /// Byte offset of the next record in the file.
    at: u64,
    /// A record whose header was read but which did not fit the chunk.
    pending: Option<PcapRecord>,
    /// The file ended (or was cut inside a record) in this pass.
    eof: bool,
    pass_packets: u64,
    /// Packets of one pass, once the first pass ended.
    packets_per_pass: Option<u64>,
    /// Records of the first pass the socket engine cannot send (not IPv4/UDP).
    skipped: u64,
    /// Every pass has been read.
    done: bool,
}

impl Reader {
    fn open(path: &Path, frames: bool, max_len: usize, loops: u32) -> Result<Self, RuntimeError> {
        let f =
            File::open(path).map_err(|e| bad(path, format!("cannot read the replay file: {e}")))?;
        let mut file = BufReader::with_capacity(READ_BUFFER, f);
        let mut head = [0u8; PcapFileHeader::LEN];
        let got = read_full(&mut file, &mut head)
            .map_err(|e| bad(path, format!("cannot read the replay file: {e}")))?;
        let hdr = PcapFileHeader::parse(&head[..got]).map_err(|e| {
            bad(
                path,
                format!(
                    "not a pcap file ({e}); pcapng files convert with `editcap -F pcap IN OUT`"
                ),
            )
        })?;
        if frames && hdr.linktype != LINKTYPE_ETHERNET {
            return Err(bad(path, format!("link type {}: a raw engine sends Ethernet frames (link type 1); record the stream on an Ethernet interface", hdr.linktype)));
        }
        if !matches!(
            hdr.linktype,
            LINKTYPE_ETHERNET | LINKTYPE_RAW | LINKTYPE_LINUX_SLL
        ) {
            return Err(bad(
                path,
                format!(
                    "link type {} is not Ethernet (1), raw IPv4 (101) or Linux cooked (113)",
                    hdr.linktype
                ),
            ));
        }
        Ok(Reader {
            file,
            path: path.to_path_buf(),
            hdr,
            frames,
            max_len,
            loops: loops.max(1),
            pass: 0,
            n: 0,
            at: PcapFileHeader::LEN as u64,
            pending: None,
            eof: false,
            pass_packets: 0,
            packets_per_pass: None,
            skipped: 0,
            done: false,
        })
    }

    /// The next record's header, `None` at the end of the file. A file cut inside a
    /// record header ends there (a recording cut by a crash), with a warning.
    fn next_header(&mut self) -> Result<Option<PcapRecord>, RuntimeError> {
        if self.eof {
            return Ok(None);
        }
        let mut h = [0u8; PcapRecord::LEN];
        let got = read_full(&mut self.file, &mut h).map_err(|e| {
            bad(
                &self.path,
                format!("reading record {} at byte {}: {e}", self.n + 1, self.at),
            )
        })?;
        if got == 0 {
            self.eof = true;
            return Ok(None);
        }
        if got < h.len() {
            self.cut();
            return Ok(None);
        }
        self.n += 1;
        PcapRecord::parse(&h, &self.hdr).map(Some).map_err(|e| {
            bad(
                &self.path,
                format!("record {} at byte {}: {e} header", self.n, self.at),
            )
        })
    }

    /// The file ends inside a record: replay the complete ones (said once).
    fn cut(&mut self) {
        if self.pass == 0 {
            log::warn!(
                "{}: record {} is truncated (the file ends inside it): replaying the {} complete records",
                self.path.display(),
                self.n + 1,
                self.pass_packets
            );
        }
        self.eof = true;
    }

    /// Ends a pass: the next one starts at the first record, or the replay is done.
    fn end_pass(&mut self, c: &mut Chunk) -> Result<(), RuntimeError> {
        if self.pass_packets == 0 {
            return Err(bad(
                &self.path,
                format!(
                    "nothing to send: {} records{}",
                    self.n,
                    if self.skipped > 0 {
                        format!(", {} not IPv4/UDP", self.skipped)
                    } else {
                        String::new()
                    }
                ),
            ));
        }
        if self.packets_per_pass.is_none() {
            self.packets_per_pass = Some(self.pass_packets);
            if self.skipped > 0 {
                log::warn!(
                    "{}: {} of {} records are not IPv4/UDP and are not sent (the socket engine sends UDP payloads)",
                    self.path.display(),
                    self.skipped,
                    self.n
                );
            }
        }
        c.pass_end = true;
        self.pass += 1;
        if self.pass >= self.loops {
            c.last = true;
            self.done = true;
            return Ok(());
        }
        self.file
            .seek(SeekFrom::Start(PcapFileHeader::LEN as u64))
            .map_err(|e| {
                bad(
                    &self.path,
                    format!("cannot rewind for loop {}: {e}", self.pass + 1),
                )
            })?;
        self.at = PcapFileHeader::LEN as u64;
        (self.n, self.eof, self.pass_packets) = (0, false, 0);
        Ok(())
    }

    /// Fills `c` with whole records until it is full or the pass ends (a chunk holds one
    /// pass at most).
    fn fill(&mut self, c: &mut Chunk) -> Result<(), RuntimeError> {
        (c.used, c.pass, c.pass_end, c.last) = (0, self.pass, false, false);
        c.pkts.clear();
        loop {
            let rec = match self.pending.take() {
                Some(r) => r,
                None => match self.next_header()? {
                    Some(r) => r,
                    None => return self.end_pass(c),
                },
            };
            let len = rec.incl_len as usize;
            if rec.incl_len < rec.orig_len {
                return Err(bad(&self.path, format!("record {} was captured with a snap length ({} of {} bytes): replay needs whole packets (capture with -s 0)", self.n, rec.incl_len, rec.orig_len)));
            }
            if len > c.data.len() {
                return Err(bad(&self.path, format!("record {} is {len} bytes, larger than a chunk of the replay window ({} bytes: generator.replay_window_mib / {CHUNKS}); raise replay_window_mib", self.n, c.data.len())));
            }
            if c.used + len > c.data.len() || c.pkts.len() == c.pkts.capacity() {
                self.pending = Some(rec);
                return Ok(());
            }
            let at = c.used;
            let got = read_full(&mut self.file, &mut c.data[at..at + len]).map_err(|e| {
                bad(
                    &self.path,
                    format!("reading record {} at byte {}: {e}", self.n, self.at),
                )
            })?;
            if got < len {
                self.cut();
                return self.end_pass(c);
            }
            self.at += (PcapRecord::LEN + len) as u64;
            let Some((start, plen, stamp_at)) =
                classify(&c.data[at..at + len], self.hdr.linktype, self.frames)
            else {
                if self.pass == 0 {
                    self.skipped += 1;
                }
                continue;
            };
            if plen > self.max_len {
                return Err(bad(&self.path, format!("record {} is {plen} bytes, larger than the TX queue's buffers ({} bytes: buf_size of its memory region); raise buf_size", self.n, self.max_len)));
            }
            c.pkts.push(Pkt {
                off: (at + start) as u32,
                len: plen as u32,
                ts_ns: rec.ts_ns,
                stamp_at,
            });
            c.used += len;
            self.pass_packets += 1;
        }
    }
}

/// `read` until `buf` is full or the file ends; the bytes read.
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The reader and its ends of the two channels, until [`ReplayStream::start_reader`] takes them.
type ReaderParts = (Reader, SyncSender<Box<Chunk>>, Receiver<Box<Chunk>>);

/// A replay ready to run: the first window read and checked, the reader's state for the rest.
#[derive(Debug)]
pub struct ReplayStream {
    /// The file.
    pub path: String,
    /// Packets of one pass over the file, when the first window held all of them.
    pub packets_per_pass: Option<u64>,
    /// Bytes of the window (all chunks).
    pub window_bytes: usize,
    full: Receiver<Box<Chunk>>,
    free: SyncSender<Box<Chunk>>,
    reader: Option<ReaderParts>,
}

/// Opens `path` for a replay in a window of `window_bytes`, reads and checks its first
/// window. `frames`: the engine sends Ethernet frames (else UDP payloads). `max_len`: the TX
/// buffers' size. `loops`: passes over the file.
///
/// # Errors
/// [`RuntimeError::Replay`] naming the file and what is wrong with it.
pub fn open(
    path: &Path,
    frames: bool,
    max_len: usize,
    loops: u32,
    window_bytes: usize,
) -> Result<ReplayStream, RuntimeError> {
    let mut reader = Reader::open(path, frames, max_len, loops)?;
    let chunk_bytes = (window_bytes / CHUNKS).max(1);
    let (full_tx, full) = sync_channel(CHUNKS);
    let (free, free_rx) = sync_channel(CHUNKS);
    for _ in 0..CHUNKS {
        let mut c = Chunk::new(chunk_bytes);
        if reader.done {
            // Never filled: the TX thread may hand it back; nobody refills it.
            let _ = free.try_send(c);
            continue;
        }
        reader.fill(&mut c)?;
        let _ = full_tx.try_send(c);
    }
    let packets_per_pass = reader.packets_per_pass;
    let reader = (!reader.done).then_some((reader, full_tx, free_rx));
    Ok(ReplayStream {
        path: path.display().to_string(),
        packets_per_pass,
        window_bytes: chunk_bytes * CHUNKS,
        full,
        free,
        reader,
    })
}

impl ReplayStream {
    /// Says how often the TX thread, having sent `sent` packets, found no chunk read yet
    /// (`waits`), if it ever did. Cold path.
    fn log_waits(&self, sent: u64, waits: u64) {
        if waits > 0 {
            log::info!(
                "replay {}: {sent} packets sent; the TX thread found no chunk read yet {waits} times (the file is read through a {} MiB window)",
                self.path,
                self.window_bytes >> 20
            );
        }
    }

    /// Starts the reader thread (normal priority, on the calling thread's CPUs) when the
    /// file did not fit the first window; `None` when it did.
    ///
    /// # Errors
    /// [`RuntimeError::Replay`] when the thread cannot be spawned.
    pub fn start_reader(
        &mut self,
    ) -> Result<Option<std::thread::JoinHandle<Result<(), RuntimeError>>>, RuntimeError> {
        let Some((mut reader, full, free)) = self.reader.take() else {
            return Ok(None);
        };
        let h = std::thread::Builder::new()
            .name("replay-reader".into())
            .spawn(move || {
                // The TX thread hands each sent chunk back; it drops its end when it stops.
                while let Ok(mut c) = free.recv() {
                    reader.fill(&mut c)?;
                    if full.send(c).is_err() || reader.done {
                        break;
                    }
                }
                Ok(())
            })
            .map_err(|e| {
                RuntimeError::Replay(format!(
                    "{}: cannot spawn the reader thread: {e}",
                    self.path
                ))
            })?;
        Ok(Some(h))
    }
}

/// What a replaying generator does.
#[derive(Debug)]
pub(crate) struct ReplayPlan {
    pub stream: ReplayStream,
    pub timing: ReplayTiming,
    /// `Rate` timing: the generator's pacer.
    pub pacer: Pacer,
    pub batch: usize,
    pub until_ns: Option<u64>,
    pub start_ns: u64,
}

/// The TX thread of a replaying generator. `launch`: the queue was armed for launch times
/// (`generator.pacing = "txtime"`): each packet goes to the queue up to the launcher's lead
/// ahead of its time (recorded or paced), with that time as its launch time
/// ([`crate::launch`]); else each goes when due.
pub(crate) fn tx_replay<Q: TxQueue>(
    mut queue: Q,
    mut plan: ReplayPlan,
    mut launch: Option<(Launcher, TimedOf<Q>)>,
    stop: &AtomicBool,
    busy: bool,
    stall: &crate::stall::StallWatch,
) -> GenTotals {
    let mut burst = queue.new_burst();
    let mut totals = GenTotals::default();
    let speed = match plan.timing {
        ReplayTiming::Recorded { speed } => speed,
        ReplayTiming::Rate => 1.0,
    };
    // Packets go to the queue when due, or up to the lead ahead of it with launch times.
    let ahead = launch.as_ref().map_or(0, |(l, _)| l.lead_ns);
    let mut at = vec![
        0u64;
        if launch.is_some() {
            plan.batch.max(1)
        } else {
            0
        }
    ];
    if let Some((l, _)) = &launch {
        let origin = l.origin();
        plan.pacer = Pacer::new(plan.pacer.rate(), origin).with_max_credit_ns(ahead);
        plan.start_ns = origin;
    }
    let (full, free) = (&plan.stream.full, &plan.stream.free);
    let mut loop_start = plan.start_ns;
    let mut t0: Option<u64> = None;
    let mut cur: Option<Box<Chunk>> = None;
    let mut i = 0;
    let mut waits = 0u64;
    let mut sent = 0u64;
    let mut turns =
        crate::stall::StallClock::start(stall, now_ns(), crate::stall::ThreadKind::Generator);
    alloc_audit::arm_current_thread();
    'outer: while !stop.load(Acquire) {
        let now = now_ns();
        turns.tick(now);
        if plan.until_ns.is_some_and(|t| now >= t) {
            break;
        }
        let horizon = now + ahead;
        // The next chunk once this one is sent: hand it back for the reader to refill.
        let c = match cur.take() {
            Some(c) if i < c.len() => c,
            done => {
                if let Some(c) = done {
                    if c.pass_end {
                        loop_start = horizon;
                    }
                    let last = c.last;
                    let _ = free.try_send(c);
                    if last {
                        break 'outer;
                    }
                }
                match full.try_recv() {
                    Ok(c) => {
                        i = 0;
                        cur = Some(c);
                    }
                    Err(TryRecvError::Empty) => {
                        waits += 1;
                        idle(busy);
                    }
                    // The reader stopped (an error it reports itself).
                    Err(TryRecvError::Disconnected) => break 'outer,
                }
                continue;
            }
        };
        let t0 = *t0.get_or_insert_with(|| c.pkts.first().map_or(0, |p| p.ts_ns));
        let due =
            |k: usize| loop_start + (c.pkts[k].ts_ns.saturating_sub(t0) as f64 / speed) as u64;
        let left = (c.len() - i).min(plan.batch);
        let want = match plan.timing {
            ReplayTiming::Recorded { .. } => {
                let mut k = 0;
                while k < left && due(i + k) <= horizon {
                    k += 1;
                }
                if k == 0 {
                    wait_until(&turns, due(i).saturating_sub(ahead), now, busy);
                }
                k
            }
            ReplayTiming::Rate => {
                let k = plan.pacer.allowance(horizon, left, c.pkts[i].len as usize);
                if k == 0 {
                    let next = plan.pacer.next_send_at().saturating_sub(ahead);
                    wait_until(&turns, next, now, busy);
                }
                k
            }
        };
        if want == 0 {
            cur = Some(c);
            continue;
        }
        let got = queue.reserve(&mut burst, want);
        if got == 0 {
            cur = Some(c);
            idle(busy);
            continue;
        }
        let mut tx_ns = wall_clock_ns();
        if let Some((l, _)) = launch.as_mut() {
            l.turn(now);
        }
        for (k, p) in c.pkts[i..i + got].iter().enumerate() {
            // This packet's time: recorded, or the pacer's next departure.
            let when = match plan.timing {
                ReplayTiming::Recorded { .. } => due(i + k),
                ReplayTiming::Rate => {
                    let t = plan.pacer.next_send_at();
                    plan.pacer.sent(1, p.len as usize);
                    t
                }
            };
            if let Some((l, _)) = launch.as_mut() {
                // Its launch time, and the header's tx time: the launch on the wall clock.
                (at[k], tx_ns) = l.at(when);
            }
            copy_into(&mut burst, k, c.bytes(i + k), p.stamp_at, tx_ns);
        }
        match launch.as_ref().and_then(|(_, timed)| timed(&mut queue)) {
            Some(q) => q.send_at(&mut burst, &at[..got]),
            None => queue.send(&mut burst),
        };
        cooperate(busy);
        i += got;
        sent += got as u64;
        if c.pass == 0 {
            totals.generated += got as u64;
        }
        cur = Some(c);
    }
    alloc_audit::disarm_current_thread(); // the end may read the qdiscs (netlink, allocating)
    if let Some((l, q)) = launch.as_ref().and_then(|(l, t)| Some((l, t(&mut queue)?))) {
        l.finish(q);
    }
    plan.stream.log_waits(sent, waits);
    totals
}

/// Copies a replayed packet's bytes `src` into packet `k` of `burst`, with its sequence
/// header's tx time (at byte `stamp_at`, if it has one) set to `tx_ns`. Never allocates.
#[inline]
fn copy_into<B: TxBurst>(burst: &mut B, k: usize, src: &[u8], stamp_at: Option<u32>, tx_ns: u64) {
    if let Some(buf) = burst.packet_mut(k) {
        // Checked when read: every packet fits the TX buffers.
        let len = src.len().min(buf.len());
        buf[..len].copy_from_slice(&src[..len]);
        if let Some(at) = stamp_at {
            let at = at as usize;
            if let Some(t) = buf.get_mut(at..at + 8) {
                t.copy_from_slice(&tx_ns.to_be_bytes());
            }
        }
        burst.set_len(k, len);
    }
}

/// Waits (spins when `busy`) towards `due` (monotonic ns), between 50 µs and 1 ms; a sleep
/// records its wake-up latency in `turns`.
fn wait_until(turns: &crate::stall::StallClock<'_>, due: u64, now: u64, busy: bool) {
    if busy {
        std::hint::spin_loop();
    } else {
        crate::queue::rest::sleep_timed(
            turns,
            now,
            due.saturating_sub(now).clamp(50_000, 1_000_000),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rtdaq_core::wire::pcap::{emit_udp_headers, UDP_HEADERS_LEN};

    fn pcap(linktype: u32, recs: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut f = PcapFileHeader::new(262_144, linktype).to_bytes().to_vec();
        for (ts, b) in recs {
            let r = PcapRecord {
                ts_ns: *ts,
                incl_len: b.len() as u32,
                orig_len: b.len() as u32,
            };
            f.extend_from_slice(&r.to_bytes());
            f.extend_from_slice(b);
        }
        f
    }

    fn udp_frame(payload: &[u8]) -> Vec<u8> {
        let mut h = [0u8; UDP_HEADERS_LEN];
        emit_udp_headers(
            &mut h,
            ([127, 0, 0, 1], 1),
            ([127, 0, 0, 1], 2),
            payload.len(),
            0,
        )
        .unwrap();
        let mut v = h.to_vec();
        v.extend_from_slice(payload);
        v
    }

    /// A pcap file of the test's own (removed on drop).
    fn write(name: &str, bytes: &[u8]) -> tempfile::TempPath {
        let p = tempfile::Builder::new()
            .prefix(&format!("rtdaq-replay-{name}-"))
            .suffix(".pcap")
            .tempfile()
            .unwrap()
            .into_temp_path();
        std::fs::write(&p, bytes).unwrap();
        p
    }

    /// One packet a replay sends: its bytes, its tx stamp offset and its pass.
    type Sent = (Vec<u8>, Option<u32>, u32);

    /// Every packet a replay of `path` would send, in order, read through a window of
    /// `window` bytes by the reader thread.
    fn collect(
        path: &Path,
        frames: bool,
        max_len: usize,
        loops: u32,
        window: usize,
    ) -> Result<Vec<Sent>, RuntimeError> {
        let mut s = open(path, frames, max_len, loops, window)?;
        let reader = s.start_reader()?;
        let mut out = Vec::new();
        while let Ok(c) = s.full.recv() {
            for k in 0..c.len() {
                out.push((c.bytes(k).to_vec(), c.pkts[k].stamp_at, c.pass));
            }
            let last = c.last;
            let _ = s.free.send(c);
            if last {
                break;
            }
        }
        drop(s);
        if let Some(h) = reader {
            h.join().unwrap()?;
        }
        Ok(out)
    }

    /// Issue #29: a file far larger than the window replays whole, in order, every loop,
    /// through a fixed window (the reader thread refills the chunks the sender handed back).
    #[test]
    fn a_file_larger_than_the_window_streams_whole_in_order() {
        let mut gen = crate::validator::PayloadGen::new(3, 100);
        let recs: Vec<(u64, Vec<u8>)> = (0..1000u64)
            .map(|i| {
                let mut p = vec![0u8; 100];
                gen.fill(&mut p, i);
                (i * 1000, udp_frame(&p))
            })
            .collect();
        let file = pcap(LINKTYPE_ETHERNET, &recs);
        let f = write("big", &file);
        // 8 chunks of 512 bytes: 3 records each, 4 KiB for a 158 KB file.
        let got = collect(&f, false, 2048, 2, 4096).unwrap();
        assert_eq!(got.len(), 2000);
        for (k, (bytes, stamp, pass)) in got.iter().enumerate() {
            let i = k % 1000;
            assert_eq!(bytes[..], recs[i].1[42..], "packet {k}");
            assert_eq!((*stamp, *pass), (Some(16), (k / 1000) as u32));
        }
        let s = open(&f, false, 2048, 1, 4096).unwrap();
        assert_eq!(s.packets_per_pass, None, "more than the first window");
        assert_eq!(s.window_bytes, 4096);
        let s = open(&f, false, 2048, 1, 1 << 20).unwrap();
        assert_eq!(
            s.packets_per_pass,
            Some(1000),
            "the whole file in the first window"
        );
        // A record larger than a chunk: the error says which key to raise.
        let e = open(&f, false, 2048, 1, 512).unwrap_err().to_string();
        assert!(
            e.contains("record 1 is 142 bytes, larger than a chunk")
                && e.contains("replay_window_mib"),
            "{e}"
        );
    }

    /// A bad record beyond the first window stops the reader with an error naming it; what
    /// came before was sent.
    #[test]
    fn a_bad_record_deep_in_the_file_is_an_error_of_the_reader() {
        let recs: Vec<(u64, Vec<u8>)> = (0..200u64).map(|i| (i, udp_frame(b"abcdefgh"))).collect();
        let mut file = pcap(LINKTYPE_ETHERNET, &recs);
        // Record 150's snap length: incl_len 50 < orig_len.
        let rec_len = PcapRecord::LEN + recs[0].1.len();
        let at = PcapFileHeader::LEN + 149 * rec_len;
        file[at + 12..at + 16].copy_from_slice(&1000u32.to_le_bytes());
        let f = write("deep", &file);
        assert!(
            open(&f, false, 2048, 1, 4096).is_ok(),
            "the first window is fine"
        );
        let e = collect(&f, false, 2048, 1, 4096).unwrap_err().to_string();
        assert!(
            e.contains("record 150 was captured with a snap length"),
            "{e}"
        );
    }

    #[test]
    fn loads_payloads_or_frames_and_skips_what_the_socket_engine_cannot_send() {
        let mut gen = crate::validator::PayloadGen::new(3, 100);
        let mut p = vec![0u8; 100];
        gen.fill(&mut p, 5);
        let mut arp = udp_frame(b"x");
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let f = write(
            "mixed",
            &pcap(
                LINKTYPE_ETHERNET,
                &[(10, udp_frame(&p)), (20, arp), (30, udp_frame(b"plain"))],
            ),
        );
        let r = collect(&f, false, 2048, 1, 1 << 20).unwrap();
        assert_eq!(r.len(), 2, "the ARP frame is skipped");
        assert_eq!((&r[0].0[..], r[0].1), (&p[..], Some(16)));
        assert_eq!((&r[1].0[..], r[1].1), (&b"plain"[..], None));
        let fr = collect(&f, true, 2048, 1, 1 << 20).unwrap();
        assert_eq!(fr.len(), 3);
        assert_eq!(fr[0].1, Some(42 + 16));
        assert_eq!(fr[0].0.len(), 142);
        // too large for the TX buffers
        let e = open(&f, true, 100, 1, 1 << 20).unwrap_err().to_string();
        assert!(
            e.contains("record 1 is 142 bytes") && e.contains("buf_size"),
            "{e}"
        );
    }

    #[test]
    fn refuses_what_it_cannot_replay_with_the_reason() {
        let f = write(
            "ng",
            &[
                0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                0,
            ],
        );
        assert!(open(&f, false, 2048, 1, 1 << 20)
            .unwrap_err()
            .to_string()
            .contains("editcap -F pcap"));
        let raw = write(
            "raw",
            &pcap(LINKTYPE_RAW, &[(1, udp_frame(b"abc")[14..].to_vec())]),
        );
        assert!(open(&raw, true, 2048, 1, 1 << 20)
            .unwrap_err()
            .to_string()
            .contains("link type 101"));
        let r = collect(&raw, false, 2048, 1, 1 << 20).unwrap();
        assert_eq!(r[0].0, b"abc");
        let empty = write("empty", &pcap(LINKTYPE_ETHERNET, &[]));
        assert!(open(&empty, false, 2048, 1, 1 << 20)
            .unwrap_err()
            .to_string()
            .contains("nothing to send"));
        // A file cut inside its last record replays the complete ones.
        let mut cut = pcap(
            LINKTYPE_ETHERNET,
            &[(1, udp_frame(b"one")), (2, udp_frame(b"two"))],
        );
        cut.truncate(cut.len() - 3);
        let c = write("cut", &cut);
        assert_eq!(collect(&c, false, 2048, 1, 1 << 20).unwrap().len(), 1);
        assert!(
            open(Path::new("/nonexistent/x.pcap"), false, 2048, 1, 1 << 20)
                .unwrap_err()
                .to_string()
                .contains("cannot read")
        );
    }

    /// Issue #33: a replay with launch times hands every packet over with its recorded time
    /// as its launch time: the gaps between launch times are the file's gaps, exactly; each
    /// header's tx time is its launch on the wall clock; at the end the queue is asked once
    /// more for the kernel's reports.
    #[test]
    fn a_replay_with_launch_times_keeps_the_recorded_gaps() {
        use crate::launcher::tests::{Bufs, Keep};
        use crate::launcher::Launcher;
        use rtdaq_core::traits::{LaunchClock, TimedTx};
        let mut gen = crate::validator::PayloadGen::new(5, 100);
        // Irregular gaps: 100 µs apart, each moved by 0..40 µs.
        let ts = |i: u64| 1_000_000_000 + i * 100_000 + (i * 7 % 5) * 10_000;
        let recs: Vec<(u64, Vec<u8>)> = (0..500u64)
            .map(|i| {
                let mut p = vec![0u8; 100];
                gen.fill(&mut p, i);
                (ts(i), udp_frame(&p))
            })
            .collect();
        let f = write("launch", &pcap(LINKTYPE_ETHERNET, &recs));
        let start = now_ns();
        let plan = ReplayPlan {
            stream: open(&f, false, 256, 1, 1 << 20).unwrap(),
            timing: ReplayTiming::Recorded { speed: 1.0 },
            pacer: Pacer::new(crate::pacer::PaceRate::PacketsPerSec(1), start),
            batch: 16,
            until_ns: None,
            start_ns: start,
        };
        let q = Keep::default();
        let kept = std::sync::Arc::clone(&q.kept);
        let timed: crate::launcher::TimedOf<Keep> = |q| Some(q as &mut dyn TimedTx<Burst = Bufs>);
        let launcher = Launcher::new(LaunchClock::Tai, 50_000_000);
        let stall = crate::stall::StallWatch::new();
        let stop = AtomicBool::new(false);
        let t = tx_replay(q, plan, Some((launcher, timed)), &stop, false, &stall);
        assert_eq!(t.generated, 500);
        let q = kept.lock().unwrap();
        assert_eq!((q.sent.len(), q.settles), (500, 1));
        let exact = q
            .sent
            .windows(2)
            .enumerate()
            .filter(|(k, w)| w[1].0 - w[0].0 == ts(*k as u64 + 1) - ts(*k as u64))
            .count();
        // A test thread preempted beyond its lead forgets the schedule beyond it: rare.
        assert!(exact >= 495, "{exact} of 499 gaps as recorded");
        let mut skew = (i128::MAX, i128::MIN);
        for (k, (at, bytes)) in q.sent.iter().enumerate() {
            let h = SeqHeader::parse(bytes).unwrap();
            assert_eq!(h.seq, k as u64);
            let d = i128::from(*at) - i128::from(h.tx_timestamp_ns);
            skew = (skew.0.min(d), skew.1.max(d));
        }
        assert!(
            skew.1 - skew.0 < 1_000_000,
            "launch vs header time varies by {skew:?}"
        );
    }
}
