#!/usr/bin/env bash
# The issue's "run the systemd unit under a real systemd for the socket engine and one raw
# engine" and "the systemd watchdog: each kind of thread stalled in turn, WATCHDOG=1 stops and
# the unit restarts", as a CI step. Boots the stock-kernel guest ONCE with systemd as PID 1
# (scripts/vm/guest-run.sh --init systemd, 3 CPUs: the default config's queue cores 0 and 1
# and one for systemd and the test) and runs guest/systemd-unit.sh there: the shipped
# rt-tuning/systemd/rtdaq.service, unchanged, with the rtdaq user from rtdaq.sysusers
# (systemd-sysusers) and the test's drop-ins:
#   a. socket engine (release): start (Type=notify), StatusText, SCHED_FIFO, user and
#      capabilities, clean stop, report.json;
#   b. AF_PACKET engine on the guest's veth (vB): start, receive, stop, report;
#   c. every drop-in in rt-tuning/systemd/rtdaq.service.d-examples/ starts the unit where its
#      devices/paths are absent; dpdk.conf without the "-" of ReadWritePaths= fails (226/NAMESPACE);
#   d. test-hooks binary: RTDAQ_TEST_STALL=io|consumer|generator|writer@3000, WatchdogSec=4s:
#      systemd's watchdog timeout and a restart for each.
# Usage: scripts/vm/systemd-unit.sh [SOCKET_BIN [AFPACKET_BIN [HOOKS_BIN]]]
#   SOCKET_BIN   default target/release/rtdaq (cargo build --release -p rtdaq: engine-socket,
#                embedded configs/host-loopback-udp.toml)
#   AFPACKET_BIN default target/engines/rtdaq-afpacket (scripts/build-engines.sh afpacket)
#   HOOKS_BIN    default target/rtdaq-test-hooks (a copy of target/debug/rtdaq built by
#                cargo build -p rtdaq --features test-hooks)
# The binaries travel into the guest without their debug info (objcopy --strip-debug of a copy).
# Exit: 0 all passed, 1 a check failed (or a binary is wrong), or guest-run.sh's harness code
# (240-245). Env: RTDAQ_VM_SMP (default 3), the other RTDAQ_VM_* of guest-run.sh.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
socket=${1:-target/release/rtdaq}
afpacket=${2:-target/engines/rtdaq-afpacket}
hooks=${3:-target/rtdaq-test-hooks}
say() { echo "systemd-unit: $*"; }
t0=$(date +%s)
# each binary is what its role needs (engine, test hooks or none)
want() {  # path, engine, hooks yes|no, how to build it
    local v
    [ -x "$1" ] || { say "FAIL $1: not an executable (build it: $4)"; exit 1; }
    v=$("$1" version 2>&1) || { say "FAIL $1 version: $v"; exit 1; }
    grep -q "^engine: *$2\$" <<< "$v" || { say "FAIL $1 is not an engine-$2 build ($4)"; exit 1; }
    if grep -q '^features:.*test-hooks' <<< "$v"; then
        [ "$3" = yes ] || { say "FAIL $1 has the test hooks ($4)"; exit 1; }
    else
        [ "$3" = no ] || { say "FAIL $1 has no test hooks ($4)"; exit 1; }
    fi
}
want "$socket" socket no "cargo build --release -p rtdaq"
want "$afpacket" afpacket no "scripts/build-engines.sh afpacket"
want "$hooks" socket yes "cargo build -p rtdaq --features test-hooks && cp target/debug/rtdaq $hooks"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
for b in socket:"$socket" afpacket:"$afpacket" test-hooks:"$hooks"; do
    objcopy --strip-debug "${b#*:}" "$stage/rtdaq-${b%%:*}" 2>/dev/null || cp "${b#*:}" "$stage/rtdaq-${b%%:*}"
done
RTDAQ_VM_SMP=${RTDAQ_VM_SMP:-3} scripts/vm/guest-run.sh --init systemd --timeout 400 \
    --bin "$stage/rtdaq-socket" --bin "$stage/rtdaq-afpacket" --bin "$stage/rtdaq-test-hooks" \
    --bin scripts/vm/guest/systemd-unit.sh -- systemd-unit.sh | tee "$stage/out.txt"
rc=${PIPESTATUS[0]}
t=$(( $(date +%s) - t0 ))
if [ "$rc" -eq 0 ] && grep -q '^systemd-unit: all [0-9]* passed' "$stage/out.txt" && ! grep -q '^systemd-unit: FAIL' "$stage/out.txt"; then
    say "all passed (${t} s in all)"
    exit 0
fi
say "FAIL the guest run exited $rc (${t} s in all)"
[ "$rc" -eq 0 ] && exit 1
exit "$rc"
