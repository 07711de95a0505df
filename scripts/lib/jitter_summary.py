"""Tables of scripts/bench-jitter.sh's samples: python3 jitter_summary.py OUT_DIR.

Per load: rtdaq's generator wake-up latency (the report's tx wake_latency_ns) and cyclictest's
(its 1 µs histogram) as p50 / p99 / p99.9 / max in µs, each min / median / max over the
repeats; rtdaq's p99.9 over cyclictest's per sample; the generator's loop turns. A sample
whose rtdaq or cyclictest failed is listed and left out of the tables.
"""

import json
import statistics as st
import sys


def cyclictest_hist(path):
    """(counts by µs, overflows, max µs) of a cyclictest -h -q output."""
    counts, overflows, mx = {}, 0, None
    for line in open(path):
        if line.startswith("# Histogram Overflows:"):
            overflows = int(line.split(":")[1].split()[0])
        elif line.startswith("# Max Latencies:"):
            mx = int(line.split(":")[1].split()[0])
        elif line[:1].isdigit():
            f = line.split()
            if len(f) >= 2:
                counts[int(f[0])] = counts.get(int(f[0]), 0) + int(f[1])
    return counts, overflows, mx


def pct(counts, overflows, mx, p):
    """Nearest-rank percentile (µs) of a 1 µs histogram; overflows rank above every bin."""
    total = sum(counts.values()) + overflows
    rank = max(1, -(-p * total // 100))
    seen = 0
    for us in sorted(counts):
        seen += counts[us]
        if seen >= rank:
            return us + 0.5  # the bin holds [us, us + 1)
    return float(mx)


def mmm(xs, fmt="{:.1f}"):
    return " / ".join(fmt.format(x) for x in (min(xs), st.median(xs), max(xs)))


def main(out):
    print(open(f"{out}/host.txt").read())
    rows, bad = {}, []
    for line in open(f"{out}/samples.txt"):
        load, rep, rc = line.split()
        if rc != "0":
            bad.append(f"{load} repeat {rep}: exit {rc}")
            continue
        r = json.load(open(f"{out}/rtdaq-{load}-{rep}.json"))
        t = r["tx"]["queues"][0]
        w, turns = t["wake_latency_ns"], t["loop_turns_ns"]
        counts, ovf, mx = cyclictest_hist(f"{out}/cyclictest-{load}-{rep}.txt")
        c = {p: pct(counts, ovf, mx, p) for p in (50, 99, 99.9)}
        rows.setdefault(load, []).append({
            "r50": w["p50"] / 1e3, "r99": w["p99"] / 1e3, "r999": w["p999"] / 1e3,
            "rmax": w["max"] / 1e3, "n": w["count"],
            "c50": c[50], "c99": c[99], "c999": c[99.9], "cmax": float(mx),
            "cn": sum(counts.values()) + ovf,
            "t999": turns["p999"] / 1e3, "tmax": turns["max"] / 1e3,
            "lost": r["lost"]})
    print("| load | who | sleeps | p50 µs | p99 µs | p99.9 µs | max µs |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for load, rs in rows.items():
        print(f"| {load} | rtdaq generator | {mmm([x['n'] for x in rs], '{:.0f}')} | "
              f"{mmm([x['r50'] for x in rs])} | {mmm([x['r99'] for x in rs])} | "
              f"{mmm([x['r999'] for x in rs])} | {mmm([x['rmax'] for x in rs])} |")
        print(f"| {load} | cyclictest | {mmm([x['cn'] for x in rs], '{:.0f}')} | "
              f"{mmm([x['c50'] for x in rs])} | {mmm([x['c99'] for x in rs])} | "
              f"{mmm([x['c999'] for x in rs])} | {mmm([x['cmax'] for x in rs])} |")
    print()
    print("| load | rtdaq p99.9 / cyclictest p99.9 | within 1.2x | generator loop turn p99.9 µs | max µs | lost |")
    print("|---|---:|---:|---:|---:|---:|")
    for load, rs in rows.items():
        ratios = [x["r999"] / max(x["c999"], 1.0) for x in rs]
        within = sum(1 for q in ratios if q <= 1.2)
        print(f"| {load} | {mmm(ratios, '{:.2f}')} | {within} of {len(rs)} | "
              f"{mmm([x['t999'] for x in rs])} | {mmm([x['tmax'] for x in rs])} | "
              f"{sum(x['lost'] for x in rs)} |")
    if bad:
        print()
        print("failed samples (left out): " + "; ".join(bad))


if __name__ == "__main__":
    main(sys.argv[1])
