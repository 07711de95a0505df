//! Readers that leave and readers that fall behind:
//! - a reader that leaves a ring in the middle of the data, and the next one that takes its
//!   place: the writer's [`Writer::watch_readers`] gives the slot back what the leaver held,
//!   and the next reader (`examples/dada_read`, the library's own reader calls in another
//!   process) reads a header whose `OBS_OFFSET` says where it starts, then every byte from
//!   there to the end of data;
//! - a reader that keeps N blocks ([`Reader::drop_oldest`]): the oldest unread blocks go back
//!   to the writer, which finds room for the newest.

use rtdaq_dada::{Key, Reader, Ring, RingSpec, SlotEvents, Writer};
use std::io::BufRead;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const BUFSZ: usize = 65_536;
const HEADER: &[u8] = b"HDR_VERSION 1.0\nHDR_SIZE 4096\nOBS_OFFSET 0\nSOURCE reattach\n";

fn unique_key(n: i32) -> Key {
    Key(0x7e00_0000 | ((std::process::id() as i32 & 0xffff) << 8) | (n << 1))
}

fn stream(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i % 251) as u8 ^ (i / BUFSZ) as u8)
        .collect()
}

fn ring(key: Key, readers: u32) -> (Ring, Writer) {
    let spec = RingSpec {
        nbufs: 8,
        bufsz: BUFSZ as u64,
        readers,
        ..RingSpec::default()
    };
    let ring = Ring::create(key, &spec).unwrap();
    let mut w = Writer::attach(key).unwrap();
    w.write_header(HEADER).unwrap();
    (ring, w)
}

/// `examples/dada_read` on `key` into `name` in this test's directory; with `pause_after`,
/// it stops there (32 KiB reads) and says so on stdout.
fn dada_read(key: Key, name: &str, pause_after: Option<usize>) -> (Child, std::path::PathBuf) {
    let exe = std::env::current_exe().unwrap();
    let prefix = rtdaq_testbed::test_path(name);
    let mut cmd = Command::new(
        exe.parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("examples/dada_read"),
    );
    cmd.arg(key.to_string())
        .arg(&prefix)
        .arg("20")
        .stdout(Stdio::piped());
    if let Some(p) = pause_after {
        cmd.env("DADA_READ_CHUNK", "32768")
            .env("DADA_READ_PAUSE_AFTER", p.to_string());
    }
    (
        cmd.spawn()
            .expect("examples/dada_read (cargo test builds it)"),
        prefix,
    )
}

/// Waits for a pausing `dada_read` to say it paused.
fn wait_paused(child: &mut Child) -> String {
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("paused_at"), "{line:?}");
    line
}

/// Writes `data` in 4 KiB pieces, waiting for clear blocks (at most 20 s) and watching the
/// readers between pieces; what the watch saw, summed.
fn write(w: &mut Writer, data: &[u8]) -> SlotEvents {
    let mut seen = SlotEvents::default();
    let t0 = Instant::now();
    for piece in data.chunks(4096) {
        while !w.try_write(piece).unwrap() {
            let ev = w.watch_readers();
            seen.left += ev.left;
            seen.readied += ev.readied;
            seen.unready += ev.unready;
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "no reader cleared a block"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    seen
}

/// Watches the readers until a slot is readied (at most 10 s): what the watch saw, summed.
fn watch_until_readied(w: &mut Writer) -> SlotEvents {
    let mut seen = SlotEvents::default();
    let t0 = Instant::now();
    while seen.readied == 0 {
        let ev = w.watch_readers();
        seen.left += ev.left;
        seen.readied += ev.readied;
        seen.unready += ev.unready;
        seen.offset = ev.offset.or(seen.offset);
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "never readied: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    seen
}

/// The header and data a `dada_read` wrote, once it ended well.
fn read_back(child: Child, prefix: &std::path::Path) -> (String, Vec<u8>) {
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    (
        std::fs::read_to_string(prefix.with_extension("header")).unwrap(),
        std::fs::read(prefix.with_extension("data")).unwrap(),
    )
}

fn obs_offset(header: &str) -> usize {
    let line = header
        .lines()
        .find(|l| l.starts_with("OBS_OFFSET"))
        .unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn a_reader_killed_in_a_buffer_is_followed_where_it_stopped() {
    let key = unique_key(1);
    let (ring, mut w) = ring(key, 1);
    let data = stream(20 * BUFSZ + 1000);
    // 3.5 buffers read: it holds the header and the fourth buffer, half read.
    let (mut first, _) = dada_read(key, "first", Some(3 * BUFSZ + BUFSZ / 2));
    assert_eq!(write(&mut w, &data[..6 * BUFSZ]), SlotEvents::default());
    wait_paused(&mut first);
    assert_eq!(
        w.watch_readers(),
        SlotEvents::default(),
        "a live reader is left alone"
    );
    first.kill().unwrap();
    first.wait().unwrap();
    let ev = watch_until_readied(&mut w);
    assert_eq!(
        ev,
        SlotEvents {
            left: 1,
            readied: 1,
            unready: 0,
            offset: Some(3 * BUFSZ as u64)
        },
        "the slot gets its header and the held buffer back, from the buffer's first byte"
    );
    assert_eq!(w.watch_readers(), SlotEvents::default(), "readied once");
    let (next, prefix) = dada_read(key, "next", None);
    assert_eq!(write(&mut w, &data[6 * BUFSZ..]), SlotEvents::default());
    w.end().unwrap();
    let (header, got) = read_back(next, &prefix);
    assert_eq!(obs_offset(&header), 3 * BUFSZ, "{header}");
    assert!(header.contains("SOURCE reattach"), "{header}");
    assert!(
        got == data[3 * BUFSZ..],
        "the next reader reads from OBS_OFFSET to the end"
    );
    drop(ring);
}

#[test]
fn a_reader_that_unlocks_in_the_middle_is_followed_with_a_new_header() {
    let key = unique_key(2);
    let (ring, mut w) = ring(key, 1);
    let data = stream(12 * BUFSZ);
    write(&mut w, &data[..4 * BUFSZ]);
    let mut r = Reader::attach(key).unwrap();
    r.read_header().unwrap();
    let mut buf = vec![0u8; BUFSZ + BUFSZ / 2];
    assert_eq!(r.read(&mut buf).unwrap(), buf.len());
    drop(r);
    let ev = w.watch_readers();
    assert_eq!((ev.left, ev.readied, ev.unready), (1, 1, 0), "{ev:?}");
    // Unlocking does not clear the half-read block: it goes back, and the next reader
    // starts at its first byte.
    let offset = ev.offset.unwrap() as usize;
    assert_eq!(offset, BUFSZ);
    let (next, prefix) = dada_read(key, "next", None);
    assert_eq!(write(&mut w, &data[4 * BUFSZ..]), SlotEvents::default());
    w.end().unwrap();
    let (header, got) = read_back(next, &prefix);
    assert_eq!(obs_offset(&header), offset, "{header}");
    assert!(got == data[offset..]);
    drop(ring);
}

#[test]
fn of_two_readers_the_killed_ones_place_is_taken_and_the_other_reads_on() {
    let key = unique_key(3);
    let (ring, mut w) = ring(key, 2);
    let data = stream(24 * BUFSZ);
    let (stays, stays_prefix) = dada_read(key, "stays", None);
    let (mut killed, _) = dada_read(key, "killed", Some(2 * BUFSZ + BUFSZ / 2));
    write(&mut w, &data[..5 * BUFSZ]);
    wait_paused(&mut killed);
    killed.kill().unwrap();
    killed.wait().unwrap();
    // Readied once the other reader took the header (it may not have yet).
    let ev = watch_until_readied(&mut w);
    assert_eq!(
        (ev.left, ev.readied, ev.offset),
        (1, 1, Some(2 * BUFSZ as u64)),
        "{ev:?}"
    );
    let (next, next_prefix) = dada_read(key, "next", None);
    assert_eq!(write(&mut w, &data[5 * BUFSZ..]), SlotEvents::default());
    w.end().unwrap();
    let (header, got) = read_back(next, &next_prefix);
    assert_eq!(obs_offset(&header), 2 * BUFSZ, "{header}");
    assert!(got == data[2 * BUFSZ..]);
    let (header, got) = read_back(stays, &stays_prefix);
    assert_eq!(
        obs_offset(&header),
        0,
        "the other reader's header is the first one"
    );
    assert!(got == data, "the other reader read every byte");
    drop(ring);
}

#[test]
fn of_two_readers_one_that_unlocks_cannot_be_followed() {
    let key = unique_key(4);
    let (ring, mut w) = ring(key, 2);
    write(&mut w, &stream(2 * BUFSZ));
    let mut r = Reader::attach(key).unwrap();
    r.read_header().unwrap();
    let mut buf = vec![0u8; BUFSZ];
    r.read(&mut buf).unwrap();
    drop(r);
    // A new header would reach both readers: the slot is counted, once, as not readied.
    let ev = w.watch_readers();
    assert_eq!((ev.left, ev.readied, ev.unready), (1, 0, 1), "{ev:?}");
    assert_eq!(w.watch_readers(), SlotEvents::default());
    w.end().unwrap();
    drop(ring);
}

#[test]
fn a_reader_that_keeps_n_blocks_drops_the_oldest_unread() {
    let key = unique_key(5);
    let (ring, mut w) = ring(key, 1);
    let data = stream(12 * BUFSZ + 100);
    let block = |k: usize| &data[k * BUFSZ..(k + 1) * BUFSZ];
    write(&mut w, &data[..8 * BUFSZ]);
    assert!(!w.try_write(&data[..1]).unwrap(), "the ring is full");
    let mut r = Reader::attach(key).unwrap();
    r.read_header().unwrap();
    assert_eq!(r.behind_blocks(), 8);
    // 8 wait, 2 kept: the 6 oldest go back to the writer unread.
    assert_eq!(r.drop_oldest(2).unwrap(), 6 * BUFSZ as u64);
    let mut buf = vec![0u8; BUFSZ];
    assert_eq!(r.read(&mut buf).unwrap(), BUFSZ);
    assert!(buf == block(6));
    // The library took block 7 already (a read that ends a block takes the next); with 4
    // more written, 5 wait: block 7 and the next two go.
    write(&mut w, &data[8 * BUFSZ..12 * BUFSZ]);
    assert_eq!(r.drop_oldest(2).unwrap(), 3 * BUFSZ as u64);
    assert_eq!(r.read(&mut buf).unwrap(), BUFSZ);
    assert!(buf == block(10));
    write(&mut w, &data[12 * BUFSZ..]);
    w.end().unwrap();
    // Block 11 and the short last one: the last block of the data is never dropped.
    assert_eq!(r.drop_oldest(1).unwrap(), BUFSZ as u64);
    let mut rest = Vec::new();
    loop {
        let n = r.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        rest.extend_from_slice(&buf[..n]);
    }
    assert!(rest == data[12 * BUFSZ..]);
    drop(r);
    drop(ring);
}
