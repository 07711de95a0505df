#!/bin/bash
# shellcheck disable=SC2317  # the check functions run through check()
# Guest side of scripts/vm/systemd-unit.sh, in a guest booted with guest-run.sh --init systemd
# (systemd 252 is PID 1). The shipped rt-tuning/systemd/rtdaq.service, unchanged, runs under
# the real systemd, with drop-ins written here where the test needs them:
#   a. the socket binary (release, embedded host-loopback-udp): Type=notify start, StatusText,
#      SCHED_FIFO queue threads, user rtdaq with exactly the unit's capabilities, a clean stop
#      (SIGTERM) and /var/lib/rtdaq/report.json;
#   b. the AF_PACKET binary on vB (169.254.77.2) with an edited veth-afpacket-rx.toml passed by
#      an ExecStart= drop-in, fed by the same binary's generator on vA: starts, receives, stops,
#      writes its report, with no capability beyond the unit's four;
#   c. each drop-in of rt-tuning/systemd/rtdaq.service.d-examples/ in turn with the socket
#      binary: the unit still starts where its devices and paths are absent; a copy of dpdk.conf
#      with ReadWritePaths= lacking the "-" fails with 226/NAMESPACE (the prefix matters);
#   d. the test-hooks binary with RTDAQ_TEST_STALL=KIND@MS and WatchdogSec=4s, for io,
#      consumer, generator and writer (host-udp-record.toml): the named thread stops the
#      pings, systemd logs "Watchdog timeout", and restarts the unit (NRestarts, active again).
# Binaries (guest-run.sh --bin): rtdaq-socket, rtdaq-afpacket, rtdaq-test-hooks; each phase
# installs its binary as /usr/local/bin/rtdaq (the unit's path). One PASS/FAIL line per check,
# the unit's journal after a failed one. Exit 0 all passed, 1 otherwise.
set -u
R=${RTDAQ_VM_REPO:-/mnt/repo}
U=/etc/systemd/system/rtdaq.service.d
CAPS_UNIT=0000000000807000      # CAP_NET_ADMIN(12) CAP_NET_RAW(13) CAP_IPC_LOCK(14) CAP_SYS_NICE(23)
CAPS_AFXDP=000000c000807000     # those + CAP_PERFMON(38) CAP_BPF(39)
fails=0 checks=0
# scratch files (the sender's output and report, captured command output)
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
T0=$(date +%s)
say() { echo "systemd-unit: $*"; }
indent() { sed 's/^/  /'; }
journal() { echo "  --- journalctl -u rtdaq -n 50 --no-pager"; journalctl -u rtdaq -n 50 --no-pager | sed 's/^/  | /'; }
check() {  # name, then the command
    local name=$1; shift
    checks=$((checks + 1))
    if "$@"; then say "PASS $name"; else say "FAIL $name"; fails=$((fails + 1)); journal; fi
}
prop() { systemctl show -p "$1" --value rtdaq; }
cursor() { journalctl -n 0 --show-cursor --no-pager 2>/dev/null | sed -n 's/^-- cursor: //p'; }
since() { journalctl --after-cursor "$1" -u rtdaq --no-pager -o cat; }  # this unit's lines since CURSOR
use_bin() { install -m 0755 "/usr/local/bin/$1" /usr/local/bin/rtdaq; }
dropins() {  # name=content... : the test's drop-ins besides 00-untuned.conf, then daemon-reload
    local d
    find "$U" -name '*.conf' ! -name 00-untuned.conf -delete
    for d in "$@"; do printf '%s\n' "${d#*=}" > "$U/${d%%=*}.conf"; done
    systemctl daemon-reload
}
# Stops the unit (also a pending auto-restart) and forgets its failed state and restarts.
reset_unit() { systemctl stop rtdaq 2>/dev/null; systemctl reset-failed rtdaq 2>/dev/null; rm -f /var/lib/rtdaq/report.json; }
wait_for() {  # seconds, then the command: polls it every 0.2 s
    local n=$(( $1 * 5 )); shift
    while [ $n -gt 0 ]; do "$@" && return 0; sleep 0.2; n=$((n - 1)); done
    return 1
}
is_active() { [ "$(prop ActiveState)" = active ]; }
elapsed() { echo "$(( $(date +%s) - T0 )) s"; }

[ "$(ps -p 1 -o comm=)" = systemd ] || { say "FAIL PID 1 is $(ps -p 1 -o comm=), not systemd (boot with guest-run.sh --init systemd)"; exit 1; }
say "systemd $(systemctl --version | head -1 | cut -d' ' -f2), $(nproc) CPUs, kernel $(uname -r), is-system-running: $(systemctl is-system-running)"

# ---- install as docs/deploy.md says -------------------------------------------------------------
install -m 0644 "$R/rt-tuning/systemd/rtdaq.service" /etc/systemd/system/rtdaq.service
install -D -m 0644 "$R/rt-tuning/systemd/rtdaq.sysusers" /usr/lib/sysusers.d/rtdaq.conf
sysusers() {
    systemd-sysusers || return 1
    local e; e=$(getent passwd rtdaq) || return 1
    echo "  $e"
    [ "$(cut -d: -f6,7 <<< "$e")" = /var/lib/rtdaq:/usr/sbin/nologin ] && getent group rtdaq > /dev/null
}
check "systemd-sysusers made the user rtdaq from rtdaq.sysusers" sysusers
RUID=$(id -u rtdaq 2>/dev/null) RGID=$(id -g rtdaq 2>/dev/null)
mkdir -p "$U"
# The guest is not a tuned host: docs/deploy.md's override (doctor runs, its FAIL is ignored).
printf '[Service]\nExecStartPre=\nExecStartPre=-/usr/local/bin/rtdaq doctor\n' > "$U/00-untuned.conf"
systemctl daemon-reload
check "the installed unit is the shipped file, unchanged" cmp -s "$R/rt-tuning/systemd/rtdaq.service" /etc/systemd/system/rtdaq.service

# ---- a. the socket binary ------------------------------------------------------------------------
use_bin rtdaq-socket
start_active() {  # `systemctl start` returns 0 and (Type=notify: after READY=1) the unit is active
    local t0 t1 rc=0
    t0=$(date +%s%N); systemctl start rtdaq || rc=$?; t1=$(date +%s%N)
    echo "  systemctl start returned $rc after $(( (t1 - t0) / 1000000 )) ms; $(prop ActiveState)/$(prop SubState), StatusText: $(prop StatusText)"
    [ $rc -eq 0 ] && [ "$(prop ActiveState)/$(prop SubState)" = active/running ]
}
check "socket: systemctl start rtdaq returns (Type=notify, READY=1) and the unit is active/running" start_active
is_live() { [[ $(prop StatusText) =~ ^\[\ *[0-9.]+\ s\]\ rx\ .*\|\ tx\  ]]; }
live_status() {  # the live line every second: "[   2.0 s] rx ... | tx ..."
    wait_for 6 is_live || return 1
    echo "  StatusText: $(prop StatusText)"
}
check "socket: systemctl show -p StatusText shows the live line" live_status
PID=$(prop MainPID)
fifo_threads() {
    local t; t=$(ps -L -o tid=,cls=,rtprio=,psr=,user=,comm= -p "$PID")
    indent <<< "$t"
    local want
    for want in lo_udp.rx0-io lo_udp.rx0-cons lo_udp.tx0; do
        grep -qE "^ *[0-9]+ +FF +50 +[0-9]+ +rtdaq +$want\$" <<< "$t" || { echo "  $want: not SCHED_FIFO 50 as rtdaq"; return 1; }
    done
}
check "socket: the queue threads (rx0-io, rx0-cons, tx0) run SCHED_FIFO 50 as user rtdaq (ps)" fifo_threads
creds() {  # PID, the wanted capability mask
    local s; s=$(grep -E '^(Uid|Gid|Groups|Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Cpus_allowed_list):' "/proc/$1/status")
    indent <<< "$s"
    grep -qxP "Uid:\t$RUID\t$RUID\t$RUID\t$RUID" <<< "$s" && grep -qxP "Gid:\t$RGID\t$RGID\t$RGID\t$RGID" <<< "$s" &&
        grep -qxP "NoNewPrivs:\t1" <<< "$s" || return 1
    local c
    for c in CapInh CapPrm CapEff CapBnd CapAmb; do grep -qxP "$c:\t$2" <<< "$s" || { echo "  $c is not $2"; return 1; }; done
}
check "socket: runs as rtdaq ($RUID:$RGID) with exactly the unit's four capabilities (inheritable, permitted, effective, bounding, ambient $CAPS_UNIT), NoNewPrivs" creds "$PID" $CAPS_UNIT
stop_clean() {  # ENGINE: systemctl stop -> SIGTERM -> the run stops early, drains, writes its report
    local cur rc=0 t0 j r=/var/lib/rtdaq/report.json
    # the embedded default config runs 10 s: a slow guest may reach its end before the stop
    is_active || { echo "  the unit is $(prop ActiveState) before the stop: the run ended by itself"; return 1; }
    cur=$(cursor); t0=$(date +%s)
    systemctl stop rtdaq || rc=$?
    # how the main process ended: from the journal (an inactive unit is unloaded at once, so
    # systemctl show no longer has its exit status; a failed one keeps it)
    # (journald reads the service's stderr stream on its own: wait up to 5 s for the last lines)
    for _ in $(seq 25); do
        j=$(since "$cur")
        grep -q 'stopped early by SIGINT/SIGTERM' <<< "$j" && grep -q 'report written to' <<< "$j" && break
        sleep 0.2
    done
    grep -E "Deactivated successfully|Main process exited|Failed with result|stopped early" <<< "$j" | sed 's/^/  journal: /'
    echo "  systemctl stop returned $rc after $(( $(date +%s) - t0 )) s; now $(prop ActiveState)"
    [ $rc -eq 0 ] || return 1
    # exited by itself after SIGTERM, not killed: 0 ok, or 1 (loss beyond run.loss_tolerance:
    # the guest is emulated and loses packets; not a speed test); 2 (config/environment) fails
    grep -q 'code=killed\|status=2/' <<< "$j" && { echo "  killed, or exit 2"; return 1; }
    grep -q 'Deactivated successfully' <<< "$j" || grep -q 'Main process exited, code=exited, status=1/FAILURE' <<< "$j" || return 1
    grep -q 'stopped early by SIGINT/SIGTERM' <<< "$j" || { echo "  no 'stopped early by SIGINT/SIGTERM' in the journal"; return 1; }
    [ -s $r ] || { echo "  no $r"; return 1; }
    echo "  $r: $(stat -c '%U:%G %a %s bytes' $r); $(jq -c '{engine, exit_code, duration_s, rx_packets: .rx.totals.packets, lost}' $r)"
    [ "$(jq -r .engine $r)" = "$1" ] && [ "$(stat -c %U $r)" = rtdaq ] || return 1
    case $(jq -r .exit_code $r) in
        0) grep -q 'Deactivated successfully' <<< "$j" ;;
        1) grep -q 'status=1/FAILURE' <<< "$j" ;;
        *) return 1 ;;
    esac
}
check "socket: systemctl stop stops it cleanly (SIGTERM, exit 0 or 1) and /var/lib/rtdaq/report.json is written" stop_clean socket
reset_unit
say "a. socket done ($(elapsed))"

# ---- b. AF_PACKET on vB ----------------------------------------------------------------------------
use_bin rtdaq-afpacket
mkdir -p /etc/rtdaq
# the test bed's rtdaq0b is this guest's vB; no duration: it runs until stopped
sed -e 's/^address = "rtdaq0b"/address = "vB"/' -e 's/^duration_s = 12 .*/duration_s = 0/' \
    "$R/configs/veth-afpacket-rx.toml" > /etc/rtdaq/afpacket-rx.toml
vb_mac=$(cat /sys/class/net/vB/address)
sed -e 's/^address = "rtdaq0a"/address = "vA"/' -e "s/^dst_mac = .*/dst_mac = \"$vb_mac\"/" \
    -e 's#^destination = .*#destination = "udp://169.254.77.2:5000"#' -e 's#^source = .*#source = "udp://169.254.77.1:4000"#' \
    -e 's/^rate_gbps = .*/rate_gbps = 0.02/' -e 's/^duration_s = 10$/duration_s = 3/' \
    "$R/configs/veth-afpacket-tx.toml" > /etc/rtdaq/afpacket-tx.toml
if ! grep -q '^address = "vB"' /etc/rtdaq/afpacket-rx.toml || ! grep -q '^duration_s = 0' /etc/rtdaq/afpacket-rx.toml ||
    ! grep -q "dst_mac = \"$vb_mac\"" /etc/rtdaq/afpacket-tx.toml; then
    say "note: an edit of the AF_PACKET configs did not apply (the checks below fail then)"
fi
dropins afpacket="[Service]
ExecStartPre=
ExecStartPre=-/usr/local/bin/rtdaq doctor --config /etc/rtdaq/afpacket-rx.toml
ExecStart=
ExecStart=/usr/local/bin/rtdaq run --config /etc/rtdaq/afpacket-rx.toml --report-json /var/lib/rtdaq/report.json"
check "afpacket: systemctl start (ExecStart= drop-in with /etc/rtdaq/afpacket-rx.toml on vB) returns and the unit is active/running" start_active
PID=$(prop MainPID)
af_threads() {
    local t; t=$(ps -L -o tid=,cls=,rtprio=,psr=,user=,comm= -p "$PID")
    indent <<< "$t"
    grep -qE '^ *[0-9]+ +FF +50 +1 +rtdaq +veth_b\.rx0' <<< "$t"
}
check "afpacket: its RX queue thread runs SCHED_FIFO 50 on core 1 as rtdaq" af_threads
check "afpacket: exactly the unit's four capabilities, nothing added ($CAPS_UNIT)" creds "$PID" $CAPS_UNIT
receives() {
    local rc=0 sent got
    # the sender: the same binary's generator on vA, as root outside the unit
    rtdaq run --config /etc/rtdaq/afpacket-tx.toml --report-json "$TMP"/afpacket-tx.json > "$TMP"/afpacket-tx.txt 2>&1 || rc=$?
    sent=$(jq -r '.tx.totals.packets' "$TMP"/afpacket-tx.json 2>/dev/null)
    echo "  sender (vA -> $vb_mac 169.254.77.2:5000) exited $rc, sent ${sent:-?} frames"
    [ "${sent:-0}" -gt 0 ] 2>/dev/null || { sed 's/^/  | /' "$TMP"/afpacket-tx.txt | tail -20; return 1; }
    sleep 1.5   # a live line after the last frame
    echo "  StatusText: $(prop StatusText)"
    got=$(journalctl -u rtdaq -n 5 --no-pager -o cat | sed -n 's/.*veth_b\.rx0 rx .* total \([0-9]*\) pkts.*/\1/p' | tail -1)
    echo "  the receiver's live counter: ${got:-?} packets"
    [ "${got:-0}" -gt 0 ] 2>/dev/null
}
check "afpacket: receives on vB what the generator sends from vA" receives
af_report() {
    stop_clean afpacket || return 1
    local p; p=$(jq -r '.rx.totals.packets' /var/lib/rtdaq/report.json)
    echo "  report: $p packets received, $(jq -r .lost /var/lib/rtdaq/report.json) lost"
    [ "$p" -gt 0 ] 2>/dev/null
}
check "afpacket: systemctl stop stops it cleanly and its report counts the received packets" af_report
reset_unit
say "b. afpacket done ($(elapsed))"

# ---- c. every engine drop-in, with the socket binary -----------------------------------------------
use_bin rtdaq-socket
present() {  # what of a drop-in's paths/devices this guest has
    local out="" p
    for p in /mnt/huge-rtdaq /dev/vfio/vfio /dev/infiniband/rdma_cm /dev/infiniband/uverbs0 /dev/nvidiactl /dev/nvidia-uvm; do
        [ -e $p ] && out+="$p present, " || out+="$p absent, "
    done
    for p in vfio infiniband_verbs nvidia-frontend nvidia-uvm; do
        grep -qw "$p" /proc/devices && out+="char-$p in /proc/devices, " || out+="no char-$p, "
    done
    echo "${out%, }"
}
dropin_starts() {  # drop-in file, wanted CapEff
    local name cur; name=$(basename "$1" .conf)
    dropins "$name=$(cat "$1")"
    cur=$(cursor)
    start_active || return 1
    # what systemd itself said about the unit besides starting it (nothing, where the
    # drop-in's absent devices are skipped quietly)
    journalctl --after-cursor "$cur" _PID=1 --no-pager -o cat | grep '^rtdaq\.service: ' | indent
    creds "$(prop MainPID)" "$2" > "$TMP"/creds.txt || { cat "$TMP"/creds.txt; return 1; }
    grep CapEff "$TMP"/creds.txt
    systemctl stop rtdaq
}
each_dropin() {  # what the guest has, said in the check's name
    local d caps
    for d in "$R"/rt-tuning/systemd/rtdaq.service.d-examples/*.conf; do
        caps=$CAPS_UNIT; [ "$(basename "$d")" = afxdp.conf ] && caps=$CAPS_AFXDP
        check "drop-in $(basename "$d") ($1): the unit starts (active/running, CapEff $caps) and stops" dropin_starts "$d" $caps
        reset_unit
    done
}
# First with every device and path of the drop-ins absent: run.sh made rxe0/rxe1 (Soft-RoCE,
# /dev/infiniband/uverbs0-1) and loaded rdma_ucm (rdma_cm), so take them down for this pass
# (the infiniband_verbs major goes with ib_uverbs); then ibverbs.conf and dpdk.conf again
# with rxe0 and those device nodes back.
rdma link delete rxe1; rdma link delete rxe0
modprobe -r rdma_ucm rdma_rxe ib_uverbs || say "note: could not unload rdma_ucm rdma_rxe ib_uverbs"
say "this guest now: $(present)"
each_dropin "no hugetlbfs mount, VFIO, nvidia, uverbs or rdma_cm"
if ! { modprobe rdma_rxe && modprobe ib_uverbs && modprobe rdma_ucm && rdma link add rxe0 type rxe netdev vA; }; then
    say "note: could not bring rxe0 back"
fi
for _ in $(seq 25); do [ -e /dev/infiniband/uverbs0 ] && break; sleep 0.2; done
say "this guest now: $(present)"
for d in ibverbs dpdk; do
    check "drop-in $d.conf (/dev/infiniband/uverbs*, rdma_cm present): the unit starts and stops" \
        dropin_starts "$R/rt-tuning/systemd/rtdaq.service.d-examples/$d.conf" $CAPS_UNIT
    reset_unit
done
dpdk_strict() {  # dpdk.conf with ReadWritePaths=/mnt/huge-rtdaq (no "-"): the namespace set-up fails
    [ ! -e /mnt/huge-rtdaq ] || { echo "  /mnt/huge-rtdaq exists here: nothing to show"; return 1; }
    local cur rc=0
    dropins dpdk-strict="$(sed 's#^ReadWritePaths=-/mnt/huge-rtdaq#ReadWritePaths=/mnt/huge-rtdaq#' "$R/rt-tuning/systemd/rtdaq.service.d-examples/dpdk.conf")"
    grep -qx 'ReadWritePaths=/mnt/huge-rtdaq' "$U/dpdk-strict.conf" || return 1
    cur=$(cursor)
    systemctl start rtdaq 2> "$TMP"/start.err || rc=$?
    echo "  systemctl start returned $rc: $(head -1 "$TMP"/start.err)"
    since "$cur" | grep -E 'mount namespacing|status=226' | sort -u | sed 's/^/  journal: /'
    [ $rc -ne 0 ] && since "$cur" | grep -q 'status=226/NAMESPACE'
}
check "dpdk.conf without the '-' (ReadWritePaths=/mnt/huge-rtdaq, absent): the start fails with 226/NAMESPACE, so the prefix matters" dpdk_strict
reset_unit
say "c. drop-ins done ($(elapsed))"

# ---- d. the watchdog: each kind of thread stalled in turn ------------------------------------------
use_bin rtdaq-test-hooks
install -m 0644 "$R/configs/host-udp-record.toml" /etc/rtdaq/host-udp-record.toml
STALL_MS=3000 WD=4
watchdog() {  # kind, the thread name the log must give, extra run arguments
    local kind=$1 who=$2 args=${3:-} cur n0 t0 j
    dropins watchdog="[Service]
Environment=RTDAQ_TEST_STALL=$kind@$STALL_MS
WatchdogSec=${WD}s
RestartSec=1
ExecStart=
ExecStart=/usr/local/bin/rtdaq run --duration 0 --report-json /var/lib/rtdaq/report.json $args"
    cur=$(cursor); t0=$(date +%s)
    start_active || return 1
    n0=$(prop NRestarts)
    # the stall 3 s into the run, the pings stop WD/2 later, systemd's timeout WD after the last
    # ping, then RestartSec=1 and a new start: well within 60 s even for the debug binary
    if ! wait_for 60 bash -c "journalctl --after-cursor '$cur' -u rtdaq --no-pager -o cat | grep -q 'Watchdog timeout'"; then
        echo "  no 'Watchdog timeout' within 60 s"; return 1
    fi
    echo "  watchdog timeout $(( $(date +%s) - t0 )) s after the start"
    wait_for 40 bash -c "[ \"\$(systemctl show -p NRestarts --value rtdaq)\" -gt $n0 ] && [ \"\$(systemctl show -p ActiveState --value rtdaq)\" = active ]" ||
        { echo "  not restarted and active again within 40 s: $(prop ActiveState), NRestarts $(prop NRestarts)"; return 1; }
    j=$(since "$cur")
    grep -E 'test hook|has made no progress|Watchdog timeout|Failed with result|Scheduled restart|Main process exited' <<< "$j" | sed 's/^/  journal: /'
    echo "  restarted $(( $(date +%s) - t0 )) s after the start: NRestarts $n0 -> $(prop NRestarts), $(prop ActiveState)/$(prop SubState)"
    grep -qE "^\[[^]]* ERROR +rtdaq_runtime::observe::notify\] $who has made no progress for [0-9.]+ s: WATCHDOG=1 pings stop" <<< "$j" ||
        { echo "  the log does not name '$who' as the thread that stopped the pings"; return 1; }
    grep -q "Failed with result 'watchdog'" <<< "$j"
}
check "watchdog io: the RX I/O thread stalls, WATCHDOG=1 stops, systemd's watchdog timeout restarts the unit (active again)" \
    watchdog io 'lo_udp\.rx0'
reset_unit
check "watchdog consumer: the RX consumer stalls, WATCHDOG=1 stops, watchdog timeout, restarted" \
    watchdog consumer 'lo_udp\.rx0 consumer'
reset_unit
check "watchdog generator: the TX generator stalls, WATCHDOG=1 stops, watchdog timeout, restarted" \
    watchdog generator 'lo_udp\.tx0'
reset_unit
check "watchdog writer (host-udp-record.toml, --output-dir /var/lib/rtdaq/rec): a record writer stalls, WATCHDOG=1 stops, watchdog timeout, restarted" \
    watchdog writer 'lo_udp\.rx0 record (pcap|dada) writer' \
    "--config /etc/rtdaq/host-udp-record.toml --output-dir /var/lib/rtdaq/rec"
find /var/lib/rtdaq/rec -type f -printf '  recorded: %f (%s bytes)\n' 2>/dev/null | sort | head -4
reset_unit
say "d. watchdog done ($(elapsed))"

if [ $fails -ne 0 ]; then say "$fails of $checks checks failed"; exit 1; fi
say "all $checks passed ($(elapsed) in the guest)"
