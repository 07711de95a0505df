//! The kinds of queue thread the stall clocks time (a leaf: `stall` and `test_hooks` both
//! name them).

/// Which kind of thread a `StallClock` (`crate::stall`) times (the `test-hooks` feature's faults pick a
/// kind; see `test_hooks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ThreadKind {
    /// RX I/O thread (direct mode: I/O and consumer in one).
    Io = 1,
    /// Indirect RX consumer (with or without a GPU stage).
    Consumer = 2,
    /// TX generator or replay.
    Generator = 3,
    /// Record writer, or a shared sink's merger.
    Writer = 4,
    /// A GPU stage's completions: "turns" when a batch came back or none is in flight.
    Gpu = 5,
}
