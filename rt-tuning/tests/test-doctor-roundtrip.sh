#!/usr/bin/env bash
# rt-tuning/tests/test-doctor-roundtrip.sh: tune.sh and rtdaq doctor agree. On a temporary
# copy of a fixture tree (default tests/fixtures/host-untuned, removed at exit):
#   1. `rtdaq doctor --root COPY --json` before: some check tune.sh can fix fails;
#   2. `tune.sh apply --root COPY`, then doctor again: every check tune.sh can fix passes (or
#      is n/a), and the checks still failing are exactly the ones that were failing before
#      and need a reboot or the operator (listed below) — tune.sh fixed nothing by pretending;
#   3. a second apply prints "nothing to do" and leaves the tree as it was.
#   Also: after apply no check tune.sh can fix is left at WARN either.
# Both doctor and tune.sh read the same deployment: CONFIG_FILE when given, else the binary's
# embedded config.
# Usage: rt-tuning/tests/test-doctor-roundtrip.sh [RTDAQ_BINARY] [FIXTURE_DIR] [CONFIG_FILE]
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$(realpath "${1:-target/release/rtdaq}")
FIXTURE=${2:-tests/fixtures/host-untuned}
CFG=()
if [ -n "${3:-}" ]; then CFG=(--config "$(realpath "$3")"); fi
[ -x "$BIN" ] || { echo "no rtdaq binary at $BIN" >&2; exit 2; }
[ -d "$FIXTURE" ] || { echo "no fixture tree $FIXTURE" >&2; exit 2; }
"$BIN" doctor --help >/dev/null 2>&1 || { echo "$BIN has no doctor subcommand" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq not found (apt-get install jq)" >&2; exit 2; }

# Checks tune.sh apply fixes at run time (names as doctor prints them; ":<if>" suffixes cut).
FIXABLE="cpu.governor cpu.cstates kernel.sched_rt_runtime_us kernel.timer_migration mm.hugepages mm.transparent_hugepages net.mtu net.irq_affinity pcie.mrrs"
# Checks that need a reboot (the GRUB snippet) or the operator: tune.sh must leave them failing.
# gpu.clocks: tune.sh locks them through nvidia-smi on a real host, but runs nothing under
# --root (doctor reads a text stand-in there), so here it is not fixable either.
OPERATOR="cmdline.isolcpus cmdline.nohz_full cmdline.rcu_nocbs cmdline.irqaffinity kernel.preempt_rt mm.swap pcie.mps gpu.present gpu.bar1 gpu.direct gpu.clocks"

T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cp -a "$FIXTURE" "$T/root"
R=$T/root
fails=0
pass() { printf 'ok   %s\n' "$*"; }
fail() { printf 'FAIL %s\n' "$*"; fails=$((fails + 1)); }
base() { sed 's/:.*//'; }
in_list() { [[ " $2 " == *" $1 "* ]]; }

doctor_fails() { # the failing checks, one per line
    local rc=0
    "$BIN" doctor --root "$R" "${CFG[@]}" --json > "$T/doctor.json" 2>"$T/doctor.err" || rc=$?
    [ $rc -le 1 ] || { echo "doctor exited $rc: $(cat "$T/doctor.err")" >&2; return 1; }
    jq -r '.[] | select(.status == "fail") | .check' "$T/doctor.json" | sort
}

before=$(doctor_fails)
echo "doctor before tune.sh apply, failing: $(echo "$before" | tr '\n' ' ')"
fixable_before=$(while read -r c; do [ -n "$c" ] && in_list "$(base <<< "$c")" "$FIXABLE" && echo "$c"; done <<< "$before" || true)
tuned=0
if [ -n "$fixable_before" ]; then pass "the fixture fails checks tune.sh can fix: $(echo "$fixable_before" | tr '\n' ' ')"
else tuned=1; pass "the fixture fails no check tune.sh can fix: a tuned tree, apply must do nothing"; fi
unknown=$(while read -r c; do [ -n "$c" ] || continue; b=$(base <<< "$c"); in_list "$b" "$FIXABLE $OPERATOR" || echo "$c"; done <<< "$before" || true)
[ -z "$unknown" ] || fail "checks this test does not classify (update FIXABLE/OPERATOR): $unknown"

rc=0; rt-tuning/tune.sh apply --bin "$BIN" --root "$R" "${CFG[@]}" > "$T/apply1.out" 2>&1 || rc=$?
if [ $rc = 0 ]; then pass "tune.sh apply --root: exit 0"; else fail "tune.sh apply exited $rc:"; sed 's/^/     | /' "$T/apply1.out"; fi
if [ $tuned = 1 ]; then
    if grep -qx 'nothing to do' "$T/apply1.out"; then pass "apply on the tuned tree: nothing to do"
    else fail "apply changed a tuned tree:"; sed 's/^/     | /' "$T/apply1.out"; fi
fi

after=$(doctor_fails)
want=$(while read -r c; do [ -n "$c" ] && in_list "$(base <<< "$c")" "$OPERATOR" && echo "$c"; done <<< "$before" | sort || true)
echo "doctor after tune.sh apply, failing (need a reboot or the operator):"
# shellcheck disable=SC2001
echo "$after" | sed 's/^/    /'
if [ "$after" = "$want" ]; then pass "after apply exactly the reboot/operator checks fail (as before apply)"
else
    fail "after apply failing: [$(echo "$after" | tr '\n' ' ')], want [$(echo "$want" | tr '\n' ' ')]"
    jq -r '.[] | select(.status == "fail") | "     | \(.check): \(.detail)"' "$T/doctor.json"
fi

warned=$(jq -r '.[] | select(.status == "warn") | .check' "$T/doctor.json" |
    while read -r c; do in_list "$(base <<< "$c")" "$FIXABLE" && echo "$c"; done || true)
if [ -z "$warned" ]; then pass "after apply no check tune.sh can fix is left at WARN"
else fail "after apply still WARN: $(echo "$warned" | tr '\n' ' ')"; fi
echo "doctor after apply, not passing: $(jq -r '[.[] | select(.status == "warn" or .status == "fail") | "\(.check)=\(.status)"] | join(" ")' "$T/doctor.json")"

cp -a "$R" "$T/after1"
rc=0; rt-tuning/tune.sh apply --bin "$BIN" --root "$R" "${CFG[@]}" > "$T/apply2.out" 2>&1 || rc=$?
if [ $rc = 0 ] && grep -qx 'nothing to do' "$T/apply2.out"; then pass "second apply: nothing to do"
else fail "second apply (exit $rc) did something:"; sed 's/^/     | /' "$T/apply2.out"; fi
if diff -r --no-dereference "$T/after1" "$R" >/dev/null; then pass "second apply left the tree unchanged"; else fail "second apply changed the tree"; fi

echo
if [ $fails -gt 0 ]; then echo "test-doctor-roundtrip.sh: $fails failed"; exit 1; fi
echo "test-doctor-roundtrip.sh: all passed"
