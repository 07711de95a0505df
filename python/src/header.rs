//! PSRDADA ASCII headers.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The `KEY value` lines of `text` (up to its first NUL): the key is a line's first word,
/// the value the rest of the line, trimmed; blank lines and lines starting with `#` are
/// skipped. A key given twice keeps its last value, as psrdada's `ascii_header_set` would
/// have replaced it.
pub fn parse(text: &[u8]) -> Vec<(String, String)> {
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    let text = String::from_utf8_lossy(&text[..end]);
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (k, v) = match line.split_once(char::is_whitespace) {
            Some((k, v)) => (k, v.trim()),
            None => (line, ""),
        };
        match out.iter_mut().find(|(key, _)| key == k) {
            Some(slot) => slot.1 = v.to_string(),
            None => out.push((k.to_string(), v.to_string())),
        }
    }
    out
}

/// parse_dada_header(text: bytes) -> dict[str, str]
///
/// The keys and values of a PSRDADA ASCII header (up to its first NUL), in order.
#[pyfunction]
pub fn parse_dada_header<'py>(py: Python<'py>, text: &[u8]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in parse(text) {
        d.set_item(k, v)?;
    }
    Ok(d)
}
