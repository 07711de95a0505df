//! [`CpuList`]: a set of CPU (or NUMA node) numbers in the kernel's cpulist format.
//!
//! The kernel writes sets as `0-3,8,10-11` (sysfs `online`, `isolated`, `nohz_full`,
//! `node*/cpulist`, the `isolcpus=` command line). An empty file or `(null)` (what
//! `nohz_full` prints when the feature is off) is the empty set.

use std::fmt;

/// A sorted set of CPU or NUMA node numbers, printed in cpulist format (`0-3,8`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuList(Vec<usize>);

/// The text was not a cpulist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuListParseError;

impl fmt::Display for CpuListParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("expected a cpulist such as `0-3,8`")
    }
}

impl std::error::Error for CpuListParseError {}

/// Largest number accepted in a cpulist (guards against `0-4294967295` allocating gigabytes).
const MAX_ID: usize = 1 << 20;

impl CpuList {
    /// The empty set.
    pub fn new() -> Self {
        Self(Vec::new())
    }

    /// Parses the kernel cpulist format: comma-separated numbers and `a-b` ranges. The
    /// `a-b:used/group` stride form (boot parameters only, never printed by sysfs) is rejected.
    /// Whitespace around the text is ignored; an empty text and `(null)` give the empty set.
    ///
    /// # Errors
    /// [`CpuListParseError`] when the text is not a cpulist.
    pub fn parse(text: &str) -> Result<Self, CpuListParseError> {
        let text = text.trim();
        if text.is_empty() || text == "(null)" {
            return Ok(Self::new());
        }
        let mut ids = Vec::new();
        for part in text.split(',') {
            let part = part.trim();
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (parse_id(a)?, parse_id(b)?),
                None => {
                    let n = parse_id(part)?;
                    (n, n)
                }
            };
            if lo > hi {
                return Err(CpuListParseError);
            }
            ids.extend(lo..=hi);
        }
        Ok(Self::from_ids(ids))
    }

    /// Builds a set from numbers in any order (duplicates are dropped).
    pub fn from_ids(ids: impl IntoIterator<Item = usize>) -> Self {
        let mut v: Vec<usize> = ids.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        Self(v)
    }

    /// True when `id` is in the set.
    pub fn contains(&self, id: usize) -> bool {
        self.0.binary_search(&id).is_ok()
    }

    /// Number of members.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// True when the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The members, ascending.
    pub fn as_slice(&self) -> &[usize] {
        &self.0
    }

    /// Iterates over the members, ascending.
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        self.0.iter().copied()
    }
}

fn parse_id(s: &str) -> Result<usize, CpuListParseError> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(CpuListParseError);
    }
    match s.parse::<usize>() {
        Ok(n) if n <= MAX_ID => Ok(n),
        _ => Err(CpuListParseError),
    }
}

impl fmt::Display for CpuList {
    /// Compressed cpulist form (`0-3,8`); the empty set prints as `none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let mut i = 0;
        let mut first = true;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl FromIterator<usize> for CpuList {
    fn from_iter<I: IntoIterator<Item = usize>>(iter: I) -> Self {
        Self::from_ids(iter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kernel_forms() {
        assert_eq!(
            CpuList::parse("0-3,8\n").unwrap().as_slice(),
            &[0, 1, 2, 3, 8]
        );
        assert_eq!(CpuList::parse("5").unwrap().as_slice(), &[5]);
        assert!(CpuList::parse("").unwrap().is_empty());
        assert!(CpuList::parse("\n").unwrap().is_empty());
        assert!(CpuList::parse("(null)\n").unwrap().is_empty());
        assert_eq!(CpuList::parse("3,1-2,2").unwrap().as_slice(), &[1, 2, 3]);
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["a", "1-", "-1", "3-1", "1,,2", "0-99999999", "1:2", "+1"] {
            assert!(CpuList::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn formats_compressed() {
        assert_eq!(
            CpuList::from_ids([0, 1, 2, 3, 8, 10, 11]).to_string(),
            "0-3,8,10-11"
        );
        assert_eq!(CpuList::new().to_string(), "none");
        let round = CpuList::parse("0-2,4,6-7").unwrap();
        assert_eq!(CpuList::parse(&round.to_string()).unwrap(), round);
    }
}
