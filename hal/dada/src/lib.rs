//! # rtdaq-dada: PSRDADA shared-memory rings
//!
//! Radio-astronomy pipelines (dspsr, heimdall, psrdada's own clients) read live data from a
//! PSRDADA ring: a **header block** and a **data block**, each a ring of System V shared
//! memory buffers with semaphores, which `dada_db -k KEY` creates (the data block at `KEY`,
//! the header block at `KEY + 1`). This crate gives rtdaq that ring through the psrdada C
//! library itself (1.0.0, built from source by `psrdada-sys`), so that the layout is the
//! library's own, whatever reads it. Three layers (style guide §3.5):
//!
//! | layer | where | what |
//! |---|---|---|
//! | raw | [`raw`] (`psrdada-sys`) | bindgen bindings of `dada_hdu.h`, `ipcbuf.h`, `ipcio.h` |
//! | result | `result` (private) | the library's `-1`/null returns → [`Result`]`<_, `[`DadaError`]`>` naming the call and the key |
//! | safe | crate root | [`Ring`] (creates and destroys both blocks, as `dada_db` / `dada_db -d`), [`Writer`] (the designated writer: a header, then data blocks written in place, end of data; [`Writer::watch_readers`] readies the place of a reader that left mid-run for the next one, [`slots`]), [`Reader`] (the designated reader: the header, then the data to end of data; [`Reader::drop_oldest`]: a reader behind gives its oldest blocks back unread) |
//!
//! ## Use
//! ```no_run
//! use rtdaq_dada::{Key, Reader, Ring, RingSpec, Writer};
//! # fn main() -> Result<(), rtdaq_dada::DadaError> {
//! let key = Key::parse("dada")?;
//! let ring = Ring::create(key, &RingSpec { nbufs: 8, bufsz: 1 << 20, ..RingSpec::default() })?;
//! let mut w = Writer::attach(key)?;
//! w.write_header(b"HDR_VERSION 1.0\n")?;
//! if w.clear_blocks() > 0 {               // never waits: a block is free
//!     let mut b = w.open_block()?;
//!     b.data()[..4].copy_from_slice(b"data");
//!     b.close(4)?;                        // the reader may read 4 bytes
//! }
//! w.end()?;                               // end of data
//! let mut r = Reader::attach(key)?;
//! let header = r.read_header()?;
//! let mut buf = vec![0u8; 4096];
//! while r.read(&mut buf)? > 0 {}
//! drop(r);
//! drop(ring);                             // destroys both blocks
//! # drop(header); Ok(()) }
//! ```
//!
//! ## Threads and blocking
//! [`Writer::open_block`] and [`Reader::read`] wait (on the library's semaphores) for a
//! clear or a full buffer; [`Writer::clear_blocks`] says first whether one is clear, so a
//! writer that must never wait (rtdaq's queue thread) asks before it opens one. Every type
//! is `Send`, none is `Sync`: one thread uses one writer or reader at a time.

pub use psrdada_sys as raw;

mod error;
mod hdu;
mod numa;
mod result;
mod ring;
pub mod slots;

pub use error::{DadaError, Result};
pub use hdu::{Block, Reader, Writer};
pub use ring::{Key, Ring, RingSpec};
pub use slots::SlotEvents;
