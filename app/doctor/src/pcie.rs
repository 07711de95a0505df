//! PCIe Max Read Request Size and Max Payload Size of a NIC, from its config space.
//!
//! What is read: `sys/bus/pci/devices/<bdf>/config`, the device's configuration space as
//! the kernel exposes it (256 bytes for conventional PCI, 4096 for PCIe; **only the first 64
//! bytes for a process without `CAP_SYS_ADMIN`**, which hides the capability list). The
//! standard header gives the vendor/device ids (offsets 0x00/0x02), the Status register
//! (0x06, bit 4: capability list present) and the Capabilities Pointer (0x34). The list is
//! walked to the PCI Express capability (id 0x10), whose
//! - Device Capabilities register (capability + 0x04), bits 2:0, is the largest Max Payload
//!   Size the device supports;
//! - Device Control register (capability + 0x08), bits 7:5, is the Max Payload Size in use
//!   and bits 14:12 the Max Read Request Size.
//!
//! Each 3-bit field encodes `128 << n` bytes. This is what `lspci -vvv` shows as `DevCap:
//! MaxPayload` and `DevCtl: MaxPayload ... MaxReadReq`, and what `setpci CAP_EXP+8.w`
//! writes.

use crate::host::{self, shown};
use crate::net::Port;
use crate::{Ctx, Finding};

/// PCI Express facts of one function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PcieDevice {
    /// Vendor id (0x15b3: Mellanox/NVIDIA networking).
    pub vendor: u16,
    /// Device id (0x1021: ConnectX-7).
    pub device: u16,
    /// Offset of the PCI Express capability in config space.
    pub cap_offset: u8,
    /// Max Payload Size in use, bytes (DevCtl 7:5).
    pub mps: u32,
    /// Largest Max Payload Size supported, bytes (DevCap 2:0).
    pub mps_supported: u32,
    /// Max Read Request Size, bytes (DevCtl 14:12).
    pub mrrs: u32,
}

/// Why the PCI Express capability could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcieParseError {
    /// Config space shorter than the standard header plus the capability (an unprivileged
    /// read returns 64 bytes).
    Truncated(usize),
    /// No capability list, or no PCI Express capability in it.
    NotPcie,
}

fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_le_bytes([*b.get(off)?, *b.get(off + 1)?]))
}

fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_le_bytes([
        *b.get(off)?,
        *b.get(off + 1)?,
        *b.get(off + 2)?,
        *b.get(off + 3)?,
    ]))
}

/// Parses the PCI Express capability out of a config-space dump.
///
/// # Errors
/// [`PcieParseError`] when the dump is too short or the function is not PCI Express.
pub fn parse_pcie_capability(cfg: &[u8]) -> Result<PcieDevice, PcieParseError> {
    let truncated = PcieParseError::Truncated(cfg.len());
    let vendor = u16_at(cfg, 0x00).ok_or(truncated)?;
    let device = u16_at(cfg, 0x02).ok_or(truncated)?;
    let status = u16_at(cfg, 0x06).ok_or(truncated)?;
    if status & 0x10 == 0 {
        return Err(PcieParseError::NotPcie);
    }
    let mut ptr = usize::from(*cfg.get(0x34).ok_or(truncated)? & 0xfc);
    // At most 48 capabilities fit in the 256-byte region; stop on a loop.
    for _ in 0..48 {
        if ptr < 0x40 {
            return Err(PcieParseError::NotPcie);
        }
        let id = *cfg.get(ptr).ok_or(truncated)?;
        let next = *cfg.get(ptr + 1).ok_or(truncated)?;
        if id == 0x10 {
            let devcap = u32_at(cfg, ptr + 4).ok_or(truncated)?;
            let devctl = u16_at(cfg, ptr + 8).ok_or(truncated)?;
            let size = |code: u32| 128u32 << code.min(5);
            return Ok(PcieDevice {
                vendor,
                device,
                cap_offset: ptr as u8,
                mps_supported: size(devcap & 0x7),
                mps: size(u32::from(devctl >> 5) & 0x7),
                mrrs: size(u32::from(devctl >> 12) & 0x7),
            });
        }
        ptr = usize::from(next & 0xfc);
    }
    Err(PcieParseError::NotPcie)
}

/// `pcie.mrrs:<if>` and `pcie.mps:<if>`.
pub(crate) fn checks(ctx: &Ctx<'_>, port: &Port<'_>) -> Vec<Finding> {
    let name = &port.iface.name;
    let (cm, cp) = (format!("pcie.mrrs:{name}"), format!("pcie.mps:{name}"));
    let Some(bdf) = &port.pci else {
        return vec![
            Finding::skip(&cm, port.no_pci.clone()),
            Finding::skip(&cp, port.no_pci.clone()),
        ];
    };
    let rel = format!("sys/bus/pci/devices/{bdf}/config");
    let dev = match std::fs::read(host::at(ctx.root, &rel)).map(|b| parse_pcie_capability(&b)) {
        Ok(Ok(d)) => d,
        Ok(Err(PcieParseError::Truncated(n))) => {
            let f = |c: &str| {
                Finding::warn(
                    c,
                    format!(
                        "{bdf}: only {n} bytes of {} readable, the PCI Express capability is \
                         beyond them (config space past 64 bytes needs root)",
                        shown(&rel)
                    ),
                    "run rtdaq doctor as root (or lspci -vvv -s BDF as root)".into(),
                )
            };
            return vec![f(&cm), f(&cp)];
        }
        Ok(Err(PcieParseError::NotPcie)) => {
            let why = format!("{bdf} has no PCI Express capability");
            return vec![Finding::skip(&cm, why.clone()), Finding::skip(&cp, why)];
        }
        Err(e) => {
            let f = |c: &str| {
                Finding::warn(
                    c,
                    format!("cannot read {}: {e}", shown(&rel)),
                    "run rtdaq doctor as root".into(),
                )
            };
            return vec![f(&cm), f(&cp)];
        }
    };
    let ids = format!("{bdf} [{:04x}:{:04x}]", dev.vendor, dev.device);
    let target = ctx.board.map_or(4096, |b| b.tuning.mrrs);
    let code = (target / 128).trailing_zeros();
    let mrrs = if dev.mrrs >= target {
        Finding::pass(&cm, format!("{ids}: MaxReadReq {} bytes", dev.mrrs))
    } else {
        Finding::bad(
            &cm,
            ctx.board.is_some(),
            format!(
                "{ids}: MaxReadReq {} bytes < {target}: the NIC reads TX data from memory in \
                 small requests, which caps throughput",
                dev.mrrs
            ),
            format!(
                "setpci -s {bdf} CAP_EXP+8.w={:x}000:7000 (MaxReadReq {target}; \
                 rt-tuning/tune.sh apply does it; lost on reset)",
                code
            ),
        )
    };
    let mps = if dev.mps >= dev.mps_supported {
        Finding::pass(
            &cp,
            format!("{ids}: MaxPayload {} bytes (the device's maximum)", dev.mps),
        )
    } else {
        Finding::warn(
            &cp,
            format!(
                "{ids}: MaxPayload {} of {} bytes supported: every DMA write is split into \
                 smaller TLPs",
                dev.mps, dev.mps_supported
            ),
            "boot with pci=pcie_bus_perf (MPS is set to the smallest along the path: check \
             the root port with lspci -vvv)"
                .into(),
        )
    };
    vec![mrrs, mps]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 4096-byte config space with a PM capability at 0x40 and the PCIe capability at 0x60.
    fn space(devcap: u32, devctl: u16) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        b[0..2].copy_from_slice(&0x15b3u16.to_le_bytes());
        b[2..4].copy_from_slice(&0x1021u16.to_le_bytes());
        b[6..8].copy_from_slice(&0x0010u16.to_le_bytes());
        b[0x34] = 0x40;
        b[0x40] = 0x01; // power management
        b[0x41] = 0x60;
        b[0x60] = 0x10;
        b[0x61] = 0x00;
        b[0x64..0x68].copy_from_slice(&devcap.to_le_bytes());
        b[0x68..0x6a].copy_from_slice(&devctl.to_le_bytes());
        b
    }

    #[test]
    fn parses_mps_and_mrrs() {
        // DevCap MPS 512 (2); DevCtl MPS 256 (1 << 5), MRRS 4096 (5 << 12).
        let d = parse_pcie_capability(&space(0x2, (1 << 5) | (5 << 12))).unwrap();
        assert_eq!((d.vendor, d.device, d.cap_offset), (0x15b3, 0x1021, 0x60));
        assert_eq!((d.mps, d.mps_supported, d.mrrs), (256, 512, 4096));
        let d = parse_pcie_capability(&space(0x2, (2 << 5) | (2 << 12))).unwrap();
        assert_eq!((d.mps, d.mrrs), (512, 512));
    }

    #[test]
    fn truncated_and_non_pcie() {
        let full = space(0x2, 0);
        assert_eq!(
            parse_pcie_capability(&full[..64]),
            Err(PcieParseError::Truncated(64))
        );
        let mut no_caps = full.clone();
        no_caps[6] = 0;
        assert_eq!(
            parse_pcie_capability(&no_caps),
            Err(PcieParseError::NotPcie)
        );
        let mut looped = full;
        looped[0x41] = 0x40; // PM points to itself
        looped[0x40] = 0x01;
        assert_eq!(parse_pcie_capability(&looped), Err(PcieParseError::NotPcie));
    }
}
