//! GPU checks through `nvidia-smi -q`: presence, BAR1 size, clocks; and the GPUDirect path
//! (`nvidia_peermem` loaded, or the open kernel module for DMA-BUF).
//!
//! On the host (root `/`) doctor runs `nvidia-smi -q` from `PATH`. Below any other root it
//! never runs a program: it reads the file `nvidia-smi-q.txt` at the root, a captured
//! `nvidia-smi -q` output (fixtures, or a capture from the target board), and skips the
//! checks when that file is absent.

use std::path::{Path, PathBuf};
use std::process::Command;

use rtdaq_config::model::RegionKind;
use rtdaq_platform::board::GpuKind;

use crate::host;
use crate::{Ctx, Finding};

/// Name of the `nvidia-smi -q` stand-in below a root other than `/`.
pub const NVIDIA_SMI_FILE: &str = "nvidia-smi-q.txt";

/// Where the GPU facts come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSource {
    /// Run `nvidia-smi -q` (from `PATH`).
    Command,
    /// Read a captured `nvidia-smi -q` output.
    File(PathBuf),
}

impl GpuSource {
    /// [`Command`](Self::Command) for `/`, else [`File`](Self::File) `<root>/nvidia-smi-q.txt`.
    pub fn for_root(root: &Path) -> Self {
        if root == Path::new("/") {
            Self::Command
        } else {
            Self::File(root.join(NVIDIA_SMI_FILE))
        }
    }

    /// The `nvidia-smi -q` text, or why there is none (`Err(true)`: the tool is missing,
    /// a skip; `Err(false)`: it ran and failed, no usable GPU).
    fn text(&self) -> Result<String, (bool, String)> {
        match self {
            Self::Command => match Command::new("nvidia-smi").arg("-q").output() {
                Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into()),
                Ok(o) => {
                    let all = format!(
                        "{}{}",
                        String::from_utf8_lossy(&o.stdout),
                        String::from_utf8_lossy(&o.stderr)
                    );
                    let first = all.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
                    Err((false, format!("nvidia-smi -q failed: {}", first.trim())))
                }
                Err(_) => Err((true, "nvidia-smi not found".into())),
            },
            Self::File(p) => std::fs::read_to_string(p).map_err(|_| {
                (
                    true,
                    format!("nvidia-smi not found (no /{NVIDIA_SMI_FILE} stand-in under the root)"),
                )
            }),
        }
    }
}

/// One GPU of an `nvidia-smi -q` report: its bus id and every `Section/Key` → value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SmiGpu {
    pub bus_id: String,
    pub fields: Vec<(String, String)>,
}

impl SmiGpu {
    fn get(&self, key: &str) -> Option<&str> {
        self.fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A `N MiB` / `N MHz` field as N; `None` for `N/A` or a missing field.
    fn number(&self, key: &str) -> Option<u64> {
        self.get(key)?.split_whitespace().next()?.parse().ok()
    }
}

/// An `nvidia-smi -q` report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SmiReport {
    pub driver: String,
    pub gpus: Vec<SmiGpu>,
}

/// Parses `nvidia-smi -q`: top-level `Key : value` lines, then one `GPU <bus id>` block per
/// GPU with indented sections (`BAR1 Memory Usage`, `Clocks`, `Max Clocks`, ...).
pub(crate) fn parse_smi(text: &str) -> SmiReport {
    let mut r = SmiReport::default();
    let mut stack: Vec<(usize, String)> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('=') {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        if indent == 0 {
            if let Some(bus) = trimmed.strip_prefix("GPU ") {
                r.gpus.push(SmiGpu {
                    bus_id: bus.trim().to_owned(),
                    fields: Vec::new(),
                });
                stack.clear();
                continue;
            }
        }
        while stack.last().is_some_and(|(i, _)| *i >= indent) {
            stack.pop();
        }
        match trimmed.split_once(':') {
            Some((k, v)) => {
                let key = k.trim();
                let value = v.trim().to_owned();
                if indent == 0 {
                    if key == "Driver Version" {
                        r.driver = value;
                    }
                } else if let Some(g) = r.gpus.last_mut() {
                    let mut path: Vec<&str> = stack.iter().map(|(_, s)| s.as_str()).collect();
                    path.push(key);
                    g.fields.push((path.join("/"), value));
                }
            }
            None => stack.push((indent, trimmed.to_owned())),
        }
    }
    r
}

/// `gpu.present`, `gpu.bar1`, `gpu.clocks`, `gpu.direct`.
pub(crate) fn checks(ctx: &Ctx<'_>, source: &GpuSource) -> Vec<Finding> {
    let uses_gpu = ctx.config.uses_gpu();
    let board_gpu = ctx.board.map_or(GpuKind::None, |b| b.gpu);
    let needed = ctx
        .summary
        .gpus
        .iter()
        .map(|g| g.gpu + 1)
        .max()
        .unwrap_or(0) as usize;
    let mut out = Vec::new();
    let report = match source.text() {
        Ok(t) => parse_smi(&t),
        Err((true, why)) => {
            for c in ["gpu.present", "gpu.bar1", "gpu.clocks"] {
                out.push(Finding::skip(c, why.clone()));
            }
            out.push(direct(ctx));
            return out;
        }
        Err((false, why)) => {
            out.push(Finding::bad(
                "gpu.present",
                uses_gpu,
                why.clone(),
                "load the NVIDIA driver (nvidia-smi must list the GPU)".into(),
            ));
            for c in ["gpu.bar1", "gpu.clocks"] {
                out.push(Finding::skip(c, why.clone()));
            }
            out.push(direct(ctx));
            return out;
        }
    };
    out.push(present(&report, uses_gpu, board_gpu, needed));
    out.push(bar1(ctx, &report));
    out.push(clocks(&report));
    out.push(direct(ctx));
    out
}

fn present(r: &SmiReport, uses_gpu: bool, board: GpuKind, needed: usize) -> Finding {
    const C: &str = "gpu.present";
    let list: Vec<String> = r
        .gpus
        .iter()
        .enumerate()
        .map(|(i, g)| {
            format!(
                "{i}: {} ({})",
                g.get("Product Name").unwrap_or("unknown"),
                g.bus_id
            )
        })
        .collect();
    if r.gpus.len() < needed.max(usize::from(uses_gpu)) {
        return Finding::fail(
            C,
            format!(
                "{} GPU(s) found, the config's GPU regions and stages need {}",
                r.gpus.len(),
                needed.max(1)
            ),
            "install the GPU and its driver, or fix memory_regions[].gpu".into(),
        );
    }
    if r.gpus.is_empty() {
        return if board == GpuKind::None {
            Finding::pass(C, "no GPU; the config uses none".into())
        } else {
            Finding::warn(
                C,
                "nvidia-smi lists no GPU on a board that has one".into(),
                "check the NVIDIA driver installation (nvidia-smi -q)".into(),
            )
        };
    }
    Finding::pass(C, format!("{} (driver {})", list.join(", "), r.driver))
}

fn bar1(ctx: &Ctx<'_>, r: &SmiReport) -> Finding {
    const C: &str = "gpu.bar1";
    const MIB: u64 = 1 << 20;
    if r.gpus.is_empty() {
        return Finding::skip(C, "no GPU".into());
    }
    let mut ok = Vec::new();
    for (i, g) in r.gpus.iter().enumerate() {
        let need = ctx
            .summary
            .gpus
            .iter()
            .find(|s| s.gpu as usize == i)
            .map_or(0, |s| s.device_region_bytes);
        let Some(total) = g.number("BAR1 Memory Usage/Total") else {
            if need == 0 {
                ok.push(format!("GPU {i}: no BAR1 reported (integrated GPU)"));
                continue;
            }
            return Finding::fail(
                C,
                format!("GPU {i} reports no BAR1 but the config puts `device` regions on it"),
                "use host_pinned regions on an integrated GPU".into(),
            );
        };
        if need > total * MIB {
            return Finding::fail(
                C,
                format!(
                    "GPU {i}: BAR1 {total} MiB < {} MiB of `device` regions the NIC must reach",
                    need.div_ceil(MIB)
                ),
                "enable Resizable BAR (Above 4G decoding) in the firmware, or shrink the \
                 device regions"
                    .into(),
            );
        }
        if need == 0 && total < 1024 {
            return Finding::warn(
                C,
                format!("GPU {i}: BAR1 {total} MiB (< 1024 MiB): little room for GPUDirect"),
                "enable Resizable BAR (Above 4G decoding) in the firmware".into(),
            );
        }
        ok.push(if need > 0 {
            format!(
                "GPU {i}: BAR1 {total} MiB >= {} MiB of device regions",
                need.div_ceil(MIB)
            )
        } else {
            format!("GPU {i}: BAR1 {total} MiB")
        });
    }
    Finding::pass(C, ok.join("; "))
}

fn clocks(r: &SmiReport) -> Finding {
    const C: &str = "gpu.clocks";
    if r.gpus.is_empty() {
        return Finding::skip(C, "no GPU".into());
    }
    let mut ok = Vec::new();
    for (i, g) in r.gpus.iter().enumerate() {
        let (Some(sm), Some(sm_max)) = (g.number("Clocks/SM"), g.number("Max Clocks/SM")) else {
            ok.push(format!("GPU {i}: clocks not reported"));
            continue;
        };
        let mem = g.number("Clocks/Memory");
        let mem_max = g.number("Max Clocks/Memory");
        let mem_low = matches!((mem, mem_max), (Some(m), Some(mx)) if m * 10 < mx * 9);
        if sm * 10 < sm_max * 9 || mem_low {
            return Finding::warn(
                C,
                format!(
                    "GPU {i}: SM {sm} of {sm_max} MHz, memory {} of {} MHz: the GPU ramps up \
                     only after work arrives",
                    mem.map_or("?".into(), |m| m.to_string()),
                    mem_max.map_or("?".into(), |m| m.to_string())
                ),
                format!(
                    "nvidia-smi -i {i} -lgc {sm_max},{sm_max}{} (rt-tuning/tune.sh apply does it)",
                    mem_max.map_or(String::new(), |m| format!(
                        " and nvidia-smi -i {i} -lmc {m},{m}"
                    ))
                ),
            );
        }
        ok.push(format!(
            "GPU {i}: SM {sm}/{sm_max} MHz, memory {}/{} MHz",
            mem.map_or("?".into(), |m| m.to_string()),
            mem_max.map_or("?".into(), |m| m.to_string())
        ));
    }
    Finding::pass(C, ok.join("; "))
}

/// `gpu.direct`: with `device` regions, the NIC needs a way into GPU memory. The ibverbs
/// engine registers a dma-buf (the open kernel module exports one) or, failing that, the
/// address through nvidia-peermem; the DPDK engine hands the address to `rte_dev_dma_map`,
/// which mlx5 registers with `ibv_reg_mr`: that needs nvidia-peermem, whatever the module.
fn direct(ctx: &Ctx<'_>) -> Finding {
    const C: &str = "gpu.direct";
    let device = ctx
        .config
        .memory_regions
        .iter()
        .any(|r| r.kind == RegionKind::Device);
    if !device {
        return Finding::skip(
            C,
            "the config has no `device` regions (no NIC-to-GPU-memory path needed)".into(),
        );
    }
    let peermem = host::read(ctx.root, "proc/modules").is_some_and(|m| {
        m.lines()
            .any(|l| l.split_whitespace().next() == Some("nvidia_peermem"))
    });
    if peermem {
        return Finding::pass(C, "nvidia_peermem loaded (/proc/modules)".into());
    }
    let version = host::read(ctx.root, "proc/driver/nvidia/version").unwrap_or_default();
    // An engine that maps GPU memory by address (no dma-buf) needs nvidia-peermem.
    let caps = ctx.config.engine_caps();
    let by_address = caps.device_rx && !caps.dmabuf;
    if version.contains("Open Kernel Module") && !by_address {
        return Finding::pass(
            C,
            "open NVIDIA kernel module: device memory exports as DMA-BUF \
             (/proc/driver/nvidia/version)"
                .into(),
        );
    }
    let no_driver = if version.is_empty() {
        " (no /proc/driver/nvidia/version: driver not loaded)"
    } else {
        ""
    };
    if by_address {
        return Finding::fail(
            C,
            format!(
                "`device` regions on engine dpdk, but nvidia_peermem is not loaded: DPDK maps GPU memory for the NIC with rte_dev_dma_map, which the mlx5 PMD registers with ibv_reg_mr on the GPU address, and only nvidia-peermem lets the RDMA core pin GPU pages that way (DMA-BUF is not used on this path){no_driver}"
            ),
            "modprobe nvidia-peermem (and add it to /etc/modules-load.d so it loads at boot)".into(),
        );
    }
    Finding::fail(
        C,
        format!(
            "`device` regions but neither nvidia_peermem loaded nor the open kernel module{no_driver}"
        ),
        "modprobe nvidia-peermem (or install the open GPU kernel modules for DMA-BUF)".into(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMI: &str = "
==============NVSMI LOG==============

Timestamp                                 : Tue Aug 12 10:15:02 2025
Driver Version                            : 580.65.06
CUDA Version                              : 13.0

Attached GPUs                             : 1
GPU 00000005:09:00.0
    Product Name                          : NVIDIA RTX PRO 6000
    BAR1 Memory Usage
        Total                             : 131072 MiB
        Used                              : 1 MiB
    Clocks
        Graphics                          : 2280 MHz
        SM                                : 2280 MHz
        Memory                            : 14001 MHz
    Max Clocks
        Graphics                          : 3090 MHz
        SM                                : 3090 MHz
        Memory                            : 14001 MHz
";

    #[test]
    fn parses_nvidia_smi_q() {
        let r = parse_smi(SMI);
        assert_eq!(r.driver, "580.65.06");
        assert_eq!(r.gpus.len(), 1);
        let g = &r.gpus[0];
        assert_eq!(g.bus_id, "00000005:09:00.0");
        assert_eq!(g.get("Product Name"), Some("NVIDIA RTX PRO 6000"));
        assert_eq!(g.number("BAR1 Memory Usage/Total"), Some(131072));
        assert_eq!(g.number("Clocks/SM"), Some(2280));
        assert_eq!(g.number("Max Clocks/SM"), Some(3090));
        assert_eq!(g.number("Max Clocks/Memory"), Some(14001));
        assert_eq!(g.number("Clocks/Video"), None);
    }
}
