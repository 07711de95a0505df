//! [`TestbedError`]: why a test bed could not be set up, and what to do about it.

use std::fmt;
use std::io;

/// Why a [`VethPair`](crate::VethPair) could not be created.
///
/// The [`Display`](fmt::Display) text says what to do (run as root, install a package, ...);
/// [`Debug`](fmt::Debug) prints the variant name followed by the same text, so
/// `VethPair::new("x").unwrap()` in a test also prints it.
pub enum TestbedError {
    /// The process is not root: creating network namespaces and veth pairs needs
    /// `CAP_SYS_ADMIN` and `CAP_NET_ADMIN`.
    NotRoot,
    /// A host prerequisite is missing: the program `ip` (package iproute2), or `8021q` (the
    /// kernel has no 802.1Q VLAN support, needed by [`Builder::vlan`](crate::Builder::vlan)).
    MissingTool(&'static str),
    /// A command failed.
    Command {
        /// The command line, as it was run.
        cmd: String,
        /// Its exit status (`-1` when it was killed by a signal).
        status: i32,
        /// Its standard error, trimmed.
        stderr: String,
    },
    /// An I/O error: a file under `/run/rtdaq-testbed/` or `/run/netns/`, a command that could
    /// not be started, a bad argument (`InvalidInput`), a link that never came up (`TimedOut`),
    /// no free 169.254.X subnet left.
    Io(io::Error),
}

impl fmt::Display for TestbedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TestbedError::NotRoot => f.write_str(
                "the rtdaq network-namespace test bed needs root: run the namespace tests as root \
                 (they create network namespaces and veth pairs), e.g. `sudo -E cargo test`, or \
                 `scripts/test.sh` as root",
            ),
            TestbedError::MissingTool("ip") => f.write_str(
                "the `ip` program was not found: install iproute2 (`apt-get install iproute2`); \
                 the test bed runs `ip netns` and `ip link`",
            ),
            TestbedError::MissingTool("8021q") => f.write_str(
                "this kernel has no 802.1Q VLAN support (`ip link add ... type vlan` says \
                 \"Unknown device type\"): load the module (`modprobe 8021q`) or use a kernel \
                 built with CONFIG_VLAN_8021Q; `rtdaq_testbed::vlan_supported()` tells in advance",
            ),
            TestbedError::MissingTool(tool) => {
                write!(
                    f,
                    "`{tool}` is missing on this host: install it and run the test again"
                )
            }
            TestbedError::Command {
                cmd,
                status,
                stderr,
            } => {
                write!(f, "`{cmd}` failed with exit status {status}")?;
                if !stderr.is_empty() {
                    write!(f, ": {stderr}")?;
                }
                Ok(())
            }
            TestbedError::Io(e) => write!(f, "test bed: {e}"),
        }
    }
}

impl fmt::Debug for TestbedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self {
            TestbedError::NotRoot => "NotRoot",
            TestbedError::MissingTool(_) => "MissingTool",
            TestbedError::Command { .. } => "Command",
            TestbedError::Io(_) => "Io",
        };
        write!(f, "{name}: {self}")
    }
}

impl std::error::Error for TestbedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TestbedError::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for TestbedError {
    fn from(e: io::Error) -> Self {
        TestbedError::Io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_say_what_to_do() {
        let s = TestbedError::NotRoot.to_string();
        assert!(s.contains("run the namespace tests as root"), "{s}");
        assert!(format!("{:?}", TestbedError::NotRoot).starts_with("NotRoot: the rtdaq"));
        assert!(TestbedError::MissingTool("ip")
            .to_string()
            .contains("apt-get install iproute2"));
        assert!(TestbedError::MissingTool("8021q")
            .to_string()
            .contains("CONFIG_VLAN_8021Q"));
        let c = TestbedError::Command {
            cmd: "ip netns add x".into(),
            status: 1,
            stderr: "File exists".into(),
        };
        assert_eq!(
            c.to_string(),
            "`ip netns add x` failed with exit status 1: File exists"
        );
    }
}
