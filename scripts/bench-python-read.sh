#!/usr/bin/env bash
# bench-python-read.sh: the rtdaq Python package's read throughput (issue #32) against
# numpy.fromfile on the same files. rtdaq itself records SECS seconds of the default job
# (configs/host-udp-record.toml: 1 Gb/s of 1400-byte datagrams, to pcap and DADA), then each
# measurement runs in a fresh Python process (its own peak RSS):
#   dada-rtdaq      rtdaq.open(F).data (memory-mapped) XOR-reduced as uint64
#   dada-fromfile   numpy.fromfile(F, uint8, offset=HDR_SIZE) XOR-reduced as uint64
#   dada-readinto   one readinto() of the same bytes into an array allocated and touched
#                   before the clock starts (the copy alone, no first-touch page faults)
#   pcap-rtdaq      rtdaq.open(F): the table of every record (native scan of the mapped file)
#                   and payloads() as one 2-D view (no copy)
#   pcap-fromfile   numpy.fromfile(F, uint8): the bytes only, no record found
# warm (the file in the page cache) and cold (sync; drop_caches before each run, root),
# interleaved: every repeat runs every mode in both states. min/median/max.
#   scripts/bench-python-read.sh OUT [REPS=5] [SECS=7]      -> OUT/results.txt
# Needs target/release/rtdaq and the package installed in target/pyenv (scripts/test.sh's
# python step, or: target/pyenv/bin/pip install ./python).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
. scripts/lib/bench.sh
OUT=${1:?usage: bench-python-read.sh OUT [REPS] [SECS]}
REPS=${2:-5}
SECS=${3:-7}
PY=target/pyenv/bin/python
[ -x target/release/rtdaq ] || { echo "target/release/rtdaq is missing: cargo build --release" >&2; exit 1; }
"$PY" -c 'import rtdaq' || { echo "the rtdaq package is not installed in target/pyenv: target/pyenv/bin/pip install ./python" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "cold-cache runs drop the page cache: run as root" >&2; exit 1; }
rm -rf "$OUT/rec"
mkdir -p "$OUT/rec"
bench_host_facts | tee "$OUT/host.txt"
target/release/rtdaq run --config configs/host-udp-record.toml --duration "$SECS" \
    --output-dir "$OUT/rec" --report-json "$OUT/rec/report.json" > "$OUT/rtdaq-run.txt" 2>&1
dada=$(echo "$OUT"/rec/*.dada)
pcap=$(echo "$OUT"/rec/*.pcap)
if [ ! -f "$dada" ] || [ ! -f "$pcap" ]; then
    echo "expected one .dada and one .pcap in $OUT/rec" >&2
    exit 1
fi
stat -c '%n %s bytes' "$dada" "$pcap" | tee -a "$OUT/host.txt"

cat > "$OUT/one.py" <<'EOP'
import resource, sys, time
import numpy as np
import rtdaq

mode, path = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
if mode == "dada-rtdaq":
    d = rtdaq.open(path).data
    n = d.size // 8 * 8
    x = int(np.bitwise_xor.reduce(d[:n].view(np.uint64)))
    nbytes = d.size
elif mode == "dada-fromfile":
    hdr = int(rtdaq.parse_header(open(path, "rb").read(4096))["HDR_SIZE"])
    d = np.fromfile(path, np.uint8, offset=hdr)
    n = d.size // 8 * 8
    x = int(np.bitwise_xor.reduce(d[:n].view(np.uint64)))
    nbytes = d.size
elif mode == "dada-readinto":
    hdr = int(rtdaq.parse_header(open(path, "rb").read(4096))["HDR_SIZE"])
    import os
    d = np.empty(os.path.getsize(path) - hdr, np.uint8)
    d[:] = 1  # touched before the clock: no first-touch page faults in the figure
    t0 = time.perf_counter()
    with open(path, "rb", buffering=0) as f:
        f.seek(hdr)
        got = f.readinto(memoryview(d))
    assert got == d.size
    n = d.size // 8 * 8
    x = int(np.bitwise_xor.reduce(d[:n].view(np.uint64)))
    nbytes = d.size
elif mode == "pcap-rtdaq":
    rec = rtdaq.open(path)
    p = rec.payloads()
    x, nbytes = len(rec), rec.data.size
    assert p.shape[0] == x
elif mode == "pcap-fromfile":
    d = np.fromfile(path, np.uint8)
    x, nbytes = 0, d.size
else:
    sys.exit(f"unknown mode {mode}")
t = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(f"mode {mode} bytes {nbytes} secs {t:.6f} maxrss_kib {rss} check {x}")
EOP

: > "$OUT/log"
for rep in $(seq 1 "$REPS"); do
    for cache in warm cold; do
        for mode in dada-rtdaq dada-fromfile dada-readinto pcap-rtdaq pcap-fromfile; do
            f=$dada
            [[ $mode == pcap-* ]] && f=$pcap
            if [ $cache = cold ]; then sync; echo 3 > /proc/sys/vm/drop_caches; else cat "$f" > /dev/null; fi
            echo "cache $cache $("$PY" "$OUT/one.py" "$mode" "$f")" | tee -a "$OUT/log"
        done
    done
    echo "rep $rep done" >&2
done
"$PY" - "$OUT/log" <<'EOP' | tee "$OUT/results.txt"
import statistics as st, sys
r, dada_checks = {}, set()
for line in open(sys.argv[1]):
    f = line.split()
    v = dict(zip(f[0::2], f[1::2]))
    k = (v["cache"], v["mode"])
    r.setdefault(k, []).append((int(v["bytes"]) / float(v["secs"]) / 1e9, int(v["maxrss_kib"]) / 1024))
    if v["mode"].startswith("dada"):
        dada_checks.add(v["check"])
fmt = lambda x, d: f"{min(x):.{d}f} / {st.median(x):.{d}f} / {max(x):.{d}f}"
for (cache, mode), v in sorted(r.items()):
    g, m = [a for a, _ in v], [b for _, b in v]
    print(f"{cache:4} {mode:14} {fmt(g, 2)} GB/s, peak RSS {fmt(m, 0)} MiB (min/median/max, n={len(g)})")
for cache in ("warm", "cold"):
    for kind in ("dada", "pcap"):
        a = st.median(x for x, _ in r[(cache, f"{kind}-rtdaq")])
        b = st.median(x for x, _ in r[(cache, f"{kind}-fromfile")])
        print(f"{cache} {kind}: median rtdaq/fromfile {a / b:.2f}x")
assert len(dada_checks) == 1, f"the DADA readers disagree on the data's XOR: {dada_checks}"
EOP
