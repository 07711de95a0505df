#!/usr/bin/env bash
# Smoke test of the guest harness (scripts/vm/guest-run.sh); what scripts/test.sh runs.
# Boots the guest four times (about 1 min under TCG on 2 cores once the guest is cached):
#   1. guest-run.sh -- ibv_devices             lists rxe0 and rxe1
#   2. stock kernel: rdma_server/rdma_client (rdmacm-utils) exchange their messages between
#      169.254.77.1 and .2, ibv_rc_pingpong rxe1 -> rxe0, --bin, --out, exit code 3 comes back
#   3. --kernel rt: PREEMPT_RT in uname -v and /sys/kernel/realtime, SCHED_FIFO via chrt and
#      a cyclictest pthread
#   4. the harness's own errors: --timeout (exit 244), boot time limit (one more boot, then
#      exit 242)
# and that no qemu or run directory is left behind. Needs root (builds the guest once).
# Exit: 0 all passed, 1 a check failed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
# shellcheck source=scripts/vm/common.sh
. scripts/vm/common.sh
G=scripts/vm/guest-run.sh
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass() { echo "selftest: PASS $*"; }
fail() { echo "selftest: FAIL $*"; fails=$((fails + 1)); }
timed() {  # name, then the command: runs it, output to $tmp/<name>.{out,err}, sets rc and secs
    local name=$1 t0; shift
    t0=$(date +%s)
    "$@" > >(tee "$tmp/$name.out") 2> >(tee "$tmp/$name.err" >&2)
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    sleep 0.2  # let tee finish
}

# what other guest-run.sh calls (another test, in parallel) have running now: not ours
guests() { pgrep -f "qemu-system-x86_64 .*$VM_WORK/runs/" | sort; }
rundirs() { find "$VM_WORK/runs" -mindepth 1 -maxdepth 1 -printf "%f\n" 2>/dev/null | sort; }
guests_before=$(guests)
rundirs_before=$(rundirs)

# 0. build (or find) the guest: its time is not a guest run's
t0=$(date +%s)
scripts/vm/build-guest.sh || { echo "selftest: FAIL building the guest"; exit 1; }
echo "selftest: guest ready ($(( $(date +%s) - t0 )) s), accel $(vm_accel)"

# 1.
timed devices $G -- ibv_devices
if [ $rc -eq 0 ] && grep -qE '^\s+rxe0\s' "$tmp/devices.out" && grep -qE '^\s+rxe1\s' "$tmp/devices.out"; then
    pass "guest-run.sh -- ibv_devices lists rxe0 and rxe1 (${secs} s)"
else
    fail "guest-run.sh -- ibv_devices: exit $rc, rxe0/rxe1 not both listed"
fi

# 2.
timed std $G --kernel std --timeout 120 --out "$tmp/out" --bin scripts/vm/guest/selftest-std.sh -- selftest-std.sh 3
if [ $rc -eq 3 ] && grep -q 'rdma_client: end 0' "$tmp/std.out" && grep -q 'selftest-std: all passed' "$tmp/std.out"; then
    pass "stock kernel: rdma_server <-> rdma_client, RC ping-pong, exit code 3 passed through (${secs} s)"
else
    fail "stock kernel: exit $rc (want 3), see the selftest-std lines above"
fi
if grep -q 'written in the guest' "$tmp/out/selftest-std.txt" 2>/dev/null; then
    pass "--out: the guest's \$RTDAQ_VM_OUT came back"
else
    fail "--out: $tmp/out/selftest-std.txt missing"
fi

# 3.
timed rt $G --kernel rt --timeout 120 --bin scripts/vm/guest/selftest-rt.sh -- selftest-rt.sh
if [ $rc -eq 0 ] && grep -q 'selftest-rt: all passed' "$tmp/rt.out"; then
    pass "rt kernel: PREEMPT_RT, /sys/kernel/realtime = 1, SCHED_FIFO threads (${secs} s)"
else
    fail "rt kernel: exit $rc, see the selftest-rt lines above"
fi

# 4.
timed timeout $G --timeout 2 -- sleep 600
if [ $rc -eq 244 ] && grep -q 'timed out' "$tmp/timeout.err"; then
    pass "--timeout 2 -- sleep 600: exit 244 with a message (${secs} s)"
else
    fail "--timeout 2 -- sleep 600: exit $rc (want 244)"
fi
timed boot env RTDAQ_VM_BOOT_TIMEOUT=1 $G -- true
if [ $rc -eq 242 ] && grep -q 'did not start COMMAND' "$tmp/boot.err" &&
    [ "$(grep -c 'booting once more' "$tmp/boot.err")" -eq 1 ] &&
    [ "$(grep -c '^guest-run: booting the' "$tmp/boot.err")" -eq 2 ]; then
    pass "boot time limit 1 s: a hung boot is retried once, then exit 242 with a message"
else
    fail "boot time limit 1 s: exit $rc (want 242)"
fi

# nothing left behind
left_guests=$(comm -13 <(echo "$guests_before") <(guests))
left_dirs=$(comm -13 <(echo "$rundirs_before") <(rundirs))
if [ -n "$left_guests" ]; then
    fail "guest qemu still running: pid(s) $(echo "$left_guests" | tr '\n' ' ')"
elif [ -n "$left_dirs" ]; then
    fail "run directories left in $VM_WORK/runs: $(echo "$left_dirs" | tr '\n' ' ')"
else
    pass "no qemu and no run directory left behind"
fi

if [ $fails -ne 0 ]; then echo "selftest: $fails check(s) failed"; exit 1; fi
echo "selftest: all passed"
