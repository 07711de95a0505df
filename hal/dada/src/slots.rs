//! Reader slots: a reader that leaves in the middle of the data (killed, or unlocked
//! early), and its place readied for the next reader, which goes on where it stopped.
//!
//! PSRDADA gives each of a ring's `readers` a *slot* in each block: semaphores counting the
//! buffers written for it (`FULL`) and cleared by it (`CLEAR`), a lock (`READER_CONN`), and
//! a place in the block's shared sync struct (`r_bufs`: the next buffer it reads). A reader
//! locks its slot with `SEM_UNDO`, so a reader that dies frees it, and the next reader to
//! lock the ring takes it over and reads on from `r_bufs`. What the library does not give
//! back is what the dead reader held:
//! - **the header**: `dada_hdu_open` takes the header buffer and keeps it until the reader
//!   unlocks, and the writer writes one header per transfer: the next reader waits for a
//!   header that never comes;
//! - **the data buffer it was reading**: taken from `FULL`, never cleared. The next reader
//!   reads it again (from `r_bufs`) but runs one `FULL` short and waits at the end forever.
//!
//! A reader that unlocks in the middle of the data gives both back, but the next one still
//! finds no header.
//!
//! `SlotWatch` (the writer's: [`Writer::watch_readers`](crate::Writer::watch_readers))
//! looks at each slot's lock when asked (rtdaq: every 100 ms). When the process that held
//! it is gone (the lock free, or held by another process), it readies the slot:
//! 1. the data buffer the leaver held goes back to `FULL`: the next reader reads it whole;
//! 2. the header goes back to the slot with its `OBS_OFFSET` set to the byte of the data
//!    where the next reader starts (the first byte of that buffer): written in place into
//!    the header buffer the leaver held, once no other reader will read that buffer again
//!    (it waits until they all took it); when the leaver had given its header back (it
//!    unlocked), a new header is written, with one reader only (with several, a new header
//!    would reach every reader: that slot is counted as not readied).
//!
//! The next reader then reads a header and the data from `OBS_OFFSET` on, as a reader of
//! a recording that starts there. Nothing the ring held for the slot in between is lost;
//! what did not fit was not written (the writer's `clear_blocks` sees the slot behind).
//!
//! This reads the library's shared state and changes it from outside its calls: one
//! `semop` on the slot's `FULL` for each buffer given back, the held header buffer written
//! in place. It relies on psrdada 1.0.0's layout (`ipcsync_t`, `IPCBUF_READING`, the
//! semaphore numbers), which `psrdada-sys` pins.

use crate::raw;

/// `IPCBUF_READING` (ipcbuf.c, not in its header): a reader slot in the middle of a transfer.
const READING: i32 = 6;
const FULL: u16 = raw::IPCBUF_FULL as u16;
const CLEAR: u16 = raw::IPCBUF_CLEAR as u16;
const CONN: u16 = raw::IPCBUF_READER_CONN as u16;
/// `IPCBUF_READERS`: the most readers a ring has.
const MAX_READERS: usize = 8;
/// `IPCBUF_XFERS`: transfers the sync struct keeps.
const XFERS: u64 = 8;

/// `semctl(id, num, cmd)` for `GETVAL` or `GETPID`: -1 when it fails.
fn sem_get(id: i32, num: u16, cmd: i32) -> i32 {
    // SAFETY: GETVAL and GETPID take no argument and only read the semaphore.
    unsafe { libc::semctl(id, i32::from(num), cmd) }
}

/// Adds `n` to semaphore `num` of set `id` (never waits; `n > 0` never would).
fn sem_add(id: i32, num: u16, n: i16) -> bool {
    let mut op = libc::sembuf {
        sem_num: num,
        sem_op: n,
        sem_flg: libc::IPC_NOWAIT as i16,
    };
    // SAFETY: one valid sembuf, alive for the call.
    unsafe { libc::semop(id, &mut op, 1) == 0 }
}

/// One reader slot of one block, as the block's sync struct and the slot's semaphores say.
#[derive(Debug, Clone, Copy)]
struct Slot {
    semid: i32,
    /// In the middle of a transfer (it took a buffer of it).
    reading: bool,
    /// The next buffer it reads (a count, not an index).
    r_bufs: u64,
    /// Buffers written for it and not taken.
    full: i64,
    /// Buffers the writer filled (a count).
    w_curr: u64,
}

impl Slot {
    /// Buffers its reader took and did not clear: 1 while it reads one, 0 between two.
    fn held(&self) -> i64 {
        if self.reading {
            self.w_curr as i64 - self.r_bufs as i64 - self.full
        } else {
            0
        }
    }
}

/// One block (`ipcbuf_t`) of a ring this process is connected to.
#[derive(Clone, Copy)]
pub(crate) struct BlockRef(pub(crate) *mut raw::ipcbuf_t);

impl BlockRef {
    fn sync(self) -> *mut raw::ipcsync_t {
        // SAFETY: a connected block has its sync struct mapped.
        unsafe { (*self.0).sync }
    }

    fn readers(self) -> usize {
        // SAFETY: as above; `n_readers` is set at creation and never changes.
        let n = unsafe { std::ptr::addr_of!((*self.sync()).n_readers).read_volatile() };
        (n as usize).min(MAX_READERS)
    }

    fn semid(self, r: usize) -> i32 {
        // SAFETY: a connected block has one data semaphore set per reader (`r < readers`).
        unsafe { *(*self.0).semid_data.add(r) }
    }

    fn slot(self, r: usize) -> Slot {
        let s = self.sync();
        let semid = self.semid(r);
        // SAFETY: the sync struct is mapped; `r < IPCBUF_READERS`; other processes change
        // these words, so each is read once, volatile.
        let (state, r_bufs, w_curr) = unsafe {
            (
                std::ptr::addr_of!((*s).r_states[r]).read_volatile(),
                std::ptr::addr_of!((*s).r_bufs[r]).read_volatile(),
                std::ptr::addr_of!((*s).w_buf_curr).read_volatile(),
            )
        };
        Slot {
            semid,
            reading: state == READING,
            r_bufs,
            full: i64::from(sem_get(semid, FULL, libc::GETVAL)),
            w_curr,
        }
    }

    /// The process that locked or unlocked slot `r` last (for a reader that died: it).
    fn last_pid(self, r: usize) -> i32 {
        sem_get(self.semid(r), CONN, libc::GETPID)
    }

    /// Whether a reader holds slot `r`'s lock.
    fn locked(self, r: usize) -> bool {
        sem_get(self.semid(r), CONN, libc::GETVAL) == 0
    }

    /// The byte of the data at which slot `r`'s next buffer starts (`ipcbuf_tell`): where
    /// its next reader starts.
    fn resume_offset(self, r: usize) -> u64 {
        let s = self.sync();
        // SAFETY: the sync struct is mapped; `r < IPCBUF_READERS`, `x < IPCBUF_XFERS`.
        unsafe {
            if std::ptr::addr_of!((*s).r_states[r]).read_volatile() != READING {
                return 0;
            }
            let x = (std::ptr::addr_of!((*s).r_xfers[r]).read_volatile() % XFERS) as usize;
            let s_buf = std::ptr::addr_of!((*s).s_buf[x]).read_volatile();
            let s_byte = std::ptr::addr_of!((*s).s_byte[x]).read_volatile();
            let bufsz = std::ptr::addr_of!((*s).bufsz).read_volatile();
            let r_bufs = std::ptr::addr_of!((*s).r_bufs[r]).read_volatile();
            (r_bufs.saturating_sub(s_buf) * bufsz).saturating_sub(s_byte)
        }
    }

    /// Writes `text`, zero-padded, into buffer count `n` (cut at the buffer's size).
    /// Only for a buffer no reader reads now or later (see `SlotWatch::ready`).
    fn overwrite(self, n: u64, text: &[u8]) {
        let s = self.sync();
        // SAFETY: the sync struct is mapped; `buffer` holds `nbufs` mapped buffers of
        // `bufsz` bytes each, alive while this process stays connected; no reader reads
        // this one (the caller's rule), and this process writes it from one thread.
        unsafe {
            let nbufs = (*s).nbufs;
            let bufsz = (*s).bufsz as usize;
            let p = (*(*self.0).buffer.add((n % nbufs) as usize)).cast::<u8>();
            let len = text.len().min(bufsz);
            std::ptr::copy_nonoverlapping(text.as_ptr(), p, len);
            std::ptr::write_bytes(p.add(len), 0, bufsz - len);
        }
    }

    /// Whether the writer's next buffer of this block is clear (its `get_next_write`
    /// would not wait): written never, or cleared since by every reader.
    pub(crate) fn next_write_clear(self) -> bool {
        let s = self.sync();
        // SAFETY: the sync struct is mapped; `count` (this process's) has `nbufs` entries.
        let pending = unsafe {
            let next = (*s).w_buf_next % (*s).nbufs;
            *(*self.0).count.add(next as usize) as i32
        };
        pending == 0
            || (0..self.readers()).all(|r| sem_get(self.semid(r), CLEAR, libc::GETVAL) >= pending)
    }
}

/// What one [`Writer::watch_readers`](crate::Writer::watch_readers) saw and did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SlotEvents {
    /// Readers found gone in the middle of the data.
    pub left: u32,
    /// Slots readied for the next reader (header and data given back).
    pub readied: u32,
    /// Slots that cannot be readied: the leaver had given its header back and the ring has
    /// several readers (a new header would reach them all), or the slot's state is not one
    /// a reader leaves.
    pub unready: u32,
    /// Where the last readied slot's next reader starts: its header's `OBS_OFFSET`.
    pub offset: Option<u64>,
}

/// How readying a slot went.
enum Ready {
    Done(u64),
    /// Not now: another reader has still to take the header buffer, or the header block
    /// has no clear buffer.
    Later,
    Cannot,
}

/// Where a slot stands for the watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Watch {
    /// Its reader (if any) is where a reader is.
    Fine,
    /// Its reader left; the slot is readied as soon as it can be.
    Pending,
    /// Its reader left and the slot cannot be readied (counted once).
    GivenUp,
}

/// The writer's watch over its ring's reader slots (see the [module docs](self)).
pub(crate) struct SlotWatch {
    slots: [Watch; MAX_READERS],
    /// The header as written, and where the value of its `OBS_OFFSET` line is.
    header: Vec<u8>,
    obs_offset: Option<(usize, usize)>,
    /// A header with another `OBS_OFFSET` (reused: no allocation after the first header).
    scratch: Vec<u8>,
}

impl SlotWatch {
    pub(crate) fn new() -> SlotWatch {
        SlotWatch {
            slots: [Watch::Fine; MAX_READERS],
            header: Vec::new(),
            obs_offset: None,
            scratch: Vec::new(),
        }
    }

    /// The header the writer wrote: the one given back, its `OBS_OFFSET` changed.
    pub(crate) fn set_header(&mut self, header: &[u8]) {
        self.header = header.to_vec();
        self.obs_offset = obs_offset_value(header);
        self.scratch = Vec::with_capacity(header.len() + 64);
    }

    /// The header with `OBS_OFFSET` = `offset` (the line added when it had none).
    pub(crate) fn header_at(&mut self, offset: u64) -> &[u8] {
        use std::io::Write;
        let s = &mut self.scratch;
        s.clear();
        match self.obs_offset {
            Some((a, b)) => {
                s.extend_from_slice(&self.header[..a]);
                let _ = write!(s, "{offset}");
                s.extend_from_slice(&self.header[b..]);
            }
            None => {
                s.extend_from_slice(&self.header);
                if !s.is_empty() && !s.ends_with(b"\n") {
                    s.push(b'\n');
                }
                let _ = writeln!(s, "OBS_OFFSET {offset}");
            }
        }
        s
    }

    /// Looks at every slot once and readies those whose reader left (see the
    /// [module docs](self)). `write_header` writes a new header into the header block
    /// (`false`: not now); it is asked only with one reader.
    ///
    /// A reader left slot `r` when its lock is free and the slot is not as a reader leaves
    /// it at the end of a transfer (it holds the header or a data buffer, or is in the
    /// middle of the data with no header for the next reader), or when a reader holds the
    /// lock and waits for a header in the middle of the data (it took the slot over
    /// before this looked).
    pub(crate) fn check(
        &mut self,
        data: BlockRef,
        header: BlockRef,
        mut write_header: impl FnMut(&mut Self, u64) -> bool,
    ) -> SlotEvents {
        let mut ev = SlotEvents::default();
        if self.header.is_empty() {
            return ev;
        }
        let n = data.readers();
        for r in 0..n {
            let hr = header_slot(data, header, r, n);
            let (d, h) = (data.slot(r), header.slot(hr));
            let left = if data.locked(r) {
                d.reading && sem_get(h.semid, FULL, libc::GETNCNT) > 0
            } else {
                h.held() != 0 || d.held() != 0 || (d.reading && h.full == 0)
            };
            if !left {
                self.slots[r] = Watch::Fine;
                continue;
            }
            match self.slots[r] {
                Watch::GivenUp => continue,
                Watch::Fine => {
                    ev.left += 1;
                    self.slots[r] = Watch::Pending;
                }
                Watch::Pending => {}
            }
            match self.ready(data, header, (r, hr), n, &mut write_header) {
                Ready::Done(offset) => {
                    self.slots[r] = Watch::Fine;
                    ev.readied += 1;
                    ev.offset = Some(offset);
                }
                Ready::Later => {}
                Ready::Cannot => {
                    self.slots[r] = Watch::GivenUp;
                    ev.unready += 1;
                }
            }
        }
        ev
    }

    /// Gives slot `r` its held data buffer and a header back (see the [module docs](self)).
    fn ready(
        &mut self,
        data: BlockRef,
        header: BlockRef,
        (r, hr): (usize, usize),
        n: usize,
        write_header: &mut impl FnMut(&mut Self, u64) -> bool,
    ) -> Ready {
        let d = data.slot(r);
        let h = header.slot(hr);
        let (held_data, held_header) = (d.held(), h.held());
        if !(0..=1).contains(&held_data) || !(0..=1).contains(&held_header) {
            return Ready::Cannot;
        }
        let offset = data.resume_offset(r);
        // The header buffer it held is written in place once no other reader will read it
        // again: each took it (holds it, or went past it).
        if held_header == 1
            && !(0..n).filter(|&s| s != hr).all(|s| {
                let o = header.slot(s);
                o.r_bufs > h.r_bufs || (o.r_bufs == h.r_bufs && o.held() == 1)
            })
        {
            return Ready::Later;
        }
        // The data buffer first, the header last: a reader waiting for its header wakes to
        // a slot that is whole.
        if held_data == 1 {
            sem_add(d.semid, FULL, 1);
        }
        if held_header == 1 {
            header.overwrite(h.r_bufs, self.header_at(offset));
            sem_add(h.semid, FULL, 1);
        } else if h.full == 0 {
            // It gave its header back (it unlocked): a new one, for a ring of one reader.
            if n != 1 {
                return Ready::Cannot;
            }
            if !header.next_write_clear() || !write_header(self, offset) {
                return Ready::Later;
            }
        }
        Ready::Done(offset)
    }
}

/// The header block's slot of the reader of data slot `r`: the one the same process locked
/// or unlocked last. A reader locks a slot in each block, the first free one in each; two
/// readers locking at the same moment can get different numbers in the two.
fn header_slot(data: BlockRef, header: BlockRef, r: usize, n: usize) -> usize {
    let pid = data.last_pid(r);
    std::iter::once(r)
        .chain(0..n)
        .find(|&s| header.last_pid(s) == pid)
        .unwrap_or(r)
}

/// Where the value of the header's `OBS_OFFSET` line is (`[start, end)`), if it has one.
fn obs_offset_value(h: &[u8]) -> Option<(usize, usize)> {
    const KEY: &[u8] = b"OBS_OFFSET";
    let mut line_start = 0;
    for line in h.split(|&b| b == b'\n') {
        let start = line_start;
        line_start += line.len() + 1;
        let Some(rest) = line.strip_prefix(KEY) else {
            continue;
        };
        if !rest.first().is_some_and(u8::is_ascii_whitespace) {
            continue;
        }
        let ws = rest.iter().take_while(|b| b.is_ascii_whitespace()).count();
        let digits = rest[ws..].iter().take_while(|b| b.is_ascii_digit()).count();
        let a = start + KEY.len() + ws;
        return Some((a, a + digits));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_given_back_with_another_obs_offset() {
        let mut w = SlotWatch::new();
        w.set_header(b"HDR_SIZE 4096\nOBS_OFFSET          0\nSOURCE x\n");
        assert_eq!(
            w.header_at(12_582_912),
            b"HDR_SIZE 4096\nOBS_OFFSET          12582912\nSOURCE x\n"
        );
        assert_eq!(
            w.header_at(0),
            b"HDR_SIZE 4096\nOBS_OFFSET          0\nSOURCE x\n"
        );
        // A key that only starts with OBS_OFFSET is another key.
        w.set_header(b"OBS_OFFSET_X 5\nSOURCE x");
        assert_eq!(w.header_at(7), b"OBS_OFFSET_X 5\nSOURCE x\nOBS_OFFSET 7\n");
    }
}
