//! rtdaq-dada against the psrdada C library's own client calls: a ring created here is read
//! by a reader written straight against the library (`dada_hdu_*`, `ipcio_read`: what
//! `dada_dbdisk` does), and a ring written by the library's own writer calls is read by
//! this crate's [`Reader`]; the writer never waits when it asks for clear blocks first.

use rtdaq_dada::{raw, Key, Reader, Ring, RingSpec, Writer};

/// A key no other test (or process) uses: from the process id and a counter.
fn unique_key(n: i32) -> Key {
    Key(0x7d00_0000 | ((std::process::id() as i32 & 0xffff) << 8) | (n << 1))
}

fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ salt)
        .collect()
}

/// The library's own reader: lock, the header, the data to end of data.
fn c_read_all(key: Key) -> (Vec<u8>, Vec<u8>) {
    // SAFETY: the library's documented client sequence on a ring that exists; every
    // pointer is the library's own and lives until `dada_hdu_destroy`.
    unsafe {
        let hdu = raw::dada_hdu_create(std::ptr::null_mut());
        raw::dada_hdu_set_key(hdu, key.0);
        assert_eq!(raw::dada_hdu_connect(hdu), 0);
        assert_eq!(raw::dada_hdu_lock_read(hdu), 0);
        assert_eq!(raw::dada_hdu_open(hdu), 0);
        let h = std::slice::from_raw_parts((*hdu).header.cast::<u8>(), (*hdu).header_size as usize);
        let header = h[..h.iter().position(|&b| b == 0).unwrap_or(h.len())].to_vec();
        let mut data = Vec::new();
        let mut buf = vec![0u8; 100_000];
        loop {
            let n = raw::ipcio_read((*hdu).data_block, buf.as_mut_ptr().cast(), buf.len());
            assert!(n >= 0, "ipcio_read failed");
            if n == 0 {
                break;
            }
            data.extend_from_slice(&buf[..n as usize]);
        }
        assert_eq!(raw::dada_hdu_unlock_read(hdu), 0);
        raw::dada_hdu_destroy(hdu);
        (header, data)
    }
}

#[test]
fn the_library_reads_what_the_writer_wrote() {
    let key = unique_key(1);
    let spec = RingSpec {
        nbufs: 4,
        bufsz: 65_536,
        ..RingSpec::default()
    };
    let ring = Ring::create(key, &spec).unwrap();
    let header = b"HDR_VERSION 1.0\nHDR_SIZE 4096\nSOURCE rtdaq-test\n".to_vec();
    // 10 full blocks and a short one (which ends the data).
    let data = pattern(10 * 65_536 + 1000, 7);
    let want = data.clone();
    let writer = std::thread::spawn(move || {
        let mut w = Writer::attach(key).unwrap();
        assert_eq!((w.blocks(), w.block_bytes()), (4, 65_536));
        w.write_header(&header).unwrap();
        for chunk in data.chunks(65_536) {
            let mut b = w.open_block().unwrap();
            b.data()[..chunk.len()].copy_from_slice(chunk);
            b.close(chunk.len() as u64).unwrap();
        }
        w.end().unwrap();
    });
    let (h, got) = c_read_all(key);
    writer.join().unwrap();
    assert!(
        h.starts_with(b"HDR_VERSION 1.0\n"),
        "{}",
        String::from_utf8_lossy(&h)
    );
    assert!(String::from_utf8_lossy(&h).contains("SOURCE rtdaq-test"));
    assert_eq!(got.len(), want.len());
    assert!(got == want, "the data read differs from the data written");
    drop(ring);
    assert!(
        Writer::attach(key).is_err(),
        "the ring is gone with its owner"
    );
}

#[test]
fn a_writer_that_asks_first_never_waits_for_a_reader_that_reads_nothing() {
    let key = unique_key(2);
    let ring = Ring::create(
        key,
        &RingSpec {
            nbufs: 3,
            bufsz: 4096,
            ..RingSpec::default()
        },
    )
    .unwrap();
    let mut w = Writer::attach(key).unwrap();
    w.write_header(b"HDR_VERSION 1.0\n").unwrap();
    let mut written = 0;
    let mut refused = 0;
    for k in 0..10u8 {
        if w.clear_blocks() == 0 {
            refused += 1;
            continue;
        }
        let mut b = w.open_block().unwrap();
        b.data().fill(k);
        b.close(4096).unwrap();
        written += 1;
    }
    assert_eq!((written, refused), (3, 7), "3 blocks, then none clear");
    // A reader attached now reads them (the library's reader waits on, to the end of
    // data); as it clears them the writer can write again, without waiting.
    let reader = std::thread::spawn(move || {
        let mut r = Reader::attach(key).unwrap();
        assert!(r.read_header().unwrap().starts_with(b"HDR_VERSION"));
        let mut got = Vec::new();
        let mut buf = vec![0u8; 4096];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break got;
            }
            got.extend_from_slice(&buf[..n]);
        }
    });
    let t0 = std::time::Instant::now();
    while w.clear_blocks() < 3 {
        assert!(t0.elapsed().as_secs() < 10, "the reader cleared nothing");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    for k in 3..5u8 {
        let mut b = w.open_block().unwrap();
        b.data().fill(k);
        b.close(4096).unwrap();
    }
    w.end().unwrap();
    let got = reader.join().unwrap();
    assert_eq!(got.len(), 5 * 4096);
    for (k, block) in got.chunks(4096).enumerate() {
        assert!(block.iter().all(|&b| b == k as u8), "block {k}");
    }
    drop(ring);
}

#[test]
fn a_ring_left_behind_is_a_clear_error_and_can_be_removed() {
    let key = unique_key(3);
    let ring = Ring::create(key, &RingSpec::default()).unwrap();
    let again = Ring::create(key, &RingSpec::default())
        .err()
        .unwrap()
        .to_string();
    assert!(again.contains("already uses this key"), "{again}");
    assert!(again.contains("dada_db -k KEY -d"), "{again}");
    std::mem::forget(ring); // as a crashed creator leaves it
    Ring::remove(key).unwrap();
    assert!(Writer::attach(key)
        .err()
        .unwrap()
        .to_string()
        .contains("no ring at this key"));
    assert!(Ring::remove(key).is_err());
}

#[test]
fn try_write_streams_datagrams_whole_and_never_waits() {
    let key = unique_key(4);
    let ring = Ring::create(
        key,
        &RingSpec {
            nbufs: 4,
            bufsz: 10_000,
            ..RingSpec::default()
        },
    )
    .unwrap();
    let mut w = Writer::attach(key).unwrap();
    w.write_header(b"HDR_VERSION 1.0\n").unwrap();
    // 1400-byte datagrams cross block boundaries; with no reader, the 4 blocks take 28
    // of them whole (39 200 bytes), the 29th would need a fifth block: refused whole.
    let dgrams: Vec<Vec<u8>> = (0..40u8).map(|k| pattern(1400, k)).collect();
    let mut taken = 0;
    for d in &dgrams {
        if !w.try_write(d).unwrap() {
            break;
        }
        taken += 1;
    }
    assert_eq!(taken, 28, "4 x 10 000 bytes hold 28 whole datagrams");
    assert_eq!(w.pending_bytes(), 28 * 1400 - 3 * 10_000);
    assert_eq!(w.clear_blocks(), 0);
    assert!(w.open_block().is_err(), "a partly filled block is held");
    // The library's reader gets the 28 datagrams back to back, the last block short.
    let reader = std::thread::spawn(move || c_read_all(key));
    let t0 = std::time::Instant::now();
    let mut k = taken;
    while k < 40 {
        if w.try_write(&dgrams[k]).unwrap() {
            k += 1;
        } else {
            assert!(t0.elapsed().as_secs() < 10, "the reader cleared nothing");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    w.end().unwrap();
    let (_, got) = reader.join().unwrap();
    assert!(
        got == dgrams.concat(),
        "the stream is the datagrams, whole, in order"
    );
    drop(ring);
}

/// `examples/dada_read` (cargo builds the examples with the tests).
fn dada_read() -> std::path::PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    dir.join("examples/dada_read")
}

#[test]
fn another_process_reads_the_stream_with_the_library() {
    let key = unique_key(5);
    let prefix = rtdaq_testbed::test_path("ring");
    let reader = std::process::Command::new(dada_read())
        .arg(key.to_string())
        .arg(&prefix)
        .arg("20")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("examples/dada_read (cargo test builds it)");
    // The reader waits for the ring; create it a little later.
    std::thread::sleep(std::time::Duration::from_millis(200));
    let ring = Ring::create(
        key,
        &RingSpec {
            nbufs: 4,
            bufsz: 32_768,
            ..RingSpec::default()
        },
    )
    .unwrap();
    let mut w = Writer::attach(key).unwrap();
    w.write_header(b"HDR_VERSION 1.0\nSOURCE other-process\n")
        .unwrap();
    let dgrams: Vec<Vec<u8>> = (0..500u32)
        .map(|k| pattern(1000 + (k as usize % 7) * 61, k as u8))
        .collect();
    let t0 = std::time::Instant::now();
    for d in &dgrams {
        while !w.try_write(d).unwrap() {
            assert!(
                t0.elapsed().as_secs() < 20,
                "the reader process cleared nothing"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    w.end().unwrap();
    let done = reader.wait_with_output().unwrap();
    assert!(
        done.status.success(),
        "{}",
        String::from_utf8_lossy(&done.stdout)
    );
    let data = std::fs::read(prefix.with_extension("data")).unwrap();
    let header = std::fs::read_to_string(prefix.with_extension("header")).unwrap();
    drop(ring);
    assert!(header.contains("SOURCE other-process"), "{header}");
    assert!(
        data == dgrams.concat(),
        "the reader process got the stream whole"
    );
}
