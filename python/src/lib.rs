//! # rtdaq-python: the native half of the `rtdaq` Python package
//!
//! `pip install ./python` builds this crate with maturin into `rtdaq._rtdaq`; the Python
//! package around it (`python/rtdaq`) memory-maps recordings into numpy arrays and gives
//! them their metadata. Rust does what Python would do slowly or could not do at all:
//!
//! | function / class | what |
//! |---|---|
//! | `scan_pcap` (`pcap.rs`) | walks a pcap file's record headers (and each frame's Ethernet/VLAN/IP/UDP headers) into a table of 32-byte rows: where each frame and its UDP payload lie, time, lengths; resumable at a byte offset, so a file being written can be followed |
//! | `parse_dada_header` (`header.rs`) | a PSRDADA ASCII header into a dict of strings |
//! | `DadaReader` (`ring.rs`) | the designated reader of a PSRDADA ring (through `rtdaq-dada`, the psrdada C library): its header, then its data into `bytes` objects numpy views without a copy |
//!
//! Waits (a ring's next header or data) release the GIL.

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod error;
mod header;
mod pcap;
mod ring;

use pyo3::prelude::*;

/// The module `rtdaq._rtdaq`.
#[pymodule]
fn _rtdaq(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pcap::scan_pcap, m)?)?;
    m.add_function(wrap_pyfunction!(header::parse_dada_header, m)?)?;
    m.add_class::<ring::DadaReader>()?;
    m.add("PCAP_ROW_BYTES", pcap::ROW_BYTES)?;
    m.add("NO_PAYLOAD", pcap::NO_PAYLOAD)?;
    Ok(())
}
