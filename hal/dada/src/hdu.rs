//! The designated writer and reader of a ring (`dada_hdu_t`): the header, then the data.

use crate::error::{DadaError, Result};
use crate::raw;
use crate::result::{check, non_null};
use crate::ring::Key;
use crate::slots::{BlockRef, SlotEvents, SlotWatch};

/// A connected `dada_hdu_t`, destroyed (disconnected) on drop.
struct Hdu {
    key: Key,
    p: *mut raw::dada_hdu_t,
}

impl Hdu {
    fn connect(key: Key) -> Result<Hdu> {
        // SAFETY: a null log is allowed (multilog ignores it); the hdu is ours until
        // `dada_hdu_destroy`.
        let p = unsafe { raw::dada_hdu_create(std::ptr::null_mut()) };
        let p = non_null(p, "dada_hdu_create", key.0, "out of memory")?;
        // SAFETY: `p` is a live hdu (above).
        unsafe { raw::dada_hdu_set_key(p, key.0) };
        let hdu = Hdu { key, p };
        // SAFETY: `p` is a live hdu with its key set.
        let rc = unsafe { raw::dada_hdu_connect(p) };
        check(
            rc.into(),
            "dada_hdu_connect",
            key.0,
            "no ring at this key (create it with dada_db -k KEY, or let rtdaq create it; ipcs -m lists shared memory)",
        )?;
        Ok(hdu)
    }

    /// The data block as the `ipcbuf_t` it starts with.
    fn data_buf(&self) -> *mut raw::ipcbuf_t {
        // SAFETY: a connected hdu has a data block (`ipcio_t`, whose first field is its
        // `ipcbuf_t`).
        unsafe { std::ptr::addr_of_mut!((*(*self.p).data_block).buf) }
    }

    /// Bytes of one data block (the writer's and the reader's `block_bytes`).
    fn block_bytes(&self) -> u64 {
        // SAFETY: the data block is connected.
        unsafe { raw::ipcbuf_get_bufsz(self.data_buf()) }
    }

    /// Data blocks in the ring.
    fn blocks(&self) -> u64 {
        // SAFETY: the data block is connected.
        unsafe { raw::ipcbuf_get_nbufs(self.data_buf()) }
    }

    fn data_io(&self) -> *mut raw::ipcio_t {
        // SAFETY: a connected hdu has a data block.
        unsafe { (*self.p).data_block }
    }

    fn header_buf(&self) -> *mut raw::ipcbuf_t {
        // SAFETY: a connected hdu has a header block.
        unsafe { (*self.p).header_block }
    }
}

impl Drop for Hdu {
    fn drop(&mut self) {
        // SAFETY: `p` is live; disconnecting a connected hdu and destroying it once is the
        // library's own clean-up (`dada_hdu_destroy` disconnects when connected).
        unsafe { raw::dada_hdu_destroy(self.p) };
    }
}

// SAFETY: the hdu is heap memory of the library and mappings of this process, usable from
// any thread, one at a time (`&mut` for every call that changes it).
unsafe impl Send for Hdu {}

// SAFETY: the open block's pointer is into this process's mapping of the ring, owned by the
// writer like the hdu.
unsafe impl Send for Writer {}

/// The designated writer of a ring: [`write_header`](Self::write_header), then data
/// blocks ([`open_block`](Self::open_block)), then [`end`](Self::end) (end of data). Dropped
/// without `end`, it still ends the data and unlocks.
pub struct Writer {
    hdu: Hdu,
    locked: bool,
    readers: u32,
    /// Bytes of a data block.
    bufsz: usize,
    /// The block [`try_write`](Self::try_write) is filling: its bytes and how many are used.
    open: Option<(*mut u8, usize)>,
    /// Reader slots whose reader left ([`watch_readers`](Self::watch_readers)).
    watch: SlotWatch,
}

impl Writer {
    /// Connects to the ring at `key` and locks it for writing (one writer at a time).
    pub fn attach(key: Key) -> Result<Writer> {
        let hdu = Hdu::connect(key)?;
        // SAFETY: `hdu` is connected.
        let rc = unsafe { raw::dada_hdu_lock_write(hdu.p) };
        check(
            rc.into(),
            "dada_hdu_lock_write",
            key.0,
            "another writer holds the ring",
        )?;
        // SAFETY: the data block is connected.
        let readers = unsafe { raw::ipcbuf_get_nreaders(hdu.data_buf()) }.max(1) as u32;
        // SAFETY: the data block is connected.
        let bufsz = unsafe { raw::ipcbuf_get_bufsz(hdu.data_buf()) } as usize;
        Ok(Writer {
            hdu,
            locked: true,
            readers,
            bufsz,
            open: None,
            watch: SlotWatch::new(),
        })
    }

    /// Bytes of one data block.
    pub fn block_bytes(&self) -> u64 {
        self.hdu.block_bytes()
    }

    /// Data blocks in the ring.
    pub fn blocks(&self) -> u64 {
        self.hdu.blocks()
    }

    /// Writes the header (at most one header buffer, zero-padded) into the header block.
    /// It is also the header a reader that takes over a left reader's slot gets, its
    /// `OBS_OFFSET` changed ([`watch_readers`](Self::watch_readers)).
    pub fn write_header(&mut self, header: &[u8]) -> Result<()> {
        self.put_header(header)?;
        self.watch.set_header(header);
        Ok(())
    }

    /// Looks at each reader slot once; a slot whose reader left in the middle of the data
    /// (killed, or unlocked) is readied for the next reader: the data buffer it held and a
    /// header with `OBS_OFFSET` at the byte where the next reader starts go back to the slot
    /// ([`slots`](crate::slots) says how and when it cannot). Never waits: a few `semctl`
    /// per reader, and a header written when a slot is readied. Call it now and then (rtdaq:
    /// every 100 ms) after [`write_header`](Self::write_header).
    pub fn watch_readers(&mut self) -> SlotEvents {
        let data = BlockRef(self.hdu.data_buf());
        let header = BlockRef(self.hdu.header_buf());
        let mut watch = std::mem::replace(&mut self.watch, SlotWatch::new());
        let ev = watch.check(data, header, |w, offset| {
            self.put_header(w.header_at(offset)).is_ok()
        });
        self.watch = watch;
        ev
    }

    fn put_header(&mut self, header: &[u8]) -> Result<()> {
        let hb = self.hdu.header_buf();
        let key = self.hdu.key.0;
        // SAFETY: the header block is connected.
        let cap = unsafe { raw::ipcbuf_get_bufsz(hb) };
        if header.len() as u64 > cap {
            return Err(DadaError::HeaderTooLong {
                key,
                len: header.len(),
                cap,
            });
        }
        // SAFETY: we hold the header block's write lock; the returned buffer has `cap`
        // bytes and is ours until `ipcbuf_mark_filled`.
        let p = unsafe { raw::ipcbuf_get_next_write(hb) };
        let p = non_null(p, "ipcbuf_get_next_write (header)", key, "no header buffer")?;
        // SAFETY: `p` points to `cap` writable bytes (above), not aliased.
        let buf = unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), cap as usize) };
        buf[..header.len()].copy_from_slice(header);
        buf[header.len()..].fill(0);
        // SAFETY: the buffer came from `ipcbuf_get_next_write` on this block.
        let rc = unsafe { raw::ipcbuf_mark_filled(hb, cap) };
        check(
            rc.into(),
            "ipcbuf_mark_filled (header)",
            key,
            "the header block failed",
        )?;
        Ok(())
    }

    /// Data blocks that [`open_block`](Self::open_block) can open now without waiting: those
    /// this writer has not filled since every reader cleared them, and the ones the readers
    /// cleared since (the library counts those on a semaphore per reader; the slowest reader
    /// decides).
    pub fn clear_blocks(&self) -> u64 {
        let b = self.hdu.data_buf();
        // SAFETY: the data block is connected: `count` has `nbufs` entries (the library's
        // writer-side count of each buffer's pending transfers), `semid_data` one id per
        // reader; we only read them.
        unsafe {
            let nbufs = (*(*b).sync).nbufs as usize;
            let pending = std::slice::from_raw_parts((*b).count.cast::<u8>(), nbufs)
                .iter()
                .filter(|&&c| c > 0)
                .count() as u64;
            let cleared = (0..self.readers as i32)
                .map(|r| raw::ipcbuf_get_nclear_iread(b, r))
                .min()
                .unwrap_or(0);
            // The block `try_write` holds open was taken already (its count is 0).
            let held = u64::from(self.open.is_some());
            (nbufs as u64 - pending).saturating_sub(held) + cleared.min(pending)
        }
    }

    /// Appends `data` to the ring's byte stream: into the open block, then into as many
    /// new blocks as it needs, each handed to the readers when full. `Ok(false)`, with
    /// nothing written, when those blocks are not clear now: it never waits, and a datagram
    /// is written whole or not at all. The last block, partly filled, goes at [`end`](Self::end).
    pub fn try_write(&mut self, data: &[u8]) -> Result<bool> {
        let room = self.open.map_or(0, |(_, used)| self.bufsz - used);
        if data.len() > room {
            let blocks = (data.len() - room).div_ceil(self.bufsz) as u64;
            if self.clear_blocks() < blocks {
                return Ok(false);
            }
        }
        let mut rest = data;
        while !rest.is_empty() {
            let (p, used) = match self.open {
                Some(o) => o,
                None => (self.open_raw()?, 0),
            };
            let n = rest.len().min(self.bufsz - used);
            // SAFETY: `p` is the open block's `bufsz` bytes, ours until it is closed, and
            // `used + n <= bufsz`.
            unsafe { std::ptr::copy_nonoverlapping(rest.as_ptr(), p.add(used), n) };
            rest = &rest[n..];
            if used + n == self.bufsz {
                self.open = None;
                self.close_raw(self.bufsz as u64)?;
            } else {
                self.open = Some((p, used + n));
            }
        }
        Ok(true)
    }

    /// Bytes written into the block still open (not yet readable).
    pub fn pending_bytes(&self) -> usize {
        self.open.map_or(0, |(_, used)| used)
    }

    fn open_raw(&mut self) -> Result<*mut u8> {
        let mut id = 0u64;
        // SAFETY: we hold the write lock; the block is ours until it is closed.
        let p = unsafe { raw::ipcio_open_block_write(self.hdu.data_io(), &mut id) };
        let p = non_null(
            p,
            "ipcio_open_block_write",
            self.hdu.key.0,
            "the data block failed",
        )?;
        Ok(p.cast())
    }

    fn close_raw(&mut self, bytes: u64) -> Result<()> {
        // SAFETY: a block opened by `open_raw` on this writer, closed once.
        let rc = unsafe { raw::ipcio_close_block_write(self.hdu.data_io(), bytes) };
        check(
            rc as i64,
            "ipcio_close_block_write",
            self.hdu.key.0,
            "the data block failed",
        )?;
        Ok(())
    }

    /// Opens the next data block for writing in place (waits for a clear one: ask
    /// [`clear_blocks`](Self::clear_blocks) first never to wait). The block
    /// Not while [`try_write`](Self::try_write) holds a partly filled block (an error: its
    /// bytes would be cut off).
    pub fn open_block(&mut self) -> Result<Block<'_>> {
        if self.open.is_some() {
            return Err(DadaError::Call {
                call: "ipcio_open_block_write",
                key: self.hdu.key.0,
                why:
                    "try_write holds a partly filled block; write whole blocks either way, not both",
            });
        }
        let p = self.open_raw()?;
        let len = self.bufsz;
        Ok(Block {
            w: self,
            p,
            len,
            closed: false,
        })
    }

    /// Ends the data (end of data for the readers) and unlocks the ring.
    pub fn end(mut self) -> Result<()> {
        self.unlock()
    }

    fn unlock(&mut self) -> Result<()> {
        if !std::mem::take(&mut self.locked) {
            return Ok(());
        }
        // The partly filled block: its bytes are the last of the data.
        if let Some((_, used)) = self.open.take() {
            self.close_raw(used as u64)?;
        }
        // SAFETY: we hold the write lock (`locked`); unlocking closes the data (end of
        // data) and releases the header block.
        let rc = unsafe { raw::dada_hdu_unlock_write(self.hdu.p) };
        check(
            rc.into(),
            "dada_hdu_unlock_write",
            self.hdu.key.0,
            "the end of data failed",
        )?;
        Ok(())
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.unlock();
    }
}

/// One data block open for writing, in place. [`close`](Self::close) it with the bytes
/// written: a block closed with fewer than [`Writer::block_bytes`] ends the data (the
/// library's rule), so only the last one may be short. Dropped unclosed, it is closed
/// full.
pub struct Block<'w> {
    w: &'w mut Writer,
    p: *mut u8,
    len: usize,
    closed: bool,
}

impl Block<'_> {
    /// The block's bytes.
    pub fn data(&mut self) -> &mut [u8] {
        // SAFETY: `p` is the open block's `len` bytes, ours until `close` (we borrow the
        // writer mutably, so no other block is open).
        unsafe { std::slice::from_raw_parts_mut(self.p, self.len) }
    }

    /// Hands the block to the readers with `bytes` of data.
    pub fn close(mut self, bytes: u64) -> Result<()> {
        self.closed = true;
        self.finish(bytes)
    }

    fn finish(&mut self, bytes: u64) -> Result<()> {
        // SAFETY: the block was opened by `open_block` on this writer and is closed once.
        let rc = unsafe { raw::ipcio_close_block_write(self.w.hdu.data_io(), bytes) };
        check(
            rc as i64,
            "ipcio_close_block_write",
            self.w.hdu.key.0,
            "the data block failed",
        )?;
        Ok(())
    }
}

impl Drop for Block<'_> {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.finish(self.len as u64);
        }
    }
}

/// The designated reader of a ring: [`read_header`](Self::read_header), then
/// [`read`](Self::read) to the end of data.
pub struct Reader {
    hdu: Hdu,
    locked: bool,
}

impl Reader {
    /// Connects to the ring at `key` and locks it for reading.
    pub fn attach(key: Key) -> Result<Reader> {
        let hdu = Hdu::connect(key)?;
        // SAFETY: `hdu` is connected.
        let rc = unsafe { raw::dada_hdu_lock_read(hdu.p) };
        check(
            rc.into(),
            "dada_hdu_lock_read",
            key.0,
            "another reader holds the ring",
        )?;
        Ok(Reader { hdu, locked: true })
    }

    /// Bytes of one data block.
    pub fn block_bytes(&self) -> u64 {
        self.hdu.block_bytes()
    }

    /// Data blocks in the ring.
    pub fn blocks(&self) -> u64 {
        self.hdu.blocks()
    }

    /// Waits for the next header and returns it (up to its first NUL).
    pub fn read_header(&mut self) -> Result<Vec<u8>> {
        // SAFETY: we hold the read lock; `dada_hdu_open` waits for a header and copies it
        // into the hdu's `header` (`header_size` bytes).
        let rc = unsafe { raw::dada_hdu_open(self.hdu.p) };
        check(
            rc.into(),
            "dada_hdu_open",
            self.hdu.key.0,
            "no header could be read",
        )?;
        // SAFETY: after `dada_hdu_open`, `header` points to `header_size` bytes.
        let h = unsafe {
            let p = &*self.hdu.p;
            std::slice::from_raw_parts(p.header.cast::<u8>(), p.header_size as usize)
        };
        let end = h.iter().position(|&b| b == 0).unwrap_or(h.len());
        Ok(h[..end].to_vec())
    }

    /// Data blocks written for this reader that it has not taken yet: how far behind the
    /// writer it is (the ring holds at most [`blocks`](Self::blocks)).
    pub fn behind_blocks(&self) -> u64 {
        let b = self.hdu.data_buf();
        // SAFETY: we hold the read lock, so `iread` is our slot; the call reads a semaphore.
        unsafe { raw::ipcbuf_get_nfull_iread(b, (*b).iread) }
    }

    /// The reader's drop-oldest policy: while more than `keep` (at least 1) whole blocks
    /// wait for this reader, the oldest is given back to the writer unread (cleared, as
    /// a reader that read it would). Only between two blocks (never in the middle of one);
    /// never the last block of the data. Returns the bytes dropped: the next
    /// [`read`](Self::read) starts that many bytes further into the data.
    ///
    /// psrdada's writer cannot clear a block for a reader (the reader's read of it could
    /// be under way), so dropping the oldest data is the reader's to do; a writer that
    /// never waits then finds clear blocks for the newest.
    pub fn drop_oldest(&mut self, keep: u64) -> Result<u64> {
        let io = self.hdu.data_io();
        let b = self.hdu.data_buf();
        let key = self.hdu.key.0;
        let keep = keep.max(1);
        let mut dropped = 0;
        // SAFETY: we hold the read lock; `io` is this process's ipcio state. A read that
        // ends at a block's end has ipcio take the next block at once (`curbuf`, 0 bytes
        // read): that one is the oldest waiting. Cleared here, it is let go the way
        // `ipcio_read` lets go of a block it read to the end.
        unsafe {
            if !(*io).curbuf.is_null() {
                if (*io).bytes != 0 || self.behind_blocks() < keep {
                    return Ok(0);
                }
                clear_read(b, key)?;
                dropped += (*io).curbufsz;
                (*io).curbuf = std::ptr::null_mut();
                (*io).bytes = 0;
            }
        }
        while self.behind_blocks() > keep {
            let mut bytes = 0u64;
            // SAFETY: as above; a full block waits (behind > 1), so the call does not wait;
            // the block is cleared right after, unread.
            let p = unsafe { raw::ipcbuf_get_next_read(b, &mut bytes) };
            non_null(p, "ipcbuf_get_next_read", key, "the data block failed")?;
            clear_read(b, key)?;
            dropped += bytes;
        }
        Ok(dropped)
    }

    /// Reads data into `buf`, waiting for it; 0 at the end of data.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        // SAFETY: we hold the read lock; the library writes at most `buf.len()` bytes.
        let n = unsafe { raw::ipcio_read(self.hdu.data_io(), buf.as_mut_ptr().cast(), buf.len()) };
        Ok(check(
            n as i64,
            "ipcio_read",
            self.hdu.key.0,
            "the data block failed",
        )? as usize)
    }
}

/// Clears the block the reader of `b` took (`ipcbuf_mark_cleared`), unread or read.
fn clear_read(b: *mut raw::ipcbuf_t, key: i32) -> Result<()> {
    // SAFETY: `b` is a data block this process reads (locked), with a block taken.
    let rc = unsafe { raw::ipcbuf_mark_cleared(b) };
    check(
        rc.into(),
        "ipcbuf_mark_cleared",
        key,
        "the data block failed",
    )?;
    Ok(())
}

impl Drop for Reader {
    fn drop(&mut self) {
        if std::mem::take(&mut self.locked) {
            // SAFETY: we hold the read lock.
            unsafe { raw::dada_hdu_unlock_read(self.hdu.p) };
        }
    }
}
