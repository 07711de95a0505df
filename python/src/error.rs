//! The crate's one error type, and how it becomes a Python exception.

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::PyErr;

/// What went wrong reading a recording or a ring.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not what the reader expected.
    #[error("{path}: {why}")]
    Format {
        /// The file.
        path: String,
        /// What is wrong and what to do.
        why: String,
    },
    /// The ring could not be attached or read.
    #[error(transparent)]
    Ring(#[from] rtdaq_dada::DadaError),
}

impl From<Error> for PyErr {
    fn from(e: Error) -> PyErr {
        match e {
            Error::Io { .. } => PyOSError::new_err(e.to_string()),
            Error::Format { .. } => PyValueError::new_err(e.to_string()),
            Error::Ring(rtdaq_dada::DadaError::BadKey(_)) => PyValueError::new_err(e.to_string()),
            Error::Ring(_) => PyOSError::new_err(e.to_string()),
        }
    }
}
