//! The `dada_ring` stage: a queue writes what it receives into a PSRDADA ring
//! (`[[dada_rings]]`, the `dada` feature), which local readers (dspsr, heimdall, psrdada's
//! own clients, Python) attach to.
//!
//! - At start, before any thread runs: the ring is created (`create = true`, as `dada_db`
//!   makes it: data block at the key, header block at key + 1) or found, the queue's
//!   consumer locks it as the designated writer and writes the 4096-byte DADA header.
//! - Hot path (the queue's consumer, no extra thread): each payload, less `strip_bytes`, is
//!   copied whole into the ring's data blocks in place (`rtdaq_dada::Writer::try_write`);
//!   a full block goes to the readers. When the blocks a payload needs are not clear (a
//!   reader is behind), the payload, and the rest of its burst without asking the ring again,
//!   is not written and counts as **`ring_reader_behind`**:
//!   the queue never waits for a reader. A library failure counts as **`ring_error`**.
//!   Both are lost (the run's `lost`).
//! - Readers that leave in the middle of the data (killed, or unlocked early): every
//!   [`WATCH_EVERY_NS`] the consumer asks the ring about its reader slots
//!   (`rtdaq_dada::Writer::watch_readers`, a few `semctl` per reader, never waiting) and
//!   readies a left reader's slot for the next reader: the data block it held and a header
//!   whose `OBS_OFFSET` is the byte where the next reader starts. Counted per queue
//!   (`readers_left`, `readers_followed`, `readers_not_followed`) and logged by the watch.
//! - At the end: the last, partly filled block goes out and the data ends (end of data);
//!   a ring rtdaq created is removed once no reader holds it (a reader reads to the end of
//!   data, then lets go), or after [`DRAIN_WAIT`].

#[cfg(not(feature = "dada"))]
use crate::stages::Packet;
use rtdaq_config::model::DadaRing;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// How often the consumer looks for readers that left (see the [module docs](self)).
pub const WATCH_EVERY_NS: u64 = 100_000_000;

/// How long the end waits for the readers of a ring rtdaq created to read what is in it.
pub const DRAIN_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Counters of one queue's ring (the consumer writes them).
#[derive(Debug, Default)]
pub struct DadaCounters {
    /// Payloads written into the ring.
    pub payloads: AtomicU64,
    /// Bytes written.
    pub bytes: AtomicU64,
    /// Payloads not written: the blocks they needed were not clear (a reader behind).
    pub dropped_behind: AtomicU64,
    /// Payloads not written: the library failed.
    pub dropped_error: AtomicU64,
    /// Readers that left in the middle of the data.
    pub readers_left: AtomicU64,
    /// Their slots readied for the next reader.
    pub readers_followed: AtomicU64,
    /// Their slots that could not be readied (several readers, and the leaver unlocked).
    pub readers_not_followed: AtomicU64,
    /// Where the last readied slot's next reader starts (its `OBS_OFFSET`).
    pub follow_offset: AtomicU64,
}

#[cfg(feature = "dada")]
impl DadaCounters {
    fn add(c: &AtomicU64, n: u64) {
        if n > 0 {
            c.store(c.load(Relaxed) + n, Relaxed);
        }
    }
}

/// What the report says of one queue's ring.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DadaReport {
    /// The ring's name.
    pub ring: String,
    /// Its key, hexadecimal.
    pub key: String,
    /// Payloads the stage took.
    pub payloads: u64,
    /// Payloads written.
    pub written: u64,
    /// Bytes written (after the header).
    pub bytes: u64,
    /// Payloads not written, by reason: `ring_reader_behind`, `ring_error`.
    pub dropped: BTreeMap<String, u64>,
    /// The first failure of the ring, if any.
    #[serde(default)]
    pub error: Option<String>,
    /// Readers that left in the middle of the data (killed, or unlocked early).
    #[serde(default)]
    pub readers_left: u64,
    /// Of those, the slots readied for a next reader (the held block and a header with its
    /// `OBS_OFFSET` given back).
    #[serde(default)]
    pub readers_followed: u64,
    /// Of those, the slots that could not be readied (several readers, and the leaver had
    /// unlocked: a new header would reach every reader).
    #[serde(default)]
    pub readers_not_followed: u64,
}

impl DadaReport {
    /// Payloads not written.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.values().sum()
    }

    /// The report of `ring` from its counters.
    pub fn of(ring: &DadaRing, c: &DadaCounters, error: Option<String>) -> Self {
        let written = c.payloads.load(Relaxed);
        let behind = c.dropped_behind.load(Relaxed);
        let failed = c.dropped_error.load(Relaxed);
        DadaReport {
            ring: ring.name.clone(),
            key: format!("{:x}", ring.key),
            payloads: written + behind + failed,
            written,
            bytes: c.bytes.load(Relaxed),
            dropped: BTreeMap::from([
                ("ring_reader_behind".to_string(), behind),
                ("ring_error".to_string(), failed),
            ]),
            error,
            readers_left: c.readers_left.load(Relaxed),
            readers_followed: c.readers_followed.load(Relaxed),
            readers_not_followed: c.readers_not_followed.load(Relaxed),
        }
    }
}

impl std::fmt::Display for DadaReport {
    /// `dada_ring ring (key dada): 1000 of 1000 payloads written, 1.4 MB · not written:
    /// ring_error=0 ring_reader_behind=0`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "dada_ring {} (key {}): {} of {} payloads written, {:.1} MB · not written:",
            self.ring,
            self.key,
            self.written,
            self.payloads,
            self.bytes as f64 / 1e6
        )?;
        for (why, n) in &self.dropped {
            write!(f, " {why}={n}")?;
        }
        if self.readers_left > 0 {
            write!(
                f,
                " · readers left mid-run: {} (followed {}, not followed {})",
                self.readers_left, self.readers_followed, self.readers_not_followed
            )?;
        }
        if let Some(e) = &self.error {
            write!(f, " · {e}")?;
        }
        Ok(())
    }
}

/// Counts since the last publish.
#[cfg(feature = "dada")]
#[derive(Debug, Default, Clone, Copy)]
struct Pending {
    payloads: u64,
    bytes: u64,
    behind: u64,
    failed: u64,
}

/// One RX queue's ring, if it writes one: the ring's index in `config.dada_rings`, its
/// counters and its first failure.
pub type QueueRing = Option<(
    usize,
    &'static DadaCounters,
    &'static std::sync::Mutex<Option<String>>,
)>;

#[cfg(feature = "dada")]
pub use built::{prepare, DadaSink, Rings};

#[cfg(feature = "dada")]
mod built {
    use super::{DadaCounters, Pending, DRAIN_WAIT, WATCH_EVERY_NS};
    use crate::error::RuntimeError;
    use crate::stages::Packet;
    use rtdaq_config::model::{Config, DadaRing};
    use rtdaq_dada::{Key, Ring, RingSpec, Writer};
    use std::sync::atomic::Ordering::Relaxed;

    /// The consumer half: the ring's designated writer (see the [module docs](super)).
    pub struct DadaSink {
        writer: Option<Writer>,
        strip: usize,
        counters: &'static DadaCounters,
        pending: Pending,
        /// A payload found no clear block in this burst: the rest of the burst counts as
        /// behind without asking the ring again (its check is a `semctl` per reader).
        blocked: bool,
        /// The first failure, for the report.
        error: Option<&'static std::sync::Mutex<Option<String>>>,
        /// When the readers are looked at next ([`WATCH_EVERY_NS`]).
        next_watch_ns: u64,
    }

    impl DadaSink {
        /// Writes one payload whole, or counts it (see the [module docs](super)).
        #[inline]
        pub fn on_packet(&mut self, p: &Packet<'_>) {
            let data = p.payload.get(self.strip..).unwrap_or_default();
            let Some(w) = self.writer.as_mut() else {
                self.pending.failed += 1;
                return;
            };
            if self.blocked {
                self.pending.behind += 1;
                return;
            }
            match w.try_write(data) {
                Ok(true) => {
                    self.pending.payloads += 1;
                    self.pending.bytes += data.len() as u64;
                }
                Ok(false) => {
                    self.pending.behind += 1;
                    self.blocked = true;
                }
                Err(_) => self.pending.failed += 1,
            }
        }

        /// After every burst and when idle: publishes the counts; every [`WATCH_EVERY_NS`],
        /// readies the slots of readers that left (see the [module docs](super)).
        #[inline]
        pub fn tick(&mut self, now_ns: u64) {
            if now_ns >= self.next_watch_ns {
                self.next_watch_ns = now_ns + WATCH_EVERY_NS;
                self.watch_readers();
            }
            self.blocked = false;
            let p = std::mem::take(&mut self.pending);
            let c = self.counters;
            DadaCounters::add(&c.payloads, p.payloads);
            DadaCounters::add(&c.bytes, p.bytes);
            DadaCounters::add(&c.dropped_behind, p.behind);
            DadaCounters::add(&c.dropped_error, p.failed);
        }

        fn watch_readers(&mut self) {
            let Some(w) = self.writer.as_mut() else {
                return;
            };
            let ev = w.watch_readers();
            let c = self.counters;
            DadaCounters::add(&c.readers_left, u64::from(ev.left));
            DadaCounters::add(&c.readers_followed, u64::from(ev.readied));
            DadaCounters::add(&c.readers_not_followed, u64::from(ev.unready));
            if let Some(o) = ev.offset {
                c.follow_offset.store(o, Relaxed);
            }
        }

        /// End of the run: the last block goes out, the data ends.
        pub fn finish(&mut self) {
            self.tick(0);
            if let Some(w) = self.writer.take() {
                if let (Err(e), Some(slot)) = (w.end(), self.error) {
                    if let Ok(mut g) = slot.lock() {
                        g.get_or_insert(e.to_string());
                    }
                }
            }
        }

        /// The shared counters.
        pub fn counters(&self) -> &'static DadaCounters {
            self.counters
        }
    }

    /// The rings rtdaq created, removed by [`finish`](Rings::finish) (once no reader holds them,
    /// at most [`DRAIN_WAIT`] later); and each queue's counters and first failure.
    pub struct Rings {
        created: Vec<Ring>,
        /// Per RX queue (`res.rx` order).
        pub queues: Vec<super::QueueRing>,
        /// Per RX queue: its readers' counts (left, followed, not followed) last logged.
        logged: Vec<[u64; 3]>,
    }

    impl Rings {
        /// Once a second (the run's watch): logs the readers that left a ring, and whether
        /// a next reader can follow them.
        pub fn log_readers(&mut self, config: &Config) {
            for (q, seen) in self.queues.iter().zip(self.logged.iter_mut()) {
                let Some((id, c, _)) = q else { continue };
                let now = [
                    c.readers_left.load(Relaxed),
                    c.readers_followed.load(Relaxed),
                    c.readers_not_followed.load(Relaxed),
                ];
                if now == *seen {
                    continue;
                }
                let name = &config.dada_rings[*id].name;
                if now[1] > seen[1] {
                    log::info!(
                        "dada_ring {name}: a reader left in the middle of the data; the next reader to attach takes its place from byte {} (its header's OBS_OFFSET)",
                        c.follow_offset.load(Relaxed)
                    );
                }
                if now[2] > seen[2] {
                    log::warn!(
                        "dada_ring {name}: a reader unlocked in the middle of the data; with several readers no new header can reach only the next one, so a reader attaching now waits for a header until the end"
                    );
                }
                if now[0] > now[1] + now[2] {
                    log::info!(
                        "dada_ring {name}: a reader left in the middle of the data; its place is ready once every other reader has taken the header"
                    );
                }
                *seen = now;
            }
        }

        /// Waits until the readers of every created ring have read it all (or
        /// [`DRAIN_WAIT`]), then removes the rings.
        pub fn finish(self) {
            // A reader still holding a ring reads it to the end of data and lets go; a ring
            // nobody holds is not waited for.
            let t0 = std::time::Instant::now();
            while self.created.iter().any(|r| r.readers_locked() > 0) && t0.elapsed() < DRAIN_WAIT {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            drop(self.created);
        }
    }

    /// The DADA header of queue `label`'s ring.
    fn header(config: &Config, ring: &DadaRing, label: &str, sha256: &str) -> Vec<u8> {
        let now = crate::pacer::wall_clock_ns();
        let utc = crate::pacer::rfc3339_utc(now);
        let utc_start = format!(
            "{}-{}",
            utc.get(..10).unwrap_or_default(),
            utc.get(11..19).unwrap_or_default()
        );
        let mut lines = vec![
            ("HEADER", "DADA".to_string()),
            ("HDR_VERSION", "1.0".into()),
            ("HDR_SIZE", "4096".into()),
            ("DADA_VERSION", "1.0".into()),
            (
                "OBS_ID",
                format!("{}_{}", config.name, crate::record::start_field(now)),
            ),
            ("OBS_OFFSET", "0".into()),
            ("UTC_START", utc_start),
            ("MJD_START", crate::record::format::dada::mjd(now)),
        ];
        lines.extend(crate::record::format::dada::observation_lines(&ring.header));
        lines.extend([
            ("RTDAQ_CONFIG", config.name.clone()),
            ("RTDAQ_CONFIG_SHA256", sha256.to_string()),
            ("RTDAQ_QUEUE", label.to_string()),
            ("RTDAQ_RING", ring.name.clone()),
            ("STRIP_BYTES", ring.strip_bytes.to_string()),
        ]);
        let mut text = String::new();
        for (k, v) in lines {
            text.push_str(&format!("{k:<20}{v}\n"));
        }
        text.push_str("# end of header\n");
        text.into_bytes()
    }

    /// Creates (or finds) every ring and locks each for its queue's consumer, header
    /// written: the sinks per RX queue, and the rings to remove at the end.
    pub fn prepare(
        config: &Config,
        res: &crate::memory::Resources,
        sha256: &str,
    ) -> Result<(Vec<Option<DadaSink>>, Rings), RuntimeError> {
        let mut created = Vec::new();
        let mut sinks = Vec::with_capacity(res.rx.len());
        let mut queues = Vec::with_capacity(res.rx.len());
        for r in res.rx {
            let iface = &config.interfaces[r.interface];
            let q = &iface.rx_queues[r.queue];
            let Some(id) = q.dada_ring else {
                sinks.push(None);
                queues.push(None);
                continue;
            };
            let ring = &config.dada_rings[id.0];
            let fail = |e: rtdaq_dada::DadaError| RuntimeError::Egress {
                key: match e {
                    rtdaq_dada::DadaError::Numa { .. } => format!("dada_rings[{}].numa_node", id.0),
                    _ => format!("dada_rings[{}]", id.0),
                },
                message: e.to_string(),
            };
            let key = Key(ring.key);
            if let Some(s) = ring.create {
                let spec = RingSpec {
                    nbufs: u64::from(s.nbufs),
                    bufsz: s.bufsz,
                    readers: s.readers,
                    lock: s.lock,
                    numa_node: s.numa_node,
                    ..RingSpec::default()
                };
                created.push(Ring::create(key, &spec).map_err(fail)?);
            }
            let label = format!("{}.rx{}", iface.name, q.id);
            let mut w = Writer::attach(key).map_err(fail)?;
            w.write_header(&header(config, ring, &label, sha256))
                .map_err(fail)?;
            let counters: &'static DadaCounters = Box::leak(Box::default());
            let error: &'static std::sync::Mutex<Option<String>> = Box::leak(Box::default());
            log::info!(
                "{label}: writes PSRDADA ring \"{}\" (key {key}, {} blocks of {} bytes)",
                ring.name,
                w.blocks(),
                w.block_bytes()
            );
            sinks.push(Some(DadaSink {
                writer: Some(w),
                strip: ring.strip_bytes as usize,
                counters,
                pending: Pending::default(),
                blocked: false,
                error: Some(error),
                next_watch_ns: 0,
            }));
            queues.push(Some((id.0, counters, error)));
        }
        let logged = vec![[0; 3]; queues.len()];
        Ok((
            sinks,
            Rings {
                created,
                queues,
                logged,
            },
        ))
    }
}

/// Without the `dada` feature no queue has a ring stage (`config check` and `run` refuse a
/// config with `[[dada_rings]]`): `Option<DadaSink>` is always `None` and folds away.
#[cfg(not(feature = "dada"))]
pub enum DadaSink {}

/// Without the `dada` feature: no ring.
#[cfg(not(feature = "dada"))]
pub struct Rings {
    /// Per RX queue: `None`.
    pub queues: Vec<QueueRing>,
}

#[cfg(not(feature = "dada"))]
impl Rings {
    /// Nothing to remove.
    pub fn finish(self) {}
    /// No reader to log.
    pub fn log_readers(&mut self, _config: &rtdaq_config::model::Config) {}
}

/// Without the `dada` feature: a config with rings is refused (the binary's checks say so
/// first).
#[cfg(not(feature = "dada"))]
pub fn prepare(
    config: &rtdaq_config::model::Config,
    res: &crate::memory::Resources,
    _sha256: &str,
) -> Result<(Vec<Option<DadaSink>>, Rings), crate::error::RuntimeError> {
    if config.uses_dada() {
        return Err(crate::error::RuntimeError::Egress {
            key: "dada_rings[0]".into(),
            message: NOT_BUILT_WITH_DADA.into(),
        });
    }
    let sinks = res.rx.iter().map(|_| None).collect();
    let queues = res.rx.iter().map(|_| None).collect();
    Ok((sinks, Rings { queues }))
}

#[cfg(not(feature = "dada"))]
impl DadaSink {
    /// Never called: no value exists.
    pub fn on_packet(&mut self, _p: &Packet<'_>) {
        match *self {}
    }
    /// Never called.
    pub fn tick(&mut self, _now_ns: u64) {
        match *self {}
    }
    /// Never called.
    pub fn finish(&mut self) {
        match *self {}
    }
    /// Never called.
    pub fn counters(&self) -> &'static DadaCounters {
        match *self {}
    }
}

/// The message of a binary built without the `dada` feature.
pub const NOT_BUILT_WITH_DADA: &str =
    "this binary was built without `--features dada` (PSRDADA rings)";
