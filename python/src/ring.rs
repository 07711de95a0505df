//! The designated reader of a PSRDADA ring, for Python.

use crate::error::Error;
use pyo3::exceptions::{PyRuntimeError, PyTimeoutError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use rtdaq_dada::{Key, Reader, Ring};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// DadaReader(key: str, wait_s: float = 0.0)
///
/// Attaches to the PSRDADA ring at `key` (hexadecimal, as `dada_db -k` takes it) as its
/// reader, waiting up to `wait_s` seconds for a writer to create it. `header()` waits for
/// the header; `read(n)` waits for data. Both release the GIL while they wait. One reader
/// at a time holds a ring; `close()` (or dropping the object) lets the next one attach.
#[pyclass(module = "rtdaq._rtdaq")]
pub struct DadaReader {
    key: Key,
    /// A pyclass must be `Sync` (free-threaded Python): the reader, which is `Send` only,
    /// behind a mutex that one call holds at a time.
    inner: Mutex<Option<Reader>>,
}

/// The reader, or the error a closed one gives.
fn open(inner: &mut Option<Reader>) -> PyResult<&mut Reader> {
    inner
        .as_mut()
        .ok_or_else(|| PyRuntimeError::new_err("the ring reader is closed"))
}

impl DadaReader {
    fn lock(&self) -> MutexGuard<'_, Option<Reader>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[pymethods]
impl DadaReader {
    #[new]
    #[pyo3(signature = (key, wait_s = 0.0))]
    fn new(py: Python<'_>, key: &str, wait_s: f64) -> PyResult<Self> {
        let key = Key::parse(key).map_err(Error::from)?;
        let t0 = Instant::now();
        let waited_out = || t0.elapsed().as_secs_f64() >= wait_s;
        let inner = loop {
            if Ring::exists(key) {
                // The blocks' first segments exist before the writer has made the rest of
                // them (the header block's buffers come last): an attach in that moment
                // fails, and is tried again while there is time.
                match Reader::attach(key) {
                    Ok(r) => break r,
                    Err(e) if waited_out() => return Err(Error::from(e).into()),
                    Err(_) => {}
                }
            } else if waited_out() {
                return Err(PyTimeoutError::new_err(format!(
                    "no PSRDADA ring at key {key} after {wait_s} s: start the writer (rtdaq run with a dada_ring, or dada_db -k {key}) first, or wait longer"
                )));
            }
            py.detach(|| std::thread::sleep(Duration::from_millis(20)));
            py.check_signals()?;
        };
        Ok(DadaReader {
            key,
            inner: Mutex::new(Some(inner)),
        })
    }

    /// The ring's key, in hexadecimal.
    #[getter]
    fn key(&self) -> String {
        self.key.to_string()
    }

    /// Bytes of one data block.
    #[getter]
    fn block_bytes(&self) -> PyResult<u64> {
        Ok(open(&mut self.lock())?.block_bytes())
    }

    /// Data blocks in the ring.
    #[getter]
    fn blocks(&self) -> PyResult<u64> {
        Ok(open(&mut self.lock())?.blocks())
    }

    /// header() -> bytes: waits for the writer's header and returns its text.
    fn header<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let mut g = self.lock();
        let r = open(&mut g)?;
        let h = py.detach(|| r.read_header()).map_err(Error::from)?;
        Ok(PyBytes::new(py, &h))
    }

    /// read(n: int) -> tuple[bytes, int]: waits for up to `n` bytes of data (fewer only at
    /// the end of data) and returns a bytes object of `n` bytes and how many of them were
    /// read; 0 at the end of data.
    fn read<'py>(&self, py: Python<'py>, n: usize) -> PyResult<(Bound<'py, PyBytes>, usize)> {
        let mut g = self.lock();
        let r = open(&mut g)?;
        let mut got = 0;
        let b = PyBytes::new_with(py, n, |buf: &mut [u8]| {
            got = py.detach(|| r.read(buf)).map_err(Error::from)?;
            Ok(())
        })?;
        Ok((b, got))
    }

    /// behind_blocks() -> int: data blocks written for this reader and not taken yet.
    fn behind_blocks(&self) -> PyResult<u64> {
        Ok(open(&mut self.lock())?.behind_blocks())
    }

    /// drop_oldest(keep: int) -> int: between two blocks, while more than `keep` whole
    /// blocks wait, gives the oldest back to the writer unread; the bytes dropped.
    fn drop_oldest(&self, keep: u64) -> PyResult<u64> {
        Ok(open(&mut self.lock())?
            .drop_oldest(keep)
            .map_err(Error::from)?)
    }

    /// close(): unlocks and disconnects the ring (another reader may attach).
    fn close(&self) {
        *self.lock() = None;
    }
}
