//! Running `ip` (iproute2) and reading its one-line (`-o`) output.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::TestbedError;

/// The `ip` program: the first one on `PATH`, else `/usr/sbin/ip` or `/sbin/ip` (root's `PATH`
/// under sudo may lack sbin), else plain `ip` (spawning it then fails with `NotFound`).
pub(crate) fn ip_program() -> &'static Path {
    static IP: OnceLock<PathBuf> = OnceLock::new();
    IP.get_or_init(|| {
        let on_path = std::env::var_os("PATH")
            .map(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join("ip"))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        on_path
            .into_iter()
            .chain(["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].map(PathBuf::from))
            .find(|p| p.is_file())
            .unwrap_or_else(|| PathBuf::from("ip"))
    })
}

/// Runs `program args...`; returns its stdout, or `Command` with the stderr if it failed.
/// `program` missing → `MissingTool(tool)`.
pub(crate) fn run_program<S: AsRef<OsStr>>(
    tool: &'static str,
    program: &Path,
    args: &[S],
) -> Result<String, TestbedError> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => TestbedError::MissingTool(tool),
            _ => TestbedError::Io(e),
        })?;
    check(tool, args, out)
}

fn check<S: AsRef<OsStr>>(tool: &str, args: &[S], out: Output) -> Result<String, TestbedError> {
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let mut cmd = tool.to_string();
    for a in args {
        cmd.push(' ');
        cmd.push_str(&a.as_ref().to_string_lossy());
    }
    Err(TestbedError::Command {
        cmd,
        status: out.status.code().unwrap_or(-1),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })
}

/// Runs `ip args...`.
pub(crate) fn ip<S: AsRef<OsStr>>(args: &[S]) -> Result<String, TestbedError> {
    run_program("ip", ip_program(), args)
}

/// What `ip -o link show dev IF` says about one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LinkInfo {
    pub ifindex: u32,
    pub mtu: u32,
    /// `UP`, `DOWN`, `LOWERLAYERDOWN`, `UNKNOWN`, ...
    pub state: String,
    pub mac: Option<[u8; 6]>,
}

/// Parses one line of `ip -o link show`:
/// `2: rtdaq100a@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc noqueue state UP mode
/// DEFAULT group default qlen 1000\    link/ether 02:72:74:64:00:01 brd ff:ff:ff:ff:ff:ff ...`
pub(crate) fn parse_link(line: &str) -> Option<LinkInfo> {
    let (idx, _) = line.split_once(':')?;
    let ifindex = idx.trim().parse().ok()?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |key: &str| {
        words
            .iter()
            .position(|w| *w == key)
            .and_then(|i| words.get(i + 1).copied())
    };
    let mtu = after("mtu")?.parse().ok()?;
    let state = after("state").unwrap_or("UNKNOWN").to_string();
    let mac = after("link/ether").and_then(parse_mac);
    Some(LinkInfo {
        ifindex,
        mtu,
        state,
        mac,
    })
}

/// `02:72:74:64:00:01` → bytes.
pub(crate) fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut mac {
        let p = parts.next()?;
        if p.len() != 2 {
            return None;
        }
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// Bytes → `02:72:74:64:00:01`.
pub(crate) fn format_mac(mac: [u8; 6]) -> String {
    let [a, b, c, d, e, f] = mac;
    format!("{a:02x}:{b:02x}:{c:02x}:{d:02x}:{e:02x}:{f:02x}")
}

/// `ip -n NS -o link show dev IF`, parsed.
pub(crate) fn link_info(ns: &str, ifname: &str) -> Result<LinkInfo, TestbedError> {
    let out = ip(&["-n", ns, "-o", "link", "show", "dev", ifname])?;
    parse_link(out.lines().next().unwrap_or("")).ok_or_else(|| {
        TestbedError::Io(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("cannot parse `ip -n {ns} -o link show dev {ifname}`: {out:?}"),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_veth_line() {
        let l = "2: rtdaq100a@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc noqueue \
                 state UP mode DEFAULT group default qlen 1000\\    link/ether 02:72:74:64:00:01 \
                 brd ff:ff:ff:ff:ff:ff link-netns tbx-b";
        let i = parse_link(l).unwrap();
        assert_eq!(
            i,
            LinkInfo {
                ifindex: 2,
                mtu: 9000,
                state: "UP".into(),
                mac: Some([2, 0x72, 0x74, 0x64, 0, 1]),
            }
        );
        assert_eq!(format_mac(i.mac.unwrap()), "02:72:74:64:00:01");
        let lo = "1: lo: <LOOPBACK> mtu 65536 qdisc noop state DOWN mode DEFAULT group default \
                  qlen 1000\\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00";
        assert_eq!(parse_link(lo).unwrap().mac, None);
        assert_eq!(parse_mac("02:72:74:64:00"), None);
        assert_eq!(parse_mac("02:72:74:64:00:01:02"), None);
        assert_eq!(parse_link(""), None);
    }
}
