//! The one `Stage` trait of the RX consumer, the packet every stage sees, and the static
//! composition of stages (tuples, `Option`, `Vec`: no `dyn`, no allocation).
//!
//! A stage is a state machine (the sans-IO idiom): the consumer loop
//! (`queue::consume`) owns the ring and the clock, tells each stage about packets,
//! bursts, turns and the end of the run, and asks it which ring slots it still holds. A
//! stage that keeps packets' buffers after their burst (the GPU stage, until the GPU has
//! read them) says so through [`Stage::holds_from`]; the loop releases every slot below it.

use rtdaq_core::traits::Segment;
use rtdaq_core::{DropReason, PacketMeta};

/// One packet as every stage sees it, built once per packet by the loop's unwrap
/// (`queue::unwrap`).
#[derive(Debug, Clone, Copy)]
pub struct Packet<'a> {
    /// The whole Ethernet frame (raw engines), else `None`; with header-data split into GPU
    /// memory, the headers the CPU can read.
    pub frame: Option<&'a [u8]>,
    /// The application payload the CPU can read (raw engines: the UDP payload inside
    /// `frame`; the socket engine: the datagram or TCP record); empty when a frame is not
    /// IPv4/UDP or the packet lies in GPU memory.
    pub payload: &'a [u8],
    /// The engine's metadata.
    pub meta: PacketMeta,
    /// Receive time, ns since the Unix epoch (the engine's, else the consumer's clock).
    pub rx_ns: u64,
    /// Payload bytes after `payload` that the CPU cannot read (header-data split into GPU
    /// memory: the NIC put them there); 0 otherwise.
    pub tail: usize,
    /// False when the packet's first bytes lie in GPU memory (a NIC wrote them there): the
    /// CPU reads nothing of it; the validator counts it, the record stage skips it.
    pub readable: bool,
    /// Where the bytes a device stage batches lie: the packet's first segment in host memory
    /// (the frame or message as the engine delivered it), or in GPU memory (the whole packet,
    /// or the data segment of a header-data split).
    pub data: Segment<'a>,
    /// Number of the ring slot holding the packet's burst, counted from the start of the run
    /// (what [`Stage::holds_from`] answers in).
    pub slot: u64,
}

impl<'a> Packet<'a> {
    /// A packet whose bytes all lie in host memory, in no ring slot (a record tap's copy).
    pub fn host(frame: Option<&'a [u8]>, payload: &'a [u8], meta: PacketMeta, rx_ns: u64) -> Self {
        Packet {
            frame,
            payload,
            meta,
            rx_ns,
            tail: 0,
            readable: true,
            data: Segment::Host(frame.unwrap_or(payload)),
            slot: 0,
        }
    }
}

/// Where the SPEAD packet the validator last checked goes in its heap: what the GPU
/// stage's heap assembly (`Mode::Pieces`) places. Every case is counted by the validator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum HeapPiece {
    /// Not a SPEAD packet the heap window took: another format, a malformed packet, a
    /// stream-table overflow, `validate = "count"`.
    #[default]
    None,
    /// New payload bytes of heap `heap_cnt`: `len` bytes from byte `start` of the payload
    /// (after the item pointers), at byte `offset` of the heap.
    Data {
        /// The heap counter (item 0x01), all senders of `heap_step` together.
        heap_cnt: u64,
        /// Heap offset of the bytes (item 0x03).
        offset: u64,
        /// Where they start in the UDP payload.
        start: usize,
        /// How many (item 0x04).
        len: usize,
    },
    /// A repeat of bytes the heap already has (`duplicates`).
    Duplicate,
    /// A packet of a heap that left the window (`too_old`).
    TooOld,
    /// No data to place: an end-of-stream packet, a packet of no payload bytes.
    Control,
}

/// What earlier stages found out about the packet, for later ones: the validate stage
/// writes it, the GPU stage reads it (where the packet goes in its batch). Reset for every
/// packet.
#[derive(Debug, Clone, Copy, Default)]
pub struct Notes {
    /// The sequence number the validator placed the packet at (any stream format).
    pub seq: Option<u64>,
    /// SPEAD: the new heap bytes the packet carries.
    pub piece: HeapPiece,
}

/// A stage's answer at the end of the run ([`Stage::ending`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// Nothing in flight: the loop may release every slot.
    Done,
    /// Work is in flight (batches on the GPU): the loop polls and asks again.
    Pending,
    /// The work in flight did not finish in time: the slots it holds stay unreleased (a
    /// device may still read their buffers); the stage counted the failure.
    Abandoned,
}

/// One stage of a queue's consumer. Every method runs on the queue's consumer thread and
/// keeps the hot-path rules: no allocation, no logging, no blocking; a stage that cannot
/// keep up counts its drops.
pub trait Stage {
    /// False when the stage never reads a packet's bytes. When no stage of the chain does,
    /// the loop counts each packet from its descriptor ([`on_count`](Self::on_count)) and
    /// never touches its data.
    fn reads_packets(&self) -> bool {
        true
    }
    /// True when [`end_burst`](Self::end_burst) and [`idle`](Self::idle) need the monotonic
    /// clock (timers); the loop reads it only for chains that do (`0` otherwise).
    fn wants_clock(&self) -> bool {
        false
    }
    /// `Some(reason)` when the stage may keep ring slots after their burst was processed:
    /// a direct queue then receives into a private ring of bursts, and packets that find
    /// every slot held are counted as drops of `reason`.
    fn holds(&self) -> Option<DropReason> {
        None
    }
    /// A packet counted from its descriptor (`len` bytes; `in_device`: its first bytes in
    /// GPU memory). Called only when no stage of the chain reads packets.
    fn on_count(&mut self, _len: u64, _in_device: bool) {}
    /// One packet.
    fn on_packet(&mut self, p: &Packet<'_>, notes: &mut Notes);
    /// After each burst (`now_ns`: monotonic, when the chain [wants it](Self::wants_clock)).
    fn end_burst(&mut self, _now_ns: u64) {}
    /// Every turn of the loop, before it looks for a burst and whether or not one came:
    /// completions and timeouts of work in flight.
    fn poll(&mut self) {}
    /// While the queue has nothing new: settle live counters, act on timers.
    fn idle(&mut self, _now_ns: u64) {}
    /// The oldest ring slot the stage still refers to (`u64::MAX`: none). The loop clears
    /// and releases every slot below it.
    fn holds_from(&self) -> u64 {
        u64::MAX
    }
    /// The run is ending and every packet was taken: hand partial work over. Called again
    /// (after [`poll`](Self::poll)) while it answers [`Drain::Pending`].
    fn ending(&mut self) -> Drain {
        Drain::Done
    }
    /// After the last packet and completion: hand over what is left (a recorder's buffer).
    fn finish(&mut self) {}
}

/// The worse of two drain answers: abandoned over pending over done.
fn worse(a: Drain, b: Drain) -> Drain {
    match (a, b) {
        (Drain::Abandoned, _) | (_, Drain::Abandoned) => Drain::Abandoned,
        (Drain::Pending, _) | (_, Drain::Pending) => Drain::Pending,
        _ => Drain::Done,
    }
}

/// Two stages in order: `A` sees each packet before `B`.
impl<A: Stage, B: Stage> Stage for (A, B) {
    #[inline]
    fn reads_packets(&self) -> bool {
        self.0.reads_packets() || self.1.reads_packets()
    }
    #[inline]
    fn wants_clock(&self) -> bool {
        self.0.wants_clock() || self.1.wants_clock()
    }
    #[inline]
    fn holds(&self) -> Option<DropReason> {
        self.0.holds().or(self.1.holds())
    }
    #[inline]
    fn on_count(&mut self, len: u64, in_device: bool) {
        self.0.on_count(len, in_device);
        self.1.on_count(len, in_device);
    }
    #[inline]
    fn on_packet(&mut self, p: &Packet<'_>, notes: &mut Notes) {
        self.0.on_packet(p, notes);
        self.1.on_packet(p, notes);
    }
    #[inline]
    fn end_burst(&mut self, now_ns: u64) {
        self.0.end_burst(now_ns);
        self.1.end_burst(now_ns);
    }
    #[inline]
    fn poll(&mut self) {
        self.0.poll();
        self.1.poll();
    }
    #[inline]
    fn idle(&mut self, now_ns: u64) {
        self.0.idle(now_ns);
        self.1.idle(now_ns);
    }
    #[inline]
    fn holds_from(&self) -> u64 {
        self.0.holds_from().min(self.1.holds_from())
    }
    fn ending(&mut self) -> Drain {
        let a = self.0.ending();
        worse(a, self.1.ending())
    }
    fn finish(&mut self) {
        self.0.finish();
        self.1.finish();
    }
}

/// A stage a queue may not have (`None`: the packet passes on).
impl<S: Stage> Stage for Option<S> {
    #[inline]
    fn reads_packets(&self) -> bool {
        self.as_ref().is_some_and(S::reads_packets)
    }
    #[inline]
    fn wants_clock(&self) -> bool {
        self.as_ref().is_some_and(S::wants_clock)
    }
    #[inline]
    fn holds(&self) -> Option<DropReason> {
        self.as_ref().and_then(S::holds)
    }
    #[inline]
    fn on_count(&mut self, len: u64, in_device: bool) {
        if let Some(s) = self {
            s.on_count(len, in_device);
        }
    }
    #[inline]
    fn on_packet(&mut self, p: &Packet<'_>, notes: &mut Notes) {
        if let Some(s) = self {
            s.on_packet(p, notes);
        }
    }
    #[inline]
    fn end_burst(&mut self, now_ns: u64) {
        if let Some(s) = self {
            s.end_burst(now_ns);
        }
    }
    #[inline]
    fn poll(&mut self) {
        if let Some(s) = self {
            s.poll();
        }
    }
    #[inline]
    fn idle(&mut self, now_ns: u64) {
        if let Some(s) = self {
            s.idle(now_ns);
        }
    }
    #[inline]
    fn holds_from(&self) -> u64 {
        self.as_ref().map_or(u64::MAX, S::holds_from)
    }
    fn ending(&mut self) -> Drain {
        self.as_mut().map_or(Drain::Done, S::ending)
    }
    fn finish(&mut self) {
        if let Some(s) = self {
            s.finish();
        }
    }
}

/// Several stages of one kind (a queue's record sinks), in order. Built before the threads
/// start; the loop never grows it.
impl<S: Stage> Stage for Vec<S> {
    #[inline]
    fn reads_packets(&self) -> bool {
        self.iter().any(S::reads_packets)
    }
    #[inline]
    fn wants_clock(&self) -> bool {
        self.iter().any(S::wants_clock)
    }
    #[inline]
    fn holds(&self) -> Option<DropReason> {
        self.iter().find_map(S::holds)
    }
    #[inline]
    fn on_count(&mut self, len: u64, in_device: bool) {
        for s in self {
            s.on_count(len, in_device);
        }
    }
    #[inline]
    fn on_packet(&mut self, p: &Packet<'_>, notes: &mut Notes) {
        for s in self {
            s.on_packet(p, notes);
        }
    }
    #[inline]
    fn end_burst(&mut self, now_ns: u64) {
        for s in self {
            s.end_burst(now_ns);
        }
    }
    #[inline]
    fn poll(&mut self) {
        for s in self {
            s.poll();
        }
    }
    #[inline]
    fn idle(&mut self, now_ns: u64) {
        for s in self {
            s.idle(now_ns);
        }
    }
    #[inline]
    fn holds_from(&self) -> u64 {
        self.iter().map(S::holds_from).min().unwrap_or(u64::MAX)
    }
    fn ending(&mut self) -> Drain {
        self.iter_mut().map(S::ending).fold(Drain::Done, worse)
    }
    fn finish(&mut self) {
        for s in self {
            s.finish();
        }
    }
}
