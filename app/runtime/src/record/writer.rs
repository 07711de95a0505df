//! The writer half of a sink: one thread that writes the sink's buffers to its files in
//! order, rotates files, writes each file's index, and turns every failure into counted,
//! reported drops (never a silent gap).

use super::common::{SinkCounters, SinkInfo, ALIGN};
use super::format::{AnyFormat, FileFacts, Format};
use super::sink::{IndexDelta, RecBuf};
use rtdaq_core::slot_ring::SlotConsumer;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::PathBuf;
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};
use std::time::{Duration, Instant};

/// How long an idle writer sleeps before it looks at the ring again.
const IDLE: Duration = Duration::from_micros(200);

/// One file a sink wrote (also its sidecar index, `FILE.index.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct FileReport {
    /// Path of the file.
    pub path: String,
    /// Packets whose complete records are in the file.
    pub packets: u64,
    /// Bytes of the file (headers included).
    pub bytes: u64,
    /// Stream id of the sequence numbers below (the file's first rtdaq stream), if any.
    pub stream_id: Option<u16>,
    /// First sequence number in the file.
    pub first_seq: Option<u64>,
    /// Last (highest) sequence number in the file.
    pub last_seq: Option<u64>,
    /// Sequence numbers missing between `first_seq` and `last_seq`.
    pub seq_gaps: u64,
    /// Receive time of the first packet, ns since the Unix epoch (0: no packet).
    pub first_ts_ns: u64,
    /// Receive time of the last packet.
    pub last_ts_ns: u64,
    /// The file was closed normally (false: a write error ended it; see the sink's `error`).
    pub complete: bool,
}

impl FileReport {
    fn add(&mut self, packets: u64, d: &IndexDelta) {
        self.packets += packets;
        if self.first_seq.is_none() {
            if let Some((sid, s)) = d.first_seq {
                self.stream_id = Some(sid);
                self.first_seq = Some(s);
            }
        }
        if d.last_seq.is_some() {
            self.last_seq = d.last_seq;
        }
        self.seq_gaps += d.gaps;
        if self.first_ts_ns == 0 {
            self.first_ts_ns = d.first_ts;
        }
        self.last_ts_ns = self.last_ts_ns.max(d.last_ts);
    }
}

/// What a writer thread did.
#[derive(Debug, Clone, Default)]
pub struct WriterOutcome {
    /// Files, in order.
    pub files: Vec<FileReport>,
    /// The first error (path and reason).
    pub error: Option<String>,
    /// The files were written with `O_DIRECT`.
    pub direct_io: bool,
    /// Time spent in write calls, ns.
    pub write_ns: u64,
    /// CPU time of the writer thread, ns.
    pub cpu_ns: u64,
}

struct OpenFile {
    index: u32,
    path: PathBuf,
    /// Buffered descriptor: file headers, a file's unaligned last bytes, fsync, truncation.
    plain: File,
    /// `O_DIRECT` descriptor of the same file, where the file system has it.
    direct: Option<File>,
    offset: u64,
    /// End of the last complete record.
    clean_end: u64,
    /// Stream bytes before this file (DADA `OBS_OFFSET`).
    obs_offset: u64,
    report: FileReport,
    first_len: u32,
}

/// The writer of one sink; [`run`](Writer::run) is its thread.
pub struct Writer {
    info: SinkInfo,
    format: AnyFormat,
    cons: Option<SlotConsumer<'static, RecBuf>>,
    counters: &'static SinkCounters,
    file: Option<OpenFile>,
    out: WriterOutcome,
    /// Stream bytes written before the open file.
    stream_bytes: u64,
    /// First packet of the recording (DADA `UTC_START`), ns since the epoch.
    obs_start_ns: u64,
    warned_direct: bool,
}

impl Writer {
    /// Opens the sink's first file in `format` (before the run: a directory that cannot be written
    /// fails the start). Errors: the path and what is wrong.
    pub(crate) fn open(
        info: SinkInfo,
        format: AnyFormat,
        cons: SlotConsumer<'static, RecBuf>,
        counters: &'static SinkCounters,
    ) -> Result<Self, (String, String)> {
        let mut w = Writer {
            out: WriterOutcome {
                direct_io: info.recorder.direct_io,
                ..WriterOutcome::default()
            },
            info,
            format,
            cons: Some(cons),
            counters,
            file: None,
            stream_bytes: 0,
            obs_start_ns: 0,
            warned_direct: false,
        };
        w.open_file(0)?;
        Ok(w)
    }

    /// The sink's name in messages: `lo_udp.rx0 recorder "pcap"`.
    fn who(&self) -> String {
        format!(
            "{} recorder \"{}\"",
            self.info.queue, self.info.recorder.name
        )
    }

    fn open_file(&mut self, index: u32) -> Result<(), (String, String)> {
        let path = self.info.naming.path(index);
        let shown = path.display().to_string();
        let plain = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(|e| {
                let hint = match e.kind() {
                    std::io::ErrorKind::AlreadyExists => {
                        " (rtdaq never overwrites a recording: remove it, or use another directory or file_name)"
                    }
                    std::io::ErrorKind::PermissionDenied => {
                        " (the directory is not writable by this user: fix its permissions or choose another with --output-dir)"
                    }
                    _ => "",
                };
                (shown.clone(), format!("cannot create the recording: {e}{hint}"))
            })?;
        let direct = if self.info.recorder.direct_io {
            match OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .open(&path)
            {
                Ok(f) => Some(f),
                Err(e) => {
                    if !self.warned_direct {
                        log::warn!(
                            "{}: {} does not take O_DIRECT ({e}; tmpfs, for instance): buffered writes",
                            self.who(),
                            self.info.naming.dir.display()
                        );
                        self.warned_direct = true;
                    }
                    self.out.direct_io = false;
                    None
                }
            }
        } else {
            None
        };
        let mut f = OpenFile {
            index,
            path,
            plain,
            direct,
            offset: 0,
            clean_end: 0,
            obs_offset: self.stream_bytes,
            report: FileReport {
                path: shown.clone(),
                ..FileReport::default()
            },
            first_len: 0,
        };
        if let Some(h) = self.format.file_header(&self.facts(&f, false)) {
            f.plain.write_all_at(&h, 0).map_err(|e| {
                let what = self.info.recorder.format.as_str();
                (
                    shown.clone(),
                    format!("cannot write the {what} file header: {e}"),
                )
            })?;
            f.offset = h.len() as u64;
            f.clean_end = f.offset;
        }
        self.file = Some(f);
        Ok(())
    }

    /// What the format's file header says of `f` (`last`: the file is complete).
    fn facts<'a>(&'a self, f: &'a OpenFile, last: bool) -> FileFacts<'a> {
        FileFacts {
            info: &self.info,
            path: &f.path,
            number: f.index,
            obs_start_ns: if self.obs_start_ns != 0 {
                self.obs_start_ns
            } else {
                self.info.start_unix_ns
            },
            obs_offset: f.obs_offset,
            bytes: f.offset,
            packets: f.report.packets,
            first_seq: f.report.stream_id.zip(f.report.first_seq),
            first_len: f.first_len,
            last,
        }
    }

    /// Writes one buffer. Errors end the sink's recording (counted, reported).
    fn write(&mut self, b: &RecBuf) {
        if self.out.error.is_some() {
            SinkCounters::add(&self.counters.dropped_error_writer, b.packets);
            return;
        }
        if self.file.as_ref().is_some_and(|f| f.index != b.file) {
            self.close(true);
        }
        if self.file.is_none() {
            if let Err((path, e)) = self.open_file(b.file) {
                self.fail(format!("{path}: {e}"), b.packets);
                return;
            }
        }
        let Some(f) = self.file.as_mut() else { return };
        let data = b.data();
        let t = Instant::now();
        let aligned = match &f.direct {
            Some(_) if f.offset % ALIGN as u64 == 0 => data.len() / ALIGN * ALIGN,
            _ => 0,
        };
        let mut res = Ok(());
        if aligned > 0 {
            if let Some(d) = &f.direct {
                res = d.write_all_at(&data[..aligned], f.offset);
            }
        }
        if res.is_ok() && aligned < data.len() {
            res = f
                .plain
                .write_all_at(&data[aligned..], f.offset + aligned as u64);
        }
        self.out.write_ns += t.elapsed().as_nanos() as u64;
        match res {
            Ok(()) => {
                let before = f.offset;
                f.offset += data.len() as u64;
                if let Some(end) = b.boundary {
                    f.clean_end = before + end as u64;
                }
                if f.report.packets == 0 && b.idx.first_len > 0 {
                    f.first_len = b.idx.first_len;
                }
                f.report.add(b.packets, &b.idx);
                if self.obs_start_ns == 0 && b.idx.first_ts != 0 {
                    self.obs_start_ns = b.idx.first_ts;
                }
                SinkCounters::add(&self.counters.written, b.packets);
                SinkCounters::add(&self.counters.bytes, data.len() as u64);
                if b.ends_file {
                    self.close(true);
                }
            }
            Err(e) => {
                let msg = format!("{}: {e}", f.path.display());
                self.fail(msg, b.packets);
            }
        }
    }

    /// A write failed: remember the error, stop the consumer, cut the file back to its last
    /// complete record and close it.
    fn fail(&mut self, msg: String, packets: u64) {
        log::error!(
            "{}: {msg}; recording stops, every further packet counts as record_error and the run fails",
            self.who()
        );
        self.out.error = Some(msg);
        self.counters.failed.store(true, Release);
        SinkCounters::add(&self.counters.dropped_error_writer, packets);
        if let Some(f) = self.file.as_mut() {
            // Writes past the last complete record may have partly reached the disk: cut
            // them off, and out of the byte count.
            let _ = f.plain.set_len(f.clean_end);
            let cut = f.offset.saturating_sub(f.clean_end);
            let bytes = &self.counters.bytes;
            bytes.store(bytes.load(Relaxed).saturating_sub(cut), Relaxed);
            f.offset = f.clean_end;
        }
        self.close(false);
    }

    /// Closes the open file: the format's final file header, fsync, sidecar index.
    fn close(&mut self, complete: bool) {
        let Some(mut f) = self.file.take() else {
            return;
        };
        // The final header (DADA: FILE_SIZE is the data in the file, also when a failure cut
        // it short; a reader trusts FILE_SIZE, and the provisional one is the rotation size).
        // The header's blocks exist already, so the rewrite needs no space on a full disk.
        if let Some(h) = self.format.file_header(&self.facts(&f, true)) {
            if let Err(e) = f.plain.write_all_at(&h, 0) {
                let msg = format!(
                    "{}: cannot rewrite the {} file header: {e}",
                    f.path.display(),
                    self.info.recorder.format.as_str()
                );
                if complete {
                    self.file = Some(f);
                    return self.fail(msg, 0);
                }
                log::warn!(
                    "{}: {msg}: it keeps the provisional sizes (DADA: FILE_SIZE)",
                    self.who()
                );
            }
        }
        if let Err(e) = f.plain.sync_all() {
            if complete {
                let msg = format!("{}: fsync: {e}", f.path.display());
                self.file = Some(f);
                return self.fail(msg, 0);
            }
        }
        // The file's length on disk: headers and complete records (after a failure, cut back).
        f.report.bytes = f.offset;
        f.report.complete = complete;
        self.stream_bytes += f.offset.saturating_sub(self.format.file_header_len());
        let index = IndexFile {
            recorder: &self.info.recorder.name,
            format: self.info.recorder.format.as_str(),
            queue: &self.info.queue,
            config: &self.info.config_name,
            config_sha256: &self.info.config_sha256,
            file_number: f.index,
            first_ts: (f.report.first_ts_ns != 0)
                .then(|| crate::pacer::rfc3339_utc(f.report.first_ts_ns)),
            last_ts: (f.report.last_ts_ns != 0)
                .then(|| crate::pacer::rfc3339_utc(f.report.last_ts_ns)),
            file: &f.report,
        };
        let mut ipath = f.path.clone().into_os_string();
        ipath.push(".index.json");
        let written = serde_json::to_vec_pretty(&index)
            .map_err(std::io::Error::other)
            .and_then(|j| std::fs::write(&ipath, j));
        if let Err(e) = written {
            log::warn!(
                "{}: cannot write the index {}: {e}",
                self.who(),
                PathBuf::from(&ipath).display()
            );
        }
        self.out.files.push(f.report);
    }

    /// The writer thread: writes buffers until the consumer is done and the ring is empty,
    /// then closes the last file.
    pub fn run(mut self) -> WriterOutcome {
        let Some(mut cons) = self.cons.take() else {
            return self.out;
        };
        let counters = self.counters;
        let mut turns = crate::stall::StallClock::start(
            &counters.writer_stall,
            crate::pacer::now_ns(),
            crate::stall::ThreadKind::Writer,
        );
        loop {
            turns.tick(crate::pacer::now_ns());
            // Read before the ring: the consumer raises it after its last commit.
            let done = self.counters.producer_done.load(Acquire);
            match cons.front() {
                Some(b) => {
                    self.write(b);
                    let released = cons.release();
                    debug_assert!(released.is_ok());
                }
                None if done => break,
                None => std::thread::sleep(IDLE),
            }
        }
        self.close(self.out.error.is_none());
        self.out.cpu_ns = rtdaq_platform::rt::thread_cpu_ns().unwrap_or(0);
        self.out
    }
}

/// The sidecar index of one file (`FILE.index.json`).
#[derive(Serialize)]
struct IndexFile<'a> {
    recorder: &'a str,
    format: &'a str,
    queue: &'a str,
    config: &'a str,
    config_sha256: &'a str,
    file_number: u32,
    first_ts: Option<String>,
    last_ts: Option<String>,
    #[serde(flatten)]
    file: &'a FileReport,
}
