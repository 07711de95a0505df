//! Small helpers to read and write sysfs files under a root directory (`/` in production, a
//! fixture tree in tests). Cold path only.

use std::io;
use std::path::{Path, PathBuf};

use crate::cpulist::CpuList;
use crate::error::{PlatformError, Result};

/// `root` joined with an absolute-looking sysfs path (`"sys/devices/..."`, no leading `/`).
pub(crate) fn path(root: &Path, rel: &str) -> PathBuf {
    root.join(rel.trim_start_matches('/'))
}

/// Reads a whole file; `Ok(None)` when it does not exist.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(PlatformError::ReadSysfs {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Reads a whole file that must exist.
pub(crate) fn read(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| PlatformError::ReadSysfs {
        path: path.to_owned(),
        source,
    })
}

/// Parses a cpulist file's content.
pub(crate) fn parse_cpulist(path: &Path, text: &str) -> Result<CpuList> {
    CpuList::parse(text).map_err(|_| PlatformError::ParseSysfs {
        path: path.to_owned(),
        content: text.trim().to_owned(),
        what: "expected a cpulist such as `0-3,8`",
    })
}

/// Reads a cpulist file that must exist.
pub(crate) fn read_cpulist(path: &Path) -> Result<CpuList> {
    let text = read(path)?;
    parse_cpulist(path, &text)
}

/// Reads a cpulist file; a missing file is the empty set.
pub(crate) fn read_cpulist_optional(path: &Path) -> Result<CpuList> {
    match read_optional(path)? {
        Some(text) => parse_cpulist(path, &text),
        None => Ok(CpuList::new()),
    }
}

/// Reads a file holding one unsigned number.
pub(crate) fn read_u64(path: &Path) -> Result<u64> {
    let text = read(path)?;
    text.trim()
        .parse::<u64>()
        .map_err(|_| PlatformError::ParseSysfs {
            path: path.to_owned(),
            content: text.trim().to_owned(),
            what: "expected an unsigned number",
        })
}

/// Reads a file holding one unsigned number; a missing file reads as `default`.
pub(crate) fn read_u64_or(path: &Path, default: u64) -> Result<u64> {
    if path.exists() {
        read_u64(path)
    } else {
        Ok(default)
    }
}

/// Writes `value` to a sysfs file.
pub(crate) fn write(path: &Path, value: &str) -> Result<()> {
    std::fs::write(path, value).map_err(|source| PlatformError::WriteSysfs {
        path: path.to_owned(),
        value: value.to_owned(),
        source,
    })
}
