#!/usr/bin/env bash
# rt-tuning/tests/test-service.sh: tests the systemd units without installing them.
#  1. lint (bash, always): rtdaq.service has exactly the four capabilities as ambient and
#     bounding set, User=rtdaq, LimitMEMLOCK=infinity, LimitRTPRIO=99, CPUAffinity=, the
#     hardening keys and the address families the engines use;
#  2. `systemd-analyze verify` of both units (binary paths pointed at this checkout) when
#     systemd-analyze is installed, any output is a failure; `systemd-analyze security
#     --offline=yes` exposure below 4.0;
#  3. (root only) the binary as the unit runs it: user nobody, exactly the unit's capabilities
#     (inheritable, ambient, bounding set), affinity limited to one CPU like CPUAffinity=, the
#     embedded default config for 2 s: exit 0, no missing-capability warning, a queue thread
#     in SCHED_FIFO on its own core outside the inherited affinity; and without CAP_SYS_NICE
#     the runtime's warning naming it.
# Usage: rt-tuning/tests/test-service.sh [RTDAQ_BINARY]   (default target/release/rtdaq,
# built with the default config: host-loopback-udp, queue threads on cores 0 and 1)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$(realpath "${1:-target/release/rtdaq}")
UNIT=rt-tuning/systemd/rtdaq.service
TUNE_UNIT=rt-tuning/systemd/rtdaq-tune.service
[ -x "$BIN" ] || { echo "no rtdaq binary at $BIN" >&2; exit 2; }
T=$(mktemp -d)
PID=""
cleanup() { if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; fi; rm -rf "$T"; }
trap cleanup EXIT
fails=0
pass() { printf 'ok   %s\n' "$*"; }
fail() { printf 'FAIL %s\n' "$*"; fails=$((fails + 1)); }
key() { sed -n "s/^$1=//p" "$UNIT"; }   # the values of KEY in the unit (one per line)

# ---- 1. lint ------------------------------------------------------------------------------------
CAPS="CAP_NET_RAW CAP_NET_ADMIN CAP_SYS_NICE CAP_IPC_LOCK"
for k in AmbientCapabilities CapabilityBoundingSet; do
    if [ "$(key $k)" = "$CAPS" ]; then pass "$k = $CAPS"; else fail "$k is '$(key $k)', want '$CAPS'"; fi
done
for kv in User=rtdaq LimitMEMLOCK=infinity LimitRTPRIO=99 NoNewPrivileges=yes ProtectSystem=strict \
    ProtectHome=yes PrivateTmp=yes ProtectKernelTunables=yes ProtectKernelModules=yes \
    ProtectControlGroups=yes RestrictNamespaces=yes RestrictSUIDSGID=yes LockPersonality=yes \
    SystemCallArchitectures=native RestrictRealtime=no "ExecStartPre=/usr/local/bin/rtdaq doctor" \
    "RestrictAddressFamilies=AF_PACKET AF_XDP AF_NETLINK AF_INET AF_INET6 AF_UNIX"; do
    if grep -qxF "$kv" "$UNIT"; then pass "$kv"; else fail "missing: $kv"; fi
done
if [ -n "$(key CPUAffinity)" ]; then pass "CPUAffinity=$(key CPUAffinity)"; else fail "no CPUAffinity="; fi
if grep -qE '^(User=root|DynamicUser=|PermissionsStartOnly=|ExecStart=\+)' "$UNIT"; then
    fail "the unit runs something as root"
else pass "nothing in the unit runs as root"; fi

# ---- 2. systemd-analyze ----------------------------------------------------------------------------
if command -v systemd-analyze >/dev/null; then
    sed "s#/usr/local/bin/rtdaq#$BIN#g" "$UNIT" > "$T/rtdaq.service"
    sed -e "s#/usr/local/lib/rtdaq/rt-tuning/tune.sh#$PWD/rt-tuning/tune.sh#" \
        -e "s#/usr/local/bin/rtdaq#$BIN#" "$TUNE_UNIT" > "$T/rtdaq-tune.service"
    if out=$(systemd-analyze verify "$T/rtdaq.service" "$T/rtdaq-tune.service" 2>&1) && [ -z "$out" ]; then
        pass "systemd-analyze verify: both units clean"
    else fail "systemd-analyze verify: $out"; fi
    # Each engine's drop-in (rtdaq.service.d-examples/): the unit with it appended (what
    # systemd makes of a drop-in for these keys) verifies clean too.
    for d in rt-tuning/systemd/rtdaq.service.d-examples/*.conf; do
        cat "$T/rtdaq.service" "$d" > "$T/with-$(basename "$d" .conf).service"
        if out=$(systemd-analyze verify "$T/with-$(basename "$d" .conf).service" 2>&1) && [ -z "$out" ]; then
            pass "systemd-analyze verify: the unit with drop-in $(basename "$d")"
        else fail "systemd-analyze verify with $(basename "$d"): $out"; fi
    done
    exposure=$(systemd-analyze security --offline=yes "$T/rtdaq.service" 2>/dev/null |
        sed -n 's/.*Overall exposure level for rtdaq.service: \([0-9.]*\).*/\1/p')
    if [ -n "$exposure" ] && awk -v e="$exposure" 'BEGIN { exit !(e < 4.0) }'; then
        pass "systemd-analyze security: exposure $exposure (< 4.0)"
    else fail "systemd-analyze security: exposure '${exposure:-?}'"; fi
else
    echo "skip systemd-analyze: not installed (the bash lint above still ran)"
fi

# ---- 3. the binary as the unit runs it ---------------------------------------------------------------
if [ "$(id -u)" -ne 0 ]; then
    echo "skip the unprivileged run: needs root (setpriv to user nobody)"
else
    caps=$(key AmbientCapabilities | tr 'A-Z ' 'a-z\n' | sed 's/^cap_//' | sed 's/^/+/' | paste -sd,)
    as_unit() { # as_unit CAPLIST ARGS...: nobody, those caps only, affinity CPU 0 (exec's)
        local c=$1; shift
        cd "$T"
        exec setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps="-all,$c" \
            --ambient-caps="-all,$c" --bounding-set="-all,$c" --no-new-privs \
            taskset -c 0 "$BIN" "$@"
    }
    (as_unit "$caps" run --duration 3) > "$T/run.out" 2>&1 &
    PID=$!
    sleep 1.5
    # the rtdaq process: setpriv and taskset exec it, so it keeps the background job's pid
    fifo_core=""
    for task in /proc/"$PID"/task/*; do
        tid=${task##*/}
        pol=$(chrt -p "$tid" 2>/dev/null | sed -n 's/.*scheduling policy: //p')
        aff=$(taskset -pc "$tid" 2>/dev/null | sed -n 's/.*list: //p')
        if [ "$pol" = SCHED_FIFO ] && [ "$aff" = 1 ]; then fifo_core=1; fi
    done
    rc=0; wait "$PID" || rc=$?; PID=""
    if [ $rc = 0 ]; then pass "rtdaq run as nobody with $caps: exit 0"
    else fail "rtdaq run as nobody exited $rc:"; sed 's/^/     | /' "$T/run.out"; fi
    if grep -qE 'WARN.*(denied|CAP_|capabilit)' "$T/run.out"; then
        fail "a missing-capability warning with the unit's capabilities:"; grep WARN "$T/run.out"
    else pass "no missing-capability warning"; fi
    if [ "$fifo_core" = 1 ]; then pass "a queue thread runs SCHED_FIFO on core 1 although the process started on CPU 0 only"
    else fail "no SCHED_FIFO queue thread pinned to core 1 was seen"; fi
    rc=0; (as_unit "+ipc_lock" run --duration 1) > "$T/nonice.out" 2>&1 || rc=$?
    if grep -q 'WARN.*CAP_SYS_NICE' "$T/nonice.out"; then pass "without CAP_SYS_NICE the runtime warns naming it (exit $rc)"
    else fail "no CAP_SYS_NICE warning without it:"; sed 's/^/     | /' "$T/nonice.out"; fi
fi

echo
if [ $fails -gt 0 ]; then echo "test-service.sh: $fails failed"; exit 1; fi
echo "test-service.sh: all passed"
