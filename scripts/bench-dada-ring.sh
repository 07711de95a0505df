#!/usr/bin/env bash
# bench-dada-ring.sh: PSRDADA ring write rate per writer core (issue #32): rtdaq's writer
# (rtdaq-dada Writer::try_write: each datagram copied whole into the data block in place)
# against the psrdada library's own writer call (ipcio_write, as dada_junkdb writes), on the
# same ring (NBUFS x BUFSZ), the same DGRAM-byte datagrams, GB GiB each run; the writer on
# core 0, a reader on core 1 handing every block back without copying
# (hal/dada/benches/ring_write.rs). Interleaved repeats, min/median/max.
#   scripts/bench-dada-ring.sh OUT [REPS=5] [GB=4] [DGRAM=8000]   -> OUT/results.txt
# Env NBUFS (16), BUFSZ (4194304) pass through to the bench.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/lib/bench.sh
. scripts/lib/bench.sh
OUT=${1:?usage: bench-dada-ring.sh OUT [REPS] [GB] [DGRAM]}
REPS=${2:-5}
GB=${3:-4}
DGRAM=${4:-8000}
mkdir -p "$OUT"
bench=$(bench_exe ring_write -p rtdaq-dada)
: > "$OUT/log"
for rep in $(seq 1 "$REPS"); do
    for mode in rtdaq ipcio; do
        # The library's reader prints "ipcbuf_eod true" at the end of data: not a result.
        MODE=$mode GB=$GB DGRAM=$DGRAM WRITER_CORE=0 READER_CORE=1 "$bench" 2>/dev/null |
            tee -a "$OUT/log"
    done
    echo "rep $rep done" >&2
done
python3 - "$OUT/log" "$GB" "$DGRAM" <<'EOP' | tee "$OUT/results.txt"
import statistics as st, sys
r = {}
for line in open(sys.argv[1]):
    f = line.split()
    if f and f[0] == "ring_write":
        v = dict(zip(f[1::2], f[2::2]))
        r.setdefault(v["mode"], []).append((float(v["gbps"]), float(v["cpu_s_per_gb"])))
fmt = lambda x, d: f"{min(x):.{d}f} / {st.median(x):.{d}f} / {max(x):.{d}f}"
for m in ("rtdaq", "ipcio"):
    g, c = [a for a, _ in r[m]], [b for _, b in r[m]]
    print(f"{m:6} {fmt(g, 2)} Gb/s, writer {fmt(c, 4)} CPU-s/GB (min/median/max, n={len(g)}, "
          f"{sys.argv[2]} GiB of {sys.argv[3]}-byte datagrams a run)")
print(f"median ratio rtdaq/ipcio: {st.median(x for x, _ in r['rtdaq']) / st.median(x for x, _ in r['ipcio']):.2f}x Gb/s, "
      f"{st.median(y for _, y in r['rtdaq']) / st.median(y for _, y in r['ipcio']):.2f}x CPU per GB")
EOP
