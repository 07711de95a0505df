//! `dada_read`: a PSRDADA reader written straight against the psrdada C library, as
//! `dada_dbdisk` reads a ring: it waits for the ring at KEY to exist, locks it for reading,
//! takes the header, then the data to the end of data, and writes them to OUT.header and
//! OUT.data. The peer of rtdaq's ring writer in tests: it shares only the C library with it.
//!
//!   cargo run -p rtdaq-dada --example dada_read -- KEY OUT [WAIT_S=30]
//!
//! Prints one JSON line: {"header_bytes": n, "data_bytes": n}. Exit 1 on a library failure,
//! 2 when no ring appears at KEY within WAIT_S seconds.
//!
//! For tests of a reader that dies in the middle of the data: `DADA_READ_CHUNK=N` reads N
//! bytes per `ipcio_read` (default 1 MiB); `DADA_READ_PAUSE_AFTER=N` stops reading once N
//! bytes are read, prints {"paused_at": n} and sleeps until killed (holding the header and,
//! mid-buffer, the data buffer it was reading, as a reader killed there does).

use rtdaq_dada::{raw, Key};
use std::io::Write;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        eprintln!("usage: dada_read KEY OUT [WAIT_S]");
        std::process::exit(2);
    }
    let key = Key::parse(&args[1]).unwrap_or_else(|e| {
        eprintln!("dada_read: {e}");
        std::process::exit(2)
    });
    let wait = Duration::from_secs_f64(args.get(3).and_then(|s| s.parse().ok()).unwrap_or(30.0));
    let mut header_out = std::fs::File::create(format!("{}.header", args[2])).unwrap();
    let mut data_out =
        std::io::BufWriter::new(std::fs::File::create(format!("{}.data", args[2])).unwrap());
    // SAFETY: the library's documented reader sequence; every pointer is the library's own
    // and lives until `dada_hdu_destroy`; `buf` outlives each `ipcio_read`.
    let (hbytes, dbytes) = unsafe {
        let hdu = raw::dada_hdu_create(std::ptr::null_mut());
        raw::dada_hdu_set_key(hdu, key.0);
        let t0 = Instant::now();
        while raw::dada_hdu_connect(hdu) < 0 {
            if t0.elapsed() > wait {
                eprintln!("dada_read: no ring at key {key} after {wait:?}");
                std::process::exit(2);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if raw::dada_hdu_lock_read(hdu) < 0 || raw::dada_hdu_open(hdu) < 0 {
            eprintln!("dada_read: could not lock the ring at key {key} or read its header");
            std::process::exit(1);
        }
        let h = std::slice::from_raw_parts((*hdu).header.cast::<u8>(), (*hdu).header_size as usize);
        let h = &h[..h.iter().position(|&b| b == 0).unwrap_or(h.len())];
        header_out.write_all(h).unwrap();
        let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
        let mut buf = vec![0u8; env("DADA_READ_CHUNK").unwrap_or(1 << 20) as usize];
        let pause_after = env("DADA_READ_PAUSE_AFTER");
        let mut total = 0u64;
        loop {
            if pause_after.is_some_and(|p| total >= p) {
                data_out.flush().unwrap();
                println!("{{\"paused_at\": {total}}}");
                std::io::stdout().flush().unwrap();
                loop {
                    std::thread::sleep(Duration::from_secs(3600));
                }
            }
            let n = raw::ipcio_read((*hdu).data_block, buf.as_mut_ptr().cast(), buf.len());
            if n < 0 {
                eprintln!("dada_read: ipcio_read failed after {total} bytes");
                std::process::exit(1);
            }
            if n == 0 {
                break;
            }
            data_out.write_all(&buf[..n as usize]).unwrap();
            total += n as u64;
        }
        raw::dada_hdu_unlock_read(hdu);
        raw::dada_hdu_destroy(hdu);
        (h.len(), total)
    };
    data_out.flush().unwrap();
    println!("{{\"header_bytes\": {hbytes}, \"data_bytes\": {dbytes}}}");
}
