//! Ring write rate: rtdaq's writer (`Writer::try_write`, each datagram copied whole into the
//! data block in place) against the psrdada library's own writer call (`ipcio_write`, what
//! `dada_junkdb` and most PSRDADA writers use), on the same ring, writing the same
//! datagrams; a reader thread on another core hands every block back
//! (`ipcio_open_block_read` / `ipcio_close_block_read`, no copy, so the writer is the limit).
//!
//! Env: `MODE` (`rtdaq` | `ipcio`), `GB` (data written, default 4), `DGRAM` (bytes per
//! datagram, default 8000), `NBUFS` (default 16), `BUFSZ` (default 4194304), `WRITER_CORE`
//! (default 0), `READER_CORE` (default 1). Prints one line:
//! `ring_write mode .. bytes .. wall_s .. gbps .. writer_cpu_s .. cpu_s_per_gb ..`.

use rtdaq_dada::{raw, Key, Ring, RingSpec, Writer};
use std::time::Instant;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn pin(core: u64) {
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET writes inside it; the call reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core as usize, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn thread_cpu_s() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// The reader: hands every block back until the end of data.
fn drain(key: Key) -> u64 {
    let mut total = 0u64;
    // SAFETY: the library's reader sequence on a ring that exists; pointers are the
    // library's own and live until `dada_hdu_destroy`.
    unsafe {
        let hdu = raw::dada_hdu_create(std::ptr::null_mut());
        raw::dada_hdu_set_key(hdu, key.0);
        assert_eq!(raw::dada_hdu_connect(hdu), 0);
        assert_eq!(raw::dada_hdu_lock_read(hdu), 0);
        assert_eq!(raw::dada_hdu_open(hdu), 0);
        loop {
            let (mut size, mut id) = (0u64, 0u64);
            let p = raw::ipcio_open_block_read((*hdu).data_block, &mut size, &mut id);
            if p.is_null() || size == 0 {
                break;
            }
            total += size;
            raw::ipcio_close_block_read((*hdu).data_block, size);
        }
        raw::dada_hdu_unlock_read(hdu);
        raw::dada_hdu_destroy(hdu);
    }
    total
}

fn main() {
    let mode = std::env::var("MODE").unwrap_or_else(|_| "rtdaq".into());
    let total = env("GB", 4) << 30;
    let dgram = env("DGRAM", 8000) as usize;
    let spec = RingSpec {
        nbufs: env("NBUFS", 16),
        bufsz: env("BUFSZ", 4 << 20),
        ..RingSpec::default()
    };
    let key = Key(0x7e00_0000 | (std::process::id() as i32 & 0xffff) << 4);
    let ring = Ring::create(key, &spec).expect("create the ring");
    let reader_core = env("READER_CORE", 1);
    let reader = std::thread::spawn(move || {
        pin(reader_core);
        drain(key)
    });
    pin(env("WRITER_CORE", 0));
    let mut w = Writer::attach(key).expect("attach the writer");
    w.write_header(b"HDR_VERSION 1.0\nHDR_SIZE 4096\n").unwrap();
    let data: Vec<u8> = (0..dgram).map(|i| i as u8).collect();
    let n = total / dgram as u64;
    let (t0, c0) = (Instant::now(), thread_cpu_s());
    match mode.as_str() {
        "rtdaq" => {
            for _ in 0..n {
                while !w.try_write(&data).unwrap() {
                    std::hint::spin_loop();
                }
            }
            w.end().unwrap();
        }
        "ipcio" => {
            // The library's own writer on the same ring: take the hdu's data block.
            drop(w);
            // SAFETY: the library's writer sequence; `buf` outlives each call.
            unsafe {
                let hdu = raw::dada_hdu_create(std::ptr::null_mut());
                raw::dada_hdu_set_key(hdu, key.0);
                assert_eq!(raw::dada_hdu_connect(hdu), 0);
                assert_eq!(raw::dada_hdu_lock_write(hdu), 0);
                let mut buf = data.clone();
                for _ in 0..n {
                    let rc = raw::ipcio_write((*hdu).data_block, buf.as_mut_ptr().cast(), dgram);
                    assert_eq!(rc, dgram as isize);
                }
                raw::dada_hdu_unlock_write(hdu);
                raw::dada_hdu_destroy(hdu);
            }
        }
        m => panic!("MODE {m:?}: use rtdaq or ipcio"),
    }
    let (wall, cpu) = (t0.elapsed().as_secs_f64(), thread_cpu_s() - c0);
    let read = reader.join().unwrap();
    drop(ring);
    let bytes = n * dgram as u64;
    assert_eq!(read, bytes, "the reader got every byte");
    println!(
        "ring_write mode {mode} bytes {bytes} wall_s {wall:.3} gbps {:.2} writer_cpu_s {cpu:.3} cpu_s_per_gb {:.4}",
        bytes as f64 * 8.0 / wall / 1e9,
        cpu / (bytes as f64 / 1e9)
    );
}
