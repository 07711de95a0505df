//! Triggered dumps (`[[dumps]]`): every RX queue naming a dump keeps the packets it received
//! last in a preallocated RAM history ([`history`]); a trigger writes those of a time window
//! to one pcap file per queue and a JSON index naming the window, as pulsar/FRB systems do
//! when a detection pipeline sees a candidate.
//!
//! - **History**: `history_packets` pcap records per queue, the newest replacing the
//!   oldest, kept by the queue's `dump` stage (hot path: one `try_lock` and one copy per
//!   packet; see [`history`]). Memory: `history_packets × slot`, allocated before the
//!   threads start and locked with the rest of the process.
//! - **Triggers** ([`trigger`]): `POST /trigger?dump=NAME&last_ms=500` (or
//!   `&start_ns=..&end_ns=..`, Unix ns) on the metrics endpoint, answered when the dump is
//!   written, with its index; a datagram `last_ms=500` or `start_ns=..&end_ns=..` to
//!   `udp_trigger`; SIGUSR1 (the last `signal_window_ms`, or all the history holds). A
//!   window that ends in the future is dumped once it has passed.
//! - **Dump thread** (one per `[[dumps]]` entry, unpinned, normal scheduler: it never
//!   touches a queue's core): for each queue it takes the history's lock, writes the
//!   records whose receive time lies in the window, oldest first, to
//!   `<dir>/<dump>-<start>-<n>-<interface>-rx<q>.pcap` (`<start>`: the run's,
//!   `20261206T223800Z`), and lets go; then writes the index
//!   `<dir>/<dump>-<start>-<n>.json`. While it holds a history, that queue's packets are
//!   not kept
//!   (counted `not_kept`; they were received and go on through the other stages as
//!   always): a later window over that time is marked `complete: false`, as is a window
//!   that reaches back before the oldest packet a history holds.

pub mod history;
mod report;
pub mod trigger;

pub use history::{DumpStage, History};
pub use report::{DumpReport, DumpedQueue};
pub use trigger::{Triggers, Window};

use crate::error::RuntimeError;
use crate::record::format::{pcap::Pcap, Link};
use rtdaq_config::model::{Address, Config, Dump};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::Receiver;
use std::sync::Mutex;
use std::time::Duration;

/// The histories of one dump's queues.
struct Queues {
    dump: usize,
    /// `(label, history)`: `lo_udp.rx0`.
    histories: Vec<(String, &'static History)>,
}

/// Every dump's histories, before the run starts its dump threads.
pub struct Dumps {
    dumps: Vec<Queues>,
    /// The run's start (`20261206T223800Z`) in every file name: a later run's dumps never
    /// overwrite an earlier run's.
    stamp: String,
    /// Raised at the end of the run: a dump waiting for its window to pass writes now.
    stopping: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Every history: its dump, queue label, counters (kept for `/metrics`).
    all: Vec<(usize, String, &'static History)>,
    dirs: Vec<PathBuf>,
    threads: Vec<std::thread::JoinHandle<Vec<DumpReport>>>,
    triggers: Option<Triggers>,
}

/// Each RX queue's `dump` stage (in `res.rx` order) and the dumps' histories: memory
/// allocated, directories made. A history that cannot be allocated, or a directory that
/// cannot be made, stops the start naming its key.
pub fn prepare(
    config: &Config,
    res: &crate::memory::Resources,
    output_dir: Option<&Path>,
    frames: bool,
) -> Result<(Vec<Option<DumpStage>>, Dumps), RuntimeError> {
    let mut dumps: Vec<Queues> = (0..config.dumps.len())
        .map(|dump| Queues {
            dump,
            histories: Vec::new(),
        })
        .collect();
    let mut stages = Vec::with_capacity(res.rx.len());
    for r in res.rx {
        let iface = &config.interfaces[r.interface];
        let q = &iface.rx_queues[r.queue];
        let Some(id) = q.dump else {
            stages.push(None);
            continue;
        };
        let d = &config.dumps[id.0];
        let ring = history::Ring::new(d.history_packets as usize, d.slot_bytes as usize)
            .map_err(|e| RuntimeError::Dump {
                key: format!("dumps[{}].history_packets", id.0),
                message: format!(
                    "cannot allocate the history of {} packets x {} bytes ({e}); keep fewer packets",
                    d.history_packets, d.slot_bytes
                ),
            })?;
        let history: &'static History = Box::leak(Box::new(History {
            ring: Mutex::new(ring),
            kept: Default::default(),
            not_kept: Default::default(),
        }));
        let dst = match &iface.address {
            Address::Socket(u) => (u.ip.octets(), u.port),
            _ => ([0; 4], 0),
        };
        let snaplen = d.slot_bytes as usize;
        stages.push(Some(DumpStage::new(
            history,
            Pcap::with(snaplen, Link { frames, dst }),
        )));
        dumps[id.0]
            .histories
            .push((format!("{}.rx{}", iface.name, q.id), history));
    }
    let mut dirs = Vec::with_capacity(config.dumps.len());
    for (k, d) in config.dumps.iter().enumerate() {
        let dir = output_dir.map_or_else(|| d.directory.clone(), Path::to_path_buf);
        std::fs::create_dir_all(&dir).map_err(|e| RuntimeError::Dump {
            key: if output_dir.is_some() {
                "--output-dir".into()
            } else {
                format!("dumps[{k}].directory")
            },
            message: format!("cannot create {}: {e}", dir.display()),
        })?;
        dirs.push(dir);
    }
    Ok((
        stages,
        Dumps {
            stamp: crate::record::start_field(crate::pacer::wall_clock_ns()),
            stopping: Default::default(),
            all: dumps
                .iter()
                .flat_map(|q| q.histories.iter().map(|(l, h)| (q.dump, l.clone(), *h)))
                .collect(),
            dumps,
            dirs,
            threads: Vec::new(),
            triggers: None,
        },
    ))
}

impl Dumps {
    /// Every history, for `/metrics`: `lo_udp.rx0 dump candidates` and its counters.
    pub fn histories(&self, config: &Config) -> Vec<(String, &'static History)> {
        self.all
            .iter()
            .map(|(d, label, h)| (format!("{label} dump {}", config.dumps[*d].name), *h))
            .collect()
    }

    /// The running triggers (after [`start`](Self::start)), for the metrics endpoint.
    pub fn triggers(&self) -> Option<Triggers> {
        self.triggers.clone()
    }

    /// Starts the dump threads and the triggers (the UDP listeners, SIGUSR1); the handle
    /// the metrics endpoint takes `POST /trigger` with. A trigger that cannot start (the
    /// UDP address is taken, no SIGUSR1 handler) stops the start naming its key.
    pub fn start(&mut self, config: &Config) -> Result<Option<Triggers>, RuntimeError> {
        if self.dumps.is_empty() || self.triggers.is_some() {
            return Ok(self.triggers.clone());
        }
        let (triggers, inboxes) = Triggers::new(config)?;
        for (q, inbox) in std::mem::take(&mut self.dumps).into_iter().zip(inboxes) {
            let d = config.dumps[q.dump].clone();
            let out = Output {
                dir: self.dirs[q.dump].clone(),
                prefix: format!("{}-{}", d.name, self.stamp),
            };
            let stopping = std::sync::Arc::clone(&self.stopping);
            let h = std::thread::Builder::new()
                .name(format!("dump {}", d.name))
                .spawn(move || dumper(&d, &out, &q.histories, (&inbox, &stopping)))
                .map_err(|e| RuntimeError::Dump {
                    key: format!("dumps[{}]", q.dump),
                    message: format!("cannot start its thread: {e}"),
                })?;
            self.threads.push(h);
        }
        self.triggers = Some(triggers.clone());
        Ok(Some(triggers))
    }

    /// Stops the triggers and the dump threads (a dump in progress is finished first):
    /// every dump written, per dump entry.
    pub fn finish(mut self) -> Vec<DumpReport> {
        self.stopping.store(true, Relaxed);
        if let Some(t) = self.triggers.take() {
            t.stop();
        }
        self.threads
            .drain(..)
            .flat_map(|h| match h.join() {
                Ok(r) => r,
                Err(_) => {
                    log::error!("a dump thread panicked: its dumps are not in the report");
                    Vec::new()
                }
            })
            .collect()
    }
}

/// A packet's receive time may lie this much before the moment its consumer found the
/// history held (an indirect queue's consumer lags its I/O thread by its ring).
const CONSUMER_LAG_NS: u64 = 200_000_000;

/// Where a dump's files go: `<dir>/<prefix>-<n>...` (`candidates-20261206T223800Z-1.json`).
struct Output {
    dir: PathBuf,
    prefix: String,
}

impl Output {
    fn path(&self, number: u32, rest: &str) -> PathBuf {
        self.dir.join(format!("{}-{number}{rest}", self.prefix))
    }
}

/// The dump thread of `d`: one dump per trigger until the triggers stop (their senders
/// gone, the inbox ends).
fn dumper(
    d: &Dump,
    out: &Output,
    histories: &[(String, &'static History)],
    (inbox, stopping): (&Receiver<trigger::Request>, &std::sync::atomic::AtomicBool),
) -> Vec<DumpReport> {
    let mut done = Vec::new();
    // When this thread held each history (wall clock): its packets were not kept then.
    let mut held: Vec<Vec<(u64, u64)>> = vec![Vec::new(); histories.len()];
    while let Ok(req) = inbox.recv() {
        let (start_ns, end_ns) = req.window.resolve();
        // A window that ends in the future: wait until it has passed (and its packets
        // went through the consumers), or the run ends.
        while crate::pacer::wall_clock_ns() < end_ns.saturating_add(100_000_000)
            && !stopping.load(Relaxed)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        let number = done.len() as u32 + 1;
        let index = out.path(number, ".json");
        let result = write_dump(d, out, histories, (number, start_ns, end_ns), &mut held)
            .map(|queues| {
                let complete = queues.iter().all(|q| q.complete);
                DumpReport {
                    dump: d.name.clone(),
                    number,
                    trigger: req.source.to_string(),
                    start_ns,
                    end_ns,
                    index: index.display().to_string(),
                    queues,
                    complete,
                }
            })
            .and_then(|r| {
                let text = serde_json::to_string_pretty(&r).unwrap_or_default();
                std::fs::write(&index, text + "\n")
                    .map_err(|e| format!("cannot write {}: {e}", index.display()))?;
                Ok(r)
            });
        match &result {
            Ok(r) => {
                let packets: u64 = r.queues.iter().map(|q| q.packets).sum();
                log::info!(
                    "dump {} #{number} ({} trigger): {packets} packets of {:.3} s in {}{}",
                    d.name,
                    r.trigger,
                    (end_ns.saturating_sub(start_ns)) as f64 / 1e9,
                    r.index,
                    if r.complete { "" } else { " (incomplete)" }
                );
                done.push(r.clone());
            }
            Err(e) => log::error!("dump {} ({} trigger): {e}", d.name, req.source),
        }
        if let Some(reply) = req.reply {
            let _ = reply.send(result);
        }
    }
    done
}

/// Writes one dump's pcap files (one per queue); `held[k]` gathers when this thread held
/// history `k`.
fn write_dump(
    d: &Dump,
    out: &Output,
    histories: &[(String, &'static History)],
    (number, start_ns, end_ns): (u32, u64, u64),
    held: &mut [Vec<(u64, u64)>],
) -> Result<Vec<DumpedQueue>, String> {
    let mut parts = Vec::with_capacity(histories.len());
    for ((label, h), held) in histories.iter().zip(held.iter_mut()) {
        let path = out.path(number, &format!("-{}.pcap", label.replace('.', "-")));
        let file = std::fs::File::create(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        let mut w = std::io::BufWriter::with_capacity(1 << 20, file);
        let header = rtdaq_core::wire::pcap::PcapFileHeader::new(
            d.slot_bytes,
            rtdaq_core::wire::pcap::LINKTYPE_ETHERNET,
        );
        let since = crate::pacer::wall_clock_ns();
        let ring = h
            .ring
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let held_range = ring.held();
        let oldest = if held_range.is_empty() {
            0
        } else {
            ring.time(held_range.start)
        };
        let mut part = DumpedQueue {
            queue: label.clone(),
            file: path.display().to_string(),
            packets: 0,
            first_ns: 0,
            last_ns: 0,
            oldest_held_ns: oldest,
            kept: h.kept.load(Relaxed),
            not_kept: h.not_kept.load(Relaxed),
            complete: true,
            why_incomplete: None,
        };
        let mut io = w.write_all(&header.to_bytes());
        for n in held_range.clone() {
            let t = ring.time(n);
            if t < start_ns || t > end_ns {
                continue;
            }
            io = io.and_then(|()| w.write_all(ring.record(n)));
            if io.is_err() {
                break;
            }
            if part.packets == 0 {
                part.first_ns = t;
            }
            part.last_ns = t;
            part.packets += 1;
        }
        let full = held_range.end >= held_range.start + u64::from(d.history_packets);
        drop(ring);
        held.push((since, crate::pacer::wall_clock_ns()));
        io.and_then(|()| w.flush())
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        // Complete: the history reached back to the window's start (it had not wrapped, or
        // its oldest packet is older), and no earlier dump held it during the window.
        if full && oldest > start_ns {
            part.complete = false;
            part.why_incomplete = Some(format!(
                "the history reached back only to {oldest} ns ({:.3} s after the window's start): keep more history_packets",
                (oldest - start_ns) as f64 / 1e9
            ));
        } else if h.not_kept.load(Relaxed) > 0
            && held[..held.len() - 1]
                .iter()
                .any(|&(a, b)| a.saturating_sub(CONSUMER_LAG_NS) <= end_ns && b >= start_ns)
        {
            part.complete = false;
            part.why_incomplete = Some(
                "an earlier dump held the history during the window: packets of it were not kept"
                    .into(),
            );
        }
        parts.push(part);
    }
    Ok(parts)
}

#[cfg(test)]
mod tests;
