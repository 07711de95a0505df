#!/usr/bin/env bash
# rt-tuning/tests/test-tune.sh: tests tune.sh on a fake IGX Thor tree it builds in a temporary
# directory (removed at exit): 14 CPUs on powersave, every IRQ on every CPU, no hugepages,
# RT throttling on, timer migration on, THP madvise, a NIC eth7 (PCI 0000:03:00.0, MTU 1500,
# MRRS 512 in a config-space file), a plain kernel command line; and a config that needs
# 2M hugepages, MTU 9000 on eth7 and queue cores 2-5.
# Asserts: check reports changes and changes nothing; apply changes each item to its target;
# a second apply prints "nothing to do"; check is then clean except the reboot items; the
# GRUB snippet has the right parameters; the revert script restores the tree byte for byte;
# the grep-level config fallback reads the same numbers as `rtdaq config check`; GPU clocks
# through a stand-in nvidia-smi.
# Usage: rt-tuning/tests/test-tune.sh [RTDAQ_BINARY]   (default target/release/rtdaq)
set -euo pipefail
cd "$(dirname "$0")/../.."
TUNE=rt-tuning/tune.sh
BIN=${1:-target/release/rtdaq}
[ -x "$BIN" ] || { echo "no rtdaq binary at $BIN (cargo build --release -p rtdaq)" >&2; exit 2; }

T=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
fails=0
pass() { printf 'ok   %s\n' "$*"; }
fail() { printf 'FAIL %s\n' "$*"; fails=$((fails + 1)); }
expect() { # expect NAME VALUE WANT
    if [ "$2" = "$3" ]; then pass "$1 = $3"; else fail "$1: got '$2', want '$3'"; fi
}
has() { # has NAME FILE PATTERN
    if grep -qE -- "$3" "$2"; then pass "$1"; else fail "$1: no /$3/ in output:"; sed 's/^/     | /' "$2"; fi
}

# ---- the fake tree ----------------------------------------------------------------------------
R=$T/root
mk() { mkdir -p "$(dirname "$R$1")"; printf '%s\n' "$2" > "$R$1"; }
mk /sys/devices/system/cpu/online 0-13
for c in $(seq 0 13); do
    mk "/sys/devices/system/cpu/cpu$c/cpufreq/scaling_governor" powersave
    mk "/sys/devices/system/cpu/cpu$c/cpufreq/scaling_available_governors" "performance powersave"
    for k in 0 1 2; do
        mk "/sys/devices/system/cpu/cpu$c/cpuidle/state$k/name" "$(echo WFI cpu-sleep cluster-sleep | cut -d' ' -f$((k + 1)))"
        mk "/sys/devices/system/cpu/cpu$c/cpuidle/state$k/disable" 0
    done
done
for i in 0 1 24 25 140; do mk "/proc/irq/$i/smp_affinity_list" 0-13; done
mk /proc/irq/1/smp_affinity_list 3       # one IRQ already on a housekeeping-free CPU set
mk /proc/irq/25/smp_affinity_list 0-1    # one already on housekeeping: untouched
mk /proc/irq/default_smp_affinity 3fff
for kb in 2048 1048576; do
    for f in nr_hugepages free_hugepages resv_hugepages surplus_hugepages nr_overcommit_hugepages; do
        mk "/sys/kernel/mm/hugepages/hugepages-${kb}kB/$f" 0
    done
done
mk /proc/sys/kernel/sched_rt_runtime_us 950000
mk /proc/sys/kernel/timer_migration 1
mk /sys/kernel/mm/transparent_hugepage/enabled "always [madvise] never"
mk /proc/cmdline "BOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p1 ro quiet"
BDF=0000:03:00.0
mk /sys/class/net/eth7/mtu 1500
mkdir -p "$R/sys/bus/pci/devices/$BDF/net/eth7"
ln -s "../../../bus/pci/devices/$BDF" "$R/sys/class/net/eth7/device"
# PCI config space: capability list 0x34 -> 0x40 (PM, id 1) -> 0x60 (PCIe, id 0x10);
# Device Control at 0x68 = 0x2810 (MRRS 512, MPS 256, relaxed ordering)
cfg=$R/sys/bus/pci/devices/$BDF/config
head -c 256 /dev/zero > "$cfg"
poke() { printf '%b' "\\x$(printf %02x "$2")" | dd of="$cfg" bs=1 seek=$(($1)) conv=notrunc status=none; }
poke 0x34 0x40; poke 0x40 0x01; poke 0x41 0x60; poke 0x60 0x10; poke 0x61 0x00
poke 0x68 0x10; poke 0x69 0x28
cp -a "$R" "$T/orig"

cat > "$T/thor.toml" <<'EOF'
# test deployment: AF_PACKET on eth7 (MTU 9000), two RX queues on cores 2 and 4 (consumer 5),
# one 2M-hugepage region of 1024 x 9216 B = 9 MiB = 5 pages
name = "thor-afpacket-test"
platform = "igx-thor"
[engine]
kind = "afpacket"
[engine.afpacket]
block_size = 1048576
frame_size = 9216
block_count = 16
[[memory_regions]]
name = "rx_bufs"
kind = "huge"
buf_size = 9216
buf_count = 1024
[[interfaces]]
name = "nic"
address = "eth7"
mtu = 9000
[[interfaces.rx_queues]]
id = 0
cpu_core = 2
rt_priority = 50
batch_size = 64
timeout_us = 100
ring_depth = 1024
memory_regions = ["rx_bufs"]
mode = "direct"
[[interfaces.rx_queues]]
id = 1
cpu_core = 4
rt_priority = 50
batch_size = 64
timeout_us = 100
ring_depth = 1024
memory_regions = ["rx_bufs"]
mode = "indirect"
consumer_core = 5
[run]
duration_s = 5
EOF
if ! "$BIN" config check "$T/thor.toml" > "$T/cfgcheck.out" 2>&1; then
    echo "FAIL the test config is invalid:"; cat "$T/cfgcheck.out"; exit 1
fi

run() { # run NAME EXPECTED_RC ARGS... (output in $T/NAME.out)
    local name=$1 want=$2 rc=0; shift 2
    "$TUNE" "$@" --bin "$BIN" --root "$R" --config "$T/thor.toml" > "$T/$name.out" 2>&1 || rc=$?
    if [ "$rc" = "$want" ]; then pass "tune.sh $* exits $want"
    else fail "tune.sh $* exits $rc, want $want:"; sed 's/^/     | /' "$T/$name.out"; fi
}

# ---- config reading: rtdaq config check vs the grep-level fallback ------------------------------
run check1 1 check
has "config read through rtdaq config check" "$T/check1.out" 'read by rtdaq config check'
has "CPU split from board + config" "$T/check1.out" '^CPUs: 0-13; queue/consumer cores 2,4-5; isolate 2-13; housekeeping 0-1$'
has "hugepages from the config" "$T/check1.out" '^hugepages needed: 5 x 2M, 0 x 1G'
"$TUNE" check --bin none --root "$R" --config "$T/thor.toml" > "$T/fallback.out" 2>&1 || true
has "fallback reader used without a binary" "$T/fallback.out" 'grep-level TOML reading'
expect "fallback reads the same CPUs/hugepages/interfaces" \
    "$(grep -E '^(CPUs|hugepages needed):' "$T/fallback.out")" "$(grep -E '^(CPUs|hugepages needed):' "$T/check1.out")"

# ---- check changes nothing ------------------------------------------------------------------
if diff -r --no-dereference "$T/orig" "$R" > /dev/null; then pass "check changed nothing"; else fail "check changed the tree"; fi
for item in governor irq-affinity hugepages-2M sched-rt-runtime timer-migration transparent-hugepages cpu-idle-states mtu pcie-mrrs kernel-cmdline; do
    has "check: $item would change" "$T/check1.out" "^  change  $item "
done
has "check: GPU clocks skipped under --root" "$T/check1.out" '^  skip    gpu-clocks .*--root'

# ---- apply ------------------------------------------------------------------------------------
run apply1 0 apply
expect "governor cpu13" "$(cat "$R/sys/devices/system/cpu/cpu13/cpufreq/scaling_governor")" performance
expect "irq 24 affinity" "$(cat "$R/proc/irq/24/smp_affinity_list")" 0-1
expect "irq 1 affinity" "$(cat "$R/proc/irq/1/smp_affinity_list")" 0-1
expect "irq 25 affinity (untouched)" "$(cat "$R/proc/irq/25/smp_affinity_list")" 0-1
expect "default_smp_affinity" "$(cat "$R/proc/irq/default_smp_affinity")" 3
expect "nr_hugepages 2M" "$(cat "$R/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages")" 5
expect "free_hugepages 2M (fake kernel)" "$(cat "$R/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages")" 5
expect "sched_rt_runtime_us" "$(cat "$R/proc/sys/kernel/sched_rt_runtime_us")" -1
expect "timer_migration" "$(cat "$R/proc/sys/kernel/timer_migration")" 0
expect "THP" "$(cat "$R/sys/kernel/mm/transparent_hugepage/enabled")" "always madvise [never]"
expect "cpu5 state2 disabled" "$(cat "$R/sys/devices/system/cpu/cpu5/cpuidle/state2/disable")" 1
expect "cpu5 state0 left enabled" "$(cat "$R/sys/devices/system/cpu/cpu5/cpuidle/state0/disable")" 0
expect "cpu1 (housekeeping) state1 left enabled" "$(cat "$R/sys/devices/system/cpu/cpu1/cpuidle/state1/disable")" 0
expect "eth7 MTU" "$(cat "$R/sys/class/net/eth7/mtu")" 9000
expect "MRRS DevCtl (0x68)" "$(od -An -tx1 -j $((0x68)) -N2 "$cfg" | tr -d ' ')" 1058
has "apply prints revert commands" "$T/apply1.out" '^            revert: for c in 0 1 2 3 4 5 6 7 8 9 10 11 12 13; do echo powersave > '
has "apply writes the revert script" "$T/apply1.out" "^revert script: $R/var/lib/rtdaq/tune-revert.sh"
snip=$R/etc/default/grub.d/rtdaq.cfg
has "GRUB snippet: parameters" "$snip" '^RTDAQ_CMDLINE="isolcpus=managed_irq,domain,2-13 nohz_full=2-13 rcu_nocbs=2-13 irqaffinity=0-1 cpuidle.off=1"$'
# shellcheck disable=SC1090  # the generated snippet
if ( GRUB_CMDLINE_LINUX_DEFAULT="quiet"; . "$snip"; [ "$GRUB_CMDLINE_LINUX_DEFAULT" = "quiet $RTDAQ_CMDLINE" ] ); then
    pass "GRUB snippet appends to GRUB_CMDLINE_LINUX_DEFAULT when sourced"
else fail "GRUB snippet does not extend GRUB_CMDLINE_LINUX_DEFAULT"; fi
has "apply lists the reboot items" "$T/apply1.out" '^waiting for a reboot .*: isolcpus nohz_full rcu_nocbs irqaffinity$'
if grep -q 'reboot' "$T/apply1.out" && ! grep -qiE 'shutdown|systemctl (reboot|kexec)' rt-tuning/tune.sh rt-tuning/lib/*.sh; then
    pass "tune.sh never reboots (no reboot command in it)"
else fail "tune.sh has a reboot command"
fi

# ---- idempotent ---------------------------------------------------------------------------------
cp "$R/var/lib/rtdaq/tune-revert.sh" "$T/revert-after-1.sh"
run apply2 0 apply
has "second apply: nothing to do" "$T/apply2.out" '^nothing to do$'
if grep -q '^  changed' "$T/apply2.out"; then fail "second apply changed something"; else pass "second apply changed nothing"; fi
expect "revert script unchanged by a no-op apply" "$(cmp -s "$T/revert-after-1.sh" "$R/var/lib/rtdaq/tune-revert.sh" && echo same)" same
run check2 0 check
has "check after apply: only the reboot items" "$T/check2.out" '^check: 0 change\(s\) would be made$'

# ---- revert ------------------------------------------------------------------------------------
bash "$R/var/lib/rtdaq/tune-revert.sh" > "$T/revert.out" 2>&1 || fail "the revert script failed: $(cat "$T/revert.out")"
rm -rf "${R:?}/var" "${R:?}/etc"
if diff -r --no-dereference "$T/orig" "$R" > "$T/diff.out"; then pass "revert script restores the tree exactly"
else fail "revert left differences:"; sed 's/^/     | /' "$T/diff.out"; fi

# ---- GPU clocks through a stand-in nvidia-smi ----------------------------------------------------
cat > "$T/nvidia-smi" <<EOF
#!/bin/bash
state=$T/smi.state
[ -f \$state ] || echo "1000 5000" > \$state
read -r sm mem < \$state
case "\$*" in
--query-gpu=*) echo "0, \$sm, 2100, \$mem, 9000" ;;
*-lgc*) echo "2100 \$mem" > \$state ;;
*-lmc*) echo "\$sm 9000" > \$state ;;
*-rgc) echo "1000 \$mem" > \$state ;;
*-rmc) echo "\$sm 5000" > \$state ;;
esac
EOF
chmod +x "$T/nvidia-smi"
RTDAQ_TUNE_NVIDIA_SMI=$T/nvidia-smi run gpu1 0 apply
has "GPU SM clock locked" "$T/gpu1.out" "changed gpu-clocks .*SM clock 1000 -> locked at 2100 MHz"
has "GPU memory clock locked" "$T/gpu1.out" "changed gpu-clocks .*memory clock 5000 -> locked at 9000 MHz"
RTDAQ_TUNE_NVIDIA_SMI=$T/nvidia-smi run gpu2 0 apply
has "GPU clocks: second apply nothing to do" "$T/gpu2.out" '^nothing to do$'

# ---- usage errors ------------------------------------------------------------------------------
rc=0; "$TUNE" apply --root "$T/missing" --config "$T/thor.toml" > /dev/null 2>&1 || rc=$?
expect "missing --root exits" "$rc" 2
rc=0; "$TUNE" check --platform nosuchboard --bin "$BIN" --root "$R" --config "$T/thor.toml" > /dev/null 2>&1 || rc=$?
expect "unknown platform exits" "$rc" 2

echo
if [ $fails -gt 0 ]; then echo "test-tune.sh: $fails failed"; exit 1; fi
echo "test-tune.sh: all passed"
