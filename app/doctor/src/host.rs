//! Reading the host below the root: files, the kernel command line, cpulists.

use std::path::{Path, PathBuf};

use rtdaq_platform::CpuList;

/// `root` joined with a host path (`"proc/cmdline"`, no leading `/`).
pub(crate) fn at(root: &Path, rel: &str) -> PathBuf {
    root.join(rel.trim_start_matches('/'))
}

/// A host path as shown in findings: `/` + `rel`, never the fixture root.
pub(crate) fn shown(rel: &str) -> String {
    format!("/{}", rel.trim_start_matches('/'))
}

/// A whole file, trimmed; `None` when missing or unreadable.
pub(crate) fn read(root: &Path, rel: &str) -> Option<String> {
    std::fs::read_to_string(at(root, rel))
        .ok()
        .map(|s| s.trim().to_owned())
}

/// A file holding one integer.
pub(crate) fn read_i64(root: &Path, rel: &str) -> Option<i64> {
    read(root, rel)?.parse().ok()
}

/// Online CPUs (`sys/devices/system/cpu/online`).
pub(crate) fn online_cpus(root: &Path) -> Option<CpuList> {
    CpuList::parse(&read(root, "sys/devices/system/cpu/online")?).ok()
}

/// Entries of a directory, sorted; empty when it is missing.
pub(crate) fn list_dir(root: &Path, rel: &str) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(at(root, rel))
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The parameters of `/proc/cmdline`, in order (`key=value` or a bare `key`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Cmdline {
    params: Vec<(String, Option<String>)>,
}

impl Cmdline {
    /// Reads `proc/cmdline` below `root`.
    pub(crate) fn read(root: &Path) -> Option<Self> {
        read(root, "proc/cmdline").map(|t| Self::parse(&t))
    }

    /// Splits a command line on whitespace (quoted values are not used by the parameters
    /// doctor reads).
    pub(crate) fn parse(text: &str) -> Self {
        let params = text
            .split_whitespace()
            .map(|p| match p.split_once('=') {
                Some((k, v)) => (k.to_owned(), Some(v.to_owned())),
                None => (p.to_owned(), None),
            })
            .collect();
        Self { params }
    }

    /// The value of the last `key=` (the kernel takes the last one); `Some("")` for a bare
    /// `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_deref().unwrap_or(""))
    }

    /// The CPU list of a parameter whose value may start with flags (`isolcpus=
    /// managed_irq,domain,2-13`): the comma-separated parts that start with a digit. `None`
    /// when the parameter is absent or its list does not parse.
    pub(crate) fn cpus(&self, key: &str) -> Option<CpuList> {
        let v = self.get(key)?;
        let list: Vec<&str> = v
            .split(',')
            .filter(|p| p.starts_with(|c: char| c.is_ascii_digit()))
            .collect();
        CpuList::parse(&list.join(",")).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmdline_parameters() {
        let c = Cmdline::parse(
            "BOOT_IMAGE=/boot/vmlinuz root=UUID=1 ro quiet isolcpus=2-3 \
             isolcpus=managed_irq,domain,2-13 nohz_full=2-13 rcu_nocbs irqaffinity=0-1\n",
        );
        assert_eq!(c.get("root"), Some("UUID=1"));
        assert_eq!(c.get("ro"), Some(""));
        assert_eq!(c.get("quiet"), Some(""));
        assert_eq!(c.get("nope"), None);
        assert_eq!(c.cpus("isolcpus").unwrap().to_string(), "2-13");
        assert_eq!(c.cpus("irqaffinity").unwrap().to_string(), "0-1");
        assert!(c.cpus("rcu_nocbs").unwrap().is_empty());
        assert_eq!(c.cpus("nope"), None);
    }
}
