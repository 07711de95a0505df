#!/usr/bin/env bash
# rt-tuning/tune.sh: checks and applies the host tuning an rtdaq deployment needs.
#
# Usage: rt-tuning/tune.sh [check|apply] [--platform NAME] [--config FILE] [--root DIR]
#                          [--bin PATH] [--revert-script PATH]
#   check    (default) changes nothing; prints what apply would change. Exit 0 when there is
#            nothing to change, 1 when apply would change something or found a problem, 2 on a usage/config error.
#   apply    (root, unless --root) makes the changes, prints each with the command that
#            reverts it, and writes those commands to the revert script (newest first):
#            /var/lib/rtdaq/tune-revert.sh (below --root DIR with --root). Idempotent: a second
#            apply prints "nothing to do". Never reboots. Exit 0 ok, 1 when a change failed.
#   --platform NAME   host | igx-orin | igx-thor | dgx-spark: the board defaults (housekeeping
#                     and isolated CPUs, lib/boards.sh); default: the config's `platform`
#   --config FILE     the deployment config (queue cores, hugepages, interfaces and MTU);
#                     default: the embedded config of the rtdaq binary (`rtdaq config show`)
#   --root DIR        every /proc, /sys, /etc and /var path is taken below DIR (a fake tree:
#                     tests, dry runs on a copy); nvidia-smi is not run; PCIe MRRS is edited in
#                     DIR/sys/bus/pci/devices/<bdf>/config instead of through setpci
#   --bin PATH        the rtdaq binary that reads the config (default: $RTDAQ_BIN, `rtdaq` on
#                     PATH, /usr/local/bin/rtdaq, this checkout's target/release/rtdaq)
#
# Items (each in lib/items.sh with a one-line why): CPU governor, IRQ affinity, hugepages,
# kernel.sched_rt_runtime_us, kernel.timer_migration, transparent hugepages, deep idle states
# of the queue cores (cpuidle disable), interface MTU,
# PCIe MRRS, GPU clocks; and the kernel command line (isolcpus, nohz_full, rcu_nocbs,
# irqaffinity, idle states), which is only written as a GRUB snippet for the operator
# (/etc/default/grub.d/rtdaq.cfg): the operator runs update-grub and reboots.
# Runtime changes do not survive a reboot: run `tune.sh apply` again at boot
# (rt-tuning/rtdaq-tune.service does). See docs/deploy.md.
set -euo pipefail
TUNE_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=rt-tuning/lib/common.sh
. "$TUNE_DIR/lib/common.sh"
# shellcheck source=rt-tuning/lib/boards.sh
. "$TUNE_DIR/lib/boards.sh"
# shellcheck source=rt-tuning/lib/config.sh
. "$TUNE_DIR/lib/config.sh"
# shellcheck source=rt-tuning/lib/items.sh
. "$TUNE_DIR/lib/items.sh"

usage() { sed -n '4,5p' "$0" | sed 's/^# //' >&2; exit 2; }

MODE=check ROOT="" PLATFORM="" CONFIG_FILE="" RTDAQ_BIN_ARG="" REVERT_SCRIPT=/var/lib/rtdaq/tune-revert.sh
while [ $# -gt 0 ]; do
    case $1 in
    check | apply) MODE=$1; shift ;;
    --platform) PLATFORM=${2:-}; shift 2 || usage ;;
    --config) CONFIG_FILE=${2:-}; shift 2 || usage ;;
    --root) ROOT=${2:-}; shift 2 || usage ;;
    --bin) RTDAQ_BIN_ARG=${2:-}; shift 2 || usage ;;
    --revert-script) REVERT_SCRIPT=${2:-}; shift 2 || usage ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "tune.sh: unknown argument '$1'" >&2; usage ;;
    esac
done
if [ -n "$ROOT" ]; then
    [ -d "$ROOT" ] || { echo "tune.sh: --root $ROOT is not a directory" >&2; exit 2; }
    ROOT=$(cd "$ROOT" && pwd)
    [ "$ROOT" != / ] || ROOT=""
fi
if [ "$MODE" = apply ] && [ -z "$ROOT" ] && [ "$(id -u)" -ne 0 ]; then
    echo "tune.sh: apply changes the host: run it as root (or try it on a copy with --root DIR)" >&2
    exit 2
fi

TMPD=$(mktemp -d)
trap 'rm -rf "$TMPD"' EXIT

CONFIG_LABEL=""
load_config "$CONFIG_FILE" || exit 2
PLATFORM=${PLATFORM:-$CFG_PLATFORM}
board_defaults "$PLATFORM" || exit 2
if [ -n "$CFG_PLATFORM" ] && [ "$CFG_PLATFORM" != "$PLATFORM" ]; then
    say "note: the config is for platform $CFG_PLATFORM, tuning for --platform $PLATFORM"
fi

# CPU split: the board's isolated CPUs plus every core the config runs a queue/consumer thread
# on; housekeeping is the board's housekeeping CPUs minus those (host: all online CPUs minus
# the config's cores).
ONLINE=$(cpus_norm "$(cat "$(rp /sys/devices/system/cpu/online)" 2>/dev/null || true)")
ALL=${BOARD_CPUS:-$ONLINE}
ISO=$(cpus_or "$BOARD_ISOLATED" "$CFG_CORES")
if [ -n "$BOARD_HOUSEKEEPING" ]; then HK=$(cpus_minus "$BOARD_HOUSEKEEPING" "$CFG_CORES")
else HK=$(cpus_minus "$ALL" "$ISO"); fi
SPLIT_NOTE=""
if [ -z "$HK" ]; then
    SPLIT_NOTE="the config runs threads on every CPU (${ALL:-?}): no housekeeping CPU is left, so no isolation or IRQ moves (give the OS at least one CPU)"
    ISO=""
fi

say "rtdaq tune.sh $MODE: platform $PLATFORM${ROOT:+, root $ROOT}"
say "config: $CONFIG_LABEL (${CFG_NAME:-?}; read by $CFG_SOURCE)"
say "CPUs: ${ALL:-?}; queue/consumer cores ${CFG_CORES:-none}; isolate ${ISO:-none}; housekeeping ${HK:-none}"
[ -z "$SPLIT_NOTE" ] || say "note: $SPLIT_NOTE"
say "hugepages needed: $CFG_HP_2M x 2M, $CFG_HP_1G x 1G; interfaces: ${#CFG_IFACES[@]}"

item_governor
item_irq
item_hugepages
item_procval sched-rt-runtime /proc/sys/kernel/sched_rt_runtime_us -1
item_procval timer-migration /proc/sys/kernel/timer_migration 0
item_thp
item_cstates
item_mtu
item_mrrs
item_gpu_clocks
item_cmdline

reboot_line() {
    [ "$N_REBOOT" -gt 0 ] || return 0
    say "waiting for a reboot (kernel command line, by the operator): ${PENDING[*]}"
}
if [ "$MODE" = check ]; then
    problems=""
    [ "$N_FAILED" -eq 0 ] || problems=", $N_FAILED problem(s) apply cannot fix"
    say "check: $N_CHANGE change(s) would be made$problems"
    reboot_line
    [ "$N_CHANGE" -eq 0 ] && [ "$N_FAILED" -eq 0 ] || exit 1
    exit 0
fi
write_revert_script
if [ "$N_CHANGE" -eq 0 ] && [ "$N_FAILED" -eq 0 ]; then
    say "nothing to do"
else
    say "apply: $N_CHANGE change(s) made, $N_FAILED failed"
fi
reboot_line
[ "$N_FAILED" -eq 0 ]
