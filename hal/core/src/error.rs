//! Small `Copy` error enums. No strings, no allocation; `Display` gives a fixed message.

use core::fmt;

macro_rules! copy_error {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $var:ident => $msg:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name { $($(#[$vm])* $var),+ }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(match self { $(Self::$var => $msg),+ })
            }
        }
        impl core::error::Error for $name {}
    };
}

copy_error!(
    /// Why a ring operation failed.
    RingError {
        /// The ring has no free slot (enqueue) – counted as a drop by callers.
        Full => "ring full",
        /// The ring holds nothing (dequeue).
        Empty => "ring empty",
        /// The requested capacity is not a power of two or is zero.
        BadCapacity => "ring capacity must be a non-zero power of two",
    }
);

copy_error!(
    /// Why a buffer pool could not be built or used.
    PoolError {
        /// Every slot is in use (normal back-pressure; counted as `pool_empty`).
        Empty => "buffer pool empty",
        /// The memory or link storage given to the pool is too small for the slot layout.
        TooSmall => "memory too small for the requested slots",
        /// Slot size is zero or too large, or the slot count exceeds the pool's maximum.
        BadLayout => "invalid slot size or count",
    }
);

copy_error!(
    /// Why a transmit request failed.
    TxError {
        /// No free TX slot or descriptor right now (back-pressure).
        RingFull => "tx ring full",
        /// The packet does not fit the TX buffer.
        TooLarge => "packet larger than the tx buffer",
        /// Asked for more packets than a burst can hold.
        BurstTooLarge => "more packets than a burst holds",
    }
);

copy_error!(
    /// Why bytes could not be parsed as a header, or a header could not be emitted.
    ParseError {
        /// Fewer bytes than the header (or its declared length) needs.
        Truncated => "truncated",
        /// A field has a value the parser does not accept (version, IHL, magic, length, ...).
        Malformed => "malformed",
        /// A checksum does not verify.
        Checksum => "bad checksum",
        /// The protocol is not the one asked for (ethertype, IP protocol, ...).
        Unsupported => "unsupported protocol",
    }
);
