#!/usr/bin/env bash
# Runs one command inside the Soft-RoCE test guest (QEMU, Debian bookworm kernel) and exits
# with its exit code. See scripts/vm/README.md.
#
# Usage: scripts/vm/guest-run.sh [--kernel std|rt] [--init init|systemd] [--bin PATH]...
#                                [--timeout S] [--out DIR] [--console FILE] [--] COMMAND [ARG]...
#   --kernel std|rt  Debian's stock kernel (default) or its PREEMPT_RT kernel (6.1)
#   --init init|systemd  PID 1: the harness's guest/init.sh (default), or systemd 252, which
#                    runs COMMAND from a unit (systemctl, journalctl work); see README.md
#   --bin PATH       copy this host file into the guest's /usr/local/bin (on PATH; repeatable)
#   --timeout S      COMMAND's time limit in seconds (default 300); boot has its own limit
#   --out DIR        copy what COMMAND wrote under $RTDAQ_VM_OUT back to DIR (created)
#   --console FILE   keep the guest's kernel console log there (default: printed on failure)
# COMMAND runs as root in the guest's initial namespace with rxe0 (netdev vA, 169.254.77.1)
# and rxe1 (vB, 169.254.77.2) up, cwd = the checkout mounted read-only (/mnt/repo), stdin
# /dev/null; its stdout/stderr stream to ours. Environment: RTDAQ_VM=1, RTDAQ_VM_KERNEL,
# RTDAQ_VM_DEV0/1, RTDAQ_VM_NETDEV0/1, RTDAQ_VM_IP0/1, RTDAQ_VM_GID0/1 (IPv4 RoCE v2 GID
# index), RTDAQ_VM_OUT (writable, see --out), RTDAQ_VM_REPO.
#
# Exit: COMMAND's exit code, or (with a "guest-run: ..." line on stderr)
#   240 usage error   241 guest build / host prerequisites failed
#   242 guest did not boot (qemu failed, no 9p share, boot time limit)
#   243 guest setup failed (rxe0/rxe1 not up)   244 COMMAND timed out (--timeout)
#   245 guest died while COMMAND ran (kernel panic, qemu crash)
# Env: RTDAQ_VM_DIR (cache, default target/vm), RTDAQ_VM_ACCEL (kvm|tcg, default: probe),
#      RTDAQ_VM_MEM (default 2G), RTDAQ_VM_SMP (default 2), RTDAQ_VM_BOOT_TIMEOUT (seconds from
#      qemu start to COMMAND start, default 300), RTDAQ_VM_APPEND (extra kernel command line)
set -euo pipefail
# shellcheck source=scripts/vm/common.sh
. "$(dirname "$0")/common.sh"
VM_PROG=guest-run

E_USAGE=240 E_BUILD=241 E_BOOT=242 E_SETUP=243 E_TIMEOUT=244 E_LOST=245
usage() { sed -n '5,27p' "$0" >&2; exit $E_USAGE; }
say() { echo "guest-run: $*" >&2; }

kernel=std init=init timeout=300 out="" console="" bins=()
while [ $# -gt 0 ]; do
    case $1 in
        --kernel) [ $# -ge 2 ] || usage; kernel=$2; shift ;;
        --init) [ $# -ge 2 ] || usage; init=$2; shift ;;
        --bin) [ $# -ge 2 ] || usage; bins+=("$2"); shift ;;
        --timeout) [ $# -ge 2 ] || usage; timeout=$2; shift ;;
        --out) [ $# -ge 2 ] || usage; out=$2; shift ;;
        --console) [ $# -ge 2 ] || usage; console=$2; shift ;;
        -h|--help) usage ;;
        --) shift; break ;;
        -*) say "unknown option $1"; usage ;;
        *) break ;;
    esac
    shift
done
[ $# -ge 1 ] || { say "no COMMAND"; usage; }
flavour=$(vm_flavour "$kernel") || { say "--kernel takes std or rt, not '$kernel'"; usage; }
case $init in
    init) init_append="" ;;
    # guest/init.sh mounts what it mounts in both modes, then execs systemd
    systemd) init_append="rtdaq.init=systemd" ;;
    *) say "--init takes init or systemd, not '$init'"; usage ;;
esac
[[ $timeout =~ ^[1-9][0-9]*$ ]] || { say "--timeout takes whole seconds, not '$timeout'"; usage; }
for b in "${bins[@]}"; do [ -f "$b" ] || { say "--bin $b: no such file"; exit $E_USAGE; }; done
boot_timeout=${RTDAQ_VM_BOOT_TIMEOUT:-300}
mem=${RTDAQ_VM_MEM:-2G}
smp=${RTDAQ_VM_SMP:-2}

# ---- the guest (cached) ----------------------------------------------------------------------
"$VM_DIR_SCRIPTS/build-guest.sh" --kernel "$kernel" || { say "could not build the guest (see above)"; exit $E_BUILD; }
vmlinuz=$(ls "$VM_WORK/k/$flavour"/boot/vmlinuz-*)
initrd=$VM_WORK/initramfs-$flavour.cpio
accel=$(vm_accel)

# ---- this run's share: command, binaries, state --------------------------------------------
mkdir -p "$VM_WORK/runs" "$VM_WORK/logs"
# run directories of guest-run.sh calls that were SIGKILLed (no trap ran) half a day ago
find "$VM_WORK/runs" -mindepth 1 -maxdepth 1 -name 'run.*' -mmin +720 -exec rm -rf {} + 2>/dev/null || true
run=$(mktemp -d "$VM_WORK/runs/run.XXXXXX")
qpid="" tails=()
# shellcheck disable=SC2317  # (the EXIT trap)
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    if [ -n "$qpid" ] && kill -0 "$qpid" 2>/dev/null; then
        kill -TERM "$qpid" 2>/dev/null || true
        for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 "$qpid" 2>/dev/null || break; sleep 0.2; done
        kill -KILL "$qpid" 2>/dev/null || true
        wait "$qpid" 2>/dev/null || true
    fi
    local t
    for t in "${tails[@]}"; do kill "$t" 2>/dev/null || true; wait "$t" 2>/dev/null || true; done
    rm -rf "$run"
    exit "$rc"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT
trap 'say "terminated"; exit 143' TERM

mkdir -p "$run/share/bin" "$run/share/out"
for b in "${bins[@]}"; do cp "$b" "$run/share/bin/"; done
cp "$VM_DIR_SCRIPTS/guest/run.sh" "$run/share/run.sh"
printf '%q ' "$@" > "$run/share/cmd"
echo "$timeout" > "$run/share/timeout"
echo "$kernel" > "$run/share/kernel"
: > "$run/stdout"; : > "$run/stderr"

acc=(-accel "tcg,thread=multi" -cpu max)
[ "$accel" = kvm ] && acc=(-accel kvm -cpu host)
deadline=$((boot_timeout + timeout + 30))
# One boot of the guest: qemu runs until the COMMAND ends, the boot or command limit passes,
# or qemu itself exits. Sets phase, qrc and state.
boot() {
    say "booting the $kernel guest ($(basename "$vmlinuz"), $accel, -smp $smp -m $mem, init $init); COMMAND: $(cat "$run/share/cmd")"
    t0=$(date +%s)
    # No network device, no tap: the guest's only links are its own veth pair. ttyS0 is the
    # kernel console (a file); the command's stdout/stderr come through two virtio ports.
    qemu-system-x86_64 "${acc[@]}" -m "$mem" -smp "$smp" -nodefaults -no-user-config -display none \
        -no-reboot -kernel "$vmlinuz" -initrd "$initrd" \
        -append "console=ttyS0 panic=-1 loglevel=4 mitigations=off $init_append ${RTDAQ_VM_APPEND:-}" \
        -chardev file,id=con,path="$run/console.log" -serial chardev:con \
        -virtfs local,path="$run/share",mount_tag=hostshare,security_model=none,id=hs \
        -virtfs local,path="$VM_REPO",mount_tag=repo,security_model=none,readonly=on,id=repo \
        -device virtio-serial-pci,id=vser \
        -chardev file,id=gout,path="$run/stdout" -device virtserialport,bus=vser.0,chardev=gout,name=rtdaq.stdout \
        -chardev file,id=gerr,path="$run/stderr" -device virtserialport,bus=vser.0,chardev=gerr,name=rtdaq.stderr \
        -nic none < /dev/null > "$run/qemu.log" 2>&1 &
    qpid=$!
    tail -q -c +1 -f --pid="$qpid" "$run/stdout" & tails+=($!)
    tail -q -c +1 -f --pid="$qpid" "$run/stderr" >&2 & tails+=($!)

    st() { grep -q "^$1" "$run/share/state" 2>/dev/null; }
    phase=boot started_at=""
    while kill -0 "$qpid" 2>/dev/null; do
        now=$(date +%s)
        if [ -z "$started_at" ] && st started; then
            started_at=$now
            phase="command"
        fi
        if [ -z "$started_at" ] && [ $((now - t0)) -ge "$boot_timeout" ]; then
            phase=boot-timeout; break
        fi
        if [ -n "$started_at" ] && [ $((now - started_at)) -ge $((timeout + 30)) ]; then
            phase=host-timeout; break
        fi
        [ $((now - t0)) -ge "$deadline" ] && { phase=host-timeout; break; }
        sleep 0.5
    done
    if kill -0 "$qpid" 2>/dev/null; then
        kill -TERM "$qpid" 2>/dev/null || true
    fi
    qrc=0
    wait "$qpid" || qrc=$?
    qpid=""
    for t in "${tails[@]}"; do wait "$t" 2>/dev/null || true; done
    tails=()
    state=$(cat "$run/share/state" 2>/dev/null || true)
}
rebooted=""
boot
# Multi-threaded TCG qemu sometimes aborts on an assertion of its own while the guest kernel
# boots (seen: "physmem.c: iotlb_to_section: Assertion `section_index < d->map.sections_nb'
# failed", qemu exit 134). Nothing of COMMAND ran then (no state yet), so boot once more,
# saying why; a second abort, or any abort after COMMAND started, fails as before.
if [ "$qrc" -eq 134 ] && [ -z "$state" ] && [ "$phase" = boot ]; then
    rebooted=1
    say "qemu aborted before the guest started (qemu said: $(tr '\n' ' ' < "$run/qemu.log")); booting once more"
    cp "$run/qemu.log" "$VM_WORK/logs/last-$kernel.qemu-abort.log" 2>/dev/null || true
    : > "$run/stdout"; : > "$run/stderr"; : > "$run/console.log"
    boot
fi
# A TCG guest on an overloaded host sometimes never finishes booting: a vCPU thread starves
# and the kernel logs RCU stalls ("rcu_preempt kthread starved") until the boot time limit
# (seen in a CI run on 2026-12-04: the -smp 3 rt guest on the 2-core CI host hung for the
# whole 300 s, where it boots in 15-17 s otherwise). Nothing of COMMAND ran (no state), so
# boot once more, saying why and keeping the first console log; a second hang fails with
# exit 242 as before. One extra boot at most, whatever the reason.
if [ "$phase" = boot-timeout ] && [ -z "$state" ] && [ -z "$rebooted" ]; then
    rebooted=1
    cp "$run/console.log" "$VM_WORK/logs/last-$kernel.hung-boot.console.log" 2>/dev/null || true
    say "the guest did not start COMMAND within RTDAQ_VM_BOOT_TIMEOUT=$boot_timeout s (console: $(tr -d '\r' < "$run/console.log" | grep -c 'rcu.*stall') RCU stall reports; kept in $VM_WORK/logs/last-$kernel.hung-boot.console.log); booting once more"
    : > "$run/stdout"; : > "$run/stderr"; : > "$run/console.log"
    boot
fi
t1=$(date +%s)

[ -n "$out" ] && { mkdir -p "$out"; cp -a "$run/share/out/." "$out/" 2>/dev/null || true; }
cp "$run/console.log" "$VM_WORK/logs/last-$kernel.console.log" 2>/dev/null || true
[ -n "$console" ] && cp "$run/console.log" "$console"
show_console() {
    [ -n "$console" ] && { say "guest console log: $console"; return; }
    say "last lines of the guest console ($VM_WORK/logs/last-$kernel.console.log):"
    tr -d '\r' < "$run/console.log" | tail -n 30 | sed 's/^/  | /' >&2
    [ -s "$run/qemu.log" ] && { say "qemu said:"; sed 's/^/  | /' "$run/qemu.log" >&2; }
    return 0
}

last=$(tail -n 1 <<< "$state")
case $last in
    "rc "*)
        rc=${last#rc }
        say "COMMAND exited with $rc ($kernel guest, init $init, $((t1 - t0)) s with boot)"
        exit "$rc" ;;
    "timeout "*)
        say "COMMAND timed out after --timeout $timeout s and was killed (exit $E_TIMEOUT)"
        exit $E_TIMEOUT ;;
    "setup-failed"*)
        say "guest setup failed: ${last#setup-failed } (exit $E_SETUP)"; show_console
        exit $E_SETUP ;;
esac
case $phase in
    boot-timeout)
        say "the guest did not start COMMAND within RTDAQ_VM_BOOT_TIMEOUT=$boot_timeout s (exit $E_BOOT)"; show_console
        exit $E_BOOT ;;
    host-timeout)
        say "COMMAND did not finish within --timeout $timeout s (+30 s grace; the guest was stopped) (exit $E_TIMEOUT)"; show_console
        exit $E_TIMEOUT ;;
esac
if grep -q '^started' <<< "$state"; then
    say "the guest died while COMMAND ran (qemu exit $qrc; kernel panic?) (exit $E_LOST)"; show_console
    exit $E_LOST
fi
say "the guest did not boot (qemu exit $qrc, state: ${state:-none}) (exit $E_BOOT)"; show_console
exit $E_BOOT
