#!/usr/bin/env bash
# iperf3 interop: a real iperf3 UDP client sends into rtdaq's receive-only config, and every
# datagram iperf3 sent must be accounted for by rtdaq: received + drops rtdaq counted = sent.
#
# An iperf3 UDP client needs an iperf3 server (TCP control connection, 4-byte UDP handshake on
# the same port), so the topology is:
#
#   netns CLI  169.254.77.1/30 veth-cli ==== veth-srv 169.254.77.2/30  netns SRV
#   iperf3 -u -c 169.254.77.2 -p 5201 -l 1400                            iperf3 -s -1 -p 5201
#                                                                        rtdaq, udp://169.254.77.2:5000
#
# In SRV an nftables rule at prerouting priority raw (before conntrack and routing) rewrites
# the destination port of iperf3's DATA datagrams only (UDP to 5201 with a UDP length of
# 1400 + 8) to rtdaq's port: `udp dport set 5000`, a stateless rewrite (nft fixes the UDP
# checksum). The TCP control connection and the 4-byte handshake still reach the iperf3
# server, so the test runs normally; the server simply sees no data. A named nft counter
# counts the rewritten datagrams at SRV's ingress.
# (TPROXY does not work here: see "Interop with iperf3" in docs/engines/socket.md.)
#
# Usage (as root):
#   scripts/iperf3-interop.sh [run] [OPTIONS]     set up, run, check, tear down (default)
#   scripts/iperf3-interop.sh setup [--suffix S]  only create the namespaces and the nft rule
#   scripts/iperf3-interop.sh teardown [--suffix S | --stale]
#                                                 remove them (idempotent); --stale removes
#                                                 those of every earlier run whose process is gone
# Options:
#   --rtdaq BIN       rtdaq binary (default target/debug/rtdaq, built with cargo if missing)
#   --out DIR         keep the artefacts there: config.toml, rtdaq.json, rtdaq.log, iperf3.json,
#                     iperf3-server.log, counters.txt (default: a temporary directory, removed)
#   --suffix S        namespace name suffix (default: this script's pid)
#   --duration SECS   rtdaq run --duration (default 4); iperf3 sends for --time SECS (default 2)
#   --time SECS
#   --rate RATE       iperf3 -b (default 200M)
#   --len BYTES       iperf3 -l, the datagram payload (default 1400)
#   --rcvbuf BYTES    replace engine.socket.rcvbuf (the shipped config asks for 16 MiB)
#   --pause-rtdaq S   0.5 s into the test, stop rtdaq (SIGSTOP) for S seconds, then SIGCONT it:
#                     a stalled receiver, so a small --rcvbuf overflows for sure
#   --expect-drops    also require drops.kernel > 0 (with --rcvbuf 1024 --pause-rtdaq 0.3)
#   --keep            do not tear down at the end (inspect with `ip netns exec ...`)
# Exit: 0 every datagram accounted for; 1 mismatch or failed run; 2 usage or missing tool.
# Needs: iproute2 (ip, ss), iperf3, nftables (nft), jq.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$PATH:/usr/sbin:/sbin"

CMD=run
case "${1:-}" in run | setup | teardown) CMD=$1; shift ;; esac
RTDAQ=""
OUT=""
SUFFIX=$$
DURATION=4
TIME=2
RATE=200M
LEN=1400
RCVBUF=""
PAUSE=""
EXPECT_DROPS=0
KEEP=0
STALE=0
die() { echo "iperf3-interop: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
    case "$1" in
        --rtdaq) RTDAQ=$2; shift 2 ;;
        --out) OUT=$2; shift 2 ;;
        --suffix) SUFFIX=$2; shift 2 ;;
        --duration) DURATION=$2; shift 2 ;;
        --time) TIME=$2; shift 2 ;;
        --rate) RATE=$2; shift 2 ;;
        --len) LEN=$2; shift 2 ;;
        --rcvbuf) RCVBUF=$2; shift 2 ;;
        --pause-rtdaq) PAUSE=$2; shift 2 ;;
        --expect-drops) EXPECT_DROPS=1; shift ;;
        --keep) KEEP=1; shift ;;
        --stale) STALE=1; shift ;;
        -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument '$1' (see --help)" ;;
    esac
done
[[ $SUFFIX =~ ^[A-Za-z0-9_-]{1,40}$ ]] || die "--suffix must be 1..40 of [A-Za-z0-9_-]"

NS_PREFIX=rtdaq-iperf3
CLI=$NS_PREFIX-cli-$SUFFIX
SRV=$NS_PREFIX-srv-$SUFFIX
CLI_IP=169.254.77.1
SRV_IP=169.254.77.2
IPERF_PORT=5201 # iperf3 server: TCP control + UDP handshake
RTDAQ_PORT=5000 # rtdaq's socket: iperf3's data datagrams, rewritten to this port
NFT_TABLE=rtdaq_iperf3

need_root_and_tools() {
    [ "$(id -u)" -eq 0 ] || die "must run as root (network namespaces, nftables)"
    local t missing=()
    for t in ip ss iperf3 nft jq; do command -v "$t" >/dev/null || missing+=("$t"); done
    [ ${#missing[@]} -eq 0 ] ||
        die "missing tools: ${missing[*]} (Debian: apt-get install iproute2 iperf3 nftables jq)"
}

ns_del() { ip netns del "$1" 2>/dev/null || true; }

teardown() {
    ns_del "$CLI"
    ns_del "$SRV"
}

# Namespaces left by an earlier run that was killed (suffix = a pid that no longer exists).
teardown_stale() {
    local ns pid
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
        [[ $ns =~ ^$NS_PREFIX-(cli|srv)-([0-9]+)(-[A-Za-z0-9_]+)?$ ]] || continue
        pid=${BASH_REMATCH[2]}
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "removing stale namespace $ns"
            ns_del "$ns"
        fi
    done
}

setup() {
    teardown # idempotent: start from nothing
    ip netns add "$CLI"
    ip netns add "$SRV"
    # Both ends are created directly inside their namespaces: no name clash in the root one.
    ip link add veth-cli netns "$CLI" type veth peer name veth-srv netns "$SRV"
    ip -n "$CLI" addr add "$CLI_IP/30" dev veth-cli
    ip -n "$SRV" addr add "$SRV_IP/30" dev veth-srv
    ip -n "$CLI" link set lo up
    ip -n "$SRV" link set lo up
    ip -n "$CLI" link set veth-cli up
    ip -n "$SRV" link set veth-srv up
    ip netns exec "$SRV" nft -f - <<EOF
table ip $NFT_TABLE {
    counter diverted { }
    counter other { }
    chain prerouting {
        type filter hook prerouting priority raw; policy accept;
        iifname "veth-srv" ip daddr $SRV_IP udp dport $IPERF_PORT udp length $((LEN + 8)) counter name "diverted" udp dport set $RTDAQ_PORT
        iifname "veth-srv" ip daddr $SRV_IP udp dport $IPERF_PORT counter name "other"
    }
}
EOF
}

nft_counter() { # name -> packets
    ip netns exec "$SRV" nft -j list counter ip "$NFT_TABLE" "$1" |
        jq '[.nftables[] | select(.counter) | .counter.packets] | first'
}
veth_stat() { # ns dev dir(rx|tx) field -> value
    ip -n "$1" -s -j link show "$2" | jq ".[0].stats64.$3.$4"
}
udp_mib() { # ns field -> value from /proc/net/snmp (per namespace)
    # shellcheck disable=SC2016 # awk program
    ip netns exec "$1" awk -v f="$2" '
        $1 == "Udp:" && !h { for (i = 2; i <= NF; i++) col[$i] = i; h = 1; next }
        $1 == "Udp:" && h  { print $col[f]; exit }' /proc/net/snmp
}

# Polls (every 50 ms, up to $2 seconds) until the command "$3..." prints something.
wait_for() {
    local what=$1 secs=$2; shift 2
    local deadline=$((SECONDS + secs))
    until [ -n "$("$@" 2>/dev/null)" ]; do
        if [ $SECONDS -ge $deadline ]; then
            echo "iperf3-interop: timed out after ${secs}s waiting for $what" >&2
            return 1
        fi
        sleep 0.05
    done
}

case $CMD in
    setup) need_root_and_tools; setup; echo "namespaces $CLI and $SRV ready"; exit 0 ;;
    teardown)
        [ "$(id -u)" -eq 0 ] || die "must run as root"
        if [ $STALE -eq 1 ]; then teardown_stale; else teardown; fi
        exit 0 ;;
esac

# ---- run ----------------------------------------------------------------------------------
need_root_and_tools
if [ -z "$RTDAQ" ]; then
    RTDAQ=$ROOT/target/debug/rtdaq
    [ -x "$RTDAQ" ] || (cd "$ROOT" && cargo build -q -p rtdaq)
fi
[ -x "$RTDAQ" ] || die "no rtdaq binary at $RTDAQ"
RTDAQ=$(realpath "$RTDAQ")
if [ -z "$OUT" ]; then
    OUT=$(mktemp -d /tmp/rtdaq-iperf3.XXXXXX)
    RM_OUT=1
else
    mkdir -p "$OUT"
    OUT=$(realpath "$OUT")
    RM_OUT=0
fi

SERVER_PID=""
RTDAQ_PID=""
CLIENT_PID=""
stop_pid() { # pid: TERM, up to 2 s, then KILL (only processes this script started)
    local pid=$1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
    kill -CONT "$pid" 2>/dev/null || true # in case --pause-rtdaq left it stopped
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}
cleanup() {
    local rc=$?
    trap - EXIT INT TERM
    stop_pid "$CLIENT_PID"
    stop_pid "$RTDAQ_PID"
    stop_pid "$SERVER_PID"
    if [ $KEEP -eq 1 ]; then
        echo "kept: namespaces $CLI and $SRV (remove: $0 teardown --suffix $SUFFIX)"
    else
        teardown
    fi
    if [ "$RM_OUT" -eq 1 ] && [ $KEEP -eq 0 ]; then rm -rf "$OUT"; fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
    echo "iperf3-interop: FAIL: $*" >&2
    for f in rtdaq.log iperf3-server.log; do
        [ -s "$OUT/$f" ] && { echo "---- $f (tail)" >&2; tail -n 15 "$OUT/$f" >&2; }
    done
    exit 1
}

teardown_stale
setup

# The receive-only config, with rtdaq's address and port inside SRV and this run's report.
CFG=$OUT/config.toml
edits=(-e "s#\"udp://0.0.0.0:5000\"#\"udp://$SRV_IP:$RTDAQ_PORT\"#"
    -e "s#^report_json = .*#report_json = \"$OUT/rtdaq.json\"#")
[ -n "$RCVBUF" ] && edits+=(-e "s#^rcvbuf = [0-9]*#rcvbuf = $RCVBUF#")
sed "${edits[@]}" "$ROOT/configs/host-udp-rx-only.toml" >"$CFG"
grep -q "\"udp://$SRV_IP:$RTDAQ_PORT\"" "$CFG" || fail "configs/host-udp-rx-only.toml: no address udp://0.0.0.0:5000 to replace"
[ -z "$RCVBUF" ] || grep -Eq "^rcvbuf = $RCVBUF([^0-9]|$)" "$CFG" || fail "configs/host-udp-rx-only.toml: no rcvbuf key to replace"

ip netns exec "$SRV" iperf3 -s -1 -p "$IPERF_PORT" -B "$SRV_IP" >"$OUT/iperf3-server.log" 2>&1 &
SERVER_PID=$!
# `ip netns exec` execs the command, so $! is rtdaq's own pid.
ip netns exec "$SRV" env RUST_LOG=info "$RTDAQ" run --config "$CFG" --duration "$DURATION" \
    --report-json "$OUT/rtdaq.json" >"$OUT/rtdaq.log" 2>&1 &
RTDAQ_PID=$!
wait_for "iperf3 -s to listen on tcp :$IPERF_PORT in $SRV" 10 \
    ip netns exec "$SRV" ss -Hltn "sport = :$IPERF_PORT" || fail "iperf3 server did not start"
wait_for "rtdaq to bind udp $SRV_IP:$RTDAQ_PORT in $SRV" 10 \
    ip netns exec "$SRV" ss -Huln "sport = :$RTDAQ_PORT" || fail "rtdaq did not bind its socket"

echo "iperf3 -u -c $SRV_IP -p $IPERF_PORT -l $LEN -b $RATE -t $TIME -J  ($CLI -> $SRV, rtdaq on :$RTDAQ_PORT)"
ip netns exec "$CLI" timeout $((TIME + 20)) iperf3 -u -c "$SRV_IP" -p "$IPERF_PORT" \
    -l "$LEN" -b "$RATE" -t "$TIME" -J >"$OUT/iperf3.json" 2>"$OUT/iperf3-client.err" &
CLIENT_PID=$!
if [ -n "$PAUSE" ]; then
    sleep 0.5
    kill -STOP "$RTDAQ_PID"
    sleep "$PAUSE"
    kill -CONT "$RTDAQ_PID"
    echo "rtdaq stopped (SIGSTOP) for $PAUSE s while iperf3 was sending"
fi
client_rc=0
wait "$CLIENT_PID" || client_rc=$?
CLIENT_PID=""
rtdaq_alive=1
kill -0 "$RTDAQ_PID" 2>/dev/null || rtdaq_alive=0
[ $client_rc -eq 0 ] || fail "iperf3 client exited $client_rc: $(jq -r '.error // empty' "$OUT/iperf3.json" 2>/dev/null) $(cat "$OUT/iperf3-client.err")"
[ $rtdaq_alive -eq 1 ] || fail "rtdaq's run ended before iperf3 finished sending; raise --duration (now $DURATION s)"

# rtdaq stops by itself after --duration; bound the wait anyway.
deadline=$((SECONDS + DURATION + 15))
while kill -0 "$RTDAQ_PID" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
kill -0 "$RTDAQ_PID" 2>/dev/null && fail "rtdaq still running $((DURATION + 15)) s after its --duration $DURATION"
rtdaq_rc=0
wait "$RTDAQ_PID" || rtdaq_rc=$?
RTDAQ_PID=""
[ -s "$OUT/rtdaq.json" ] || fail "rtdaq (exit $rtdaq_rc) wrote no report"
# 0 = ok, 1 = loss beyond tolerance (sequence loss; iperf3 payloads carry no rtdaq sequence).
case $rtdaq_rc in 0 | 1) ;; *) fail "rtdaq exited $rtdaq_rc (config or environment error)" ;; esac

# ---- the numbers ----------------------------------------------------------------------------
J=$OUT/iperf3.json
R=$OUT/rtdaq.json
sent=$(jq '.end.sum_sent.packets // .end.sum.packets' "$J")
sent_bytes=$(jq '.end.sum_sent.bytes // .end.sum.bytes' "$J")
interval_sum=$(jq '[.intervals[].sum.packets] | add // 0' "$J")
received=$(jq '.rx.totals.packets' "$R")
rx_bytes=$(jq '.rx.totals.bytes' "$R")
drops=$(jq '[.rx.totals.drops[]] | add' "$R")
drops_total=$(jq '.rx.totals.drops_total' "$R")
drops_by=$(jq -r '[.rx.totals.drops | to_entries[] | select(.value > 0) | "\(.key) \(.value)"] | join(", ") | if . == "" then "none" else . end' "$R")
kernel=$(jq '.rx.totals.drops.kernel' "$R")
ring_full=$(jq '.rx.totals.drops.ring_full' "$R")
malformed=$(jq '.rx.totals.malformed' "$R")
diverted=$(nft_counter diverted)
other=$(nft_counter other)
cli_tx_dropped=$(veth_stat "$CLI" veth-cli tx dropped)
srv_rx_dropped=$(veth_stat "$SRV" veth-srv rx dropped)
srv_noports=$(udp_mib "$SRV" NoPorts)
srv_rcvbuf_errors=$(udp_mib "$SRV" RcvbufErrors)
for v in sent received drops drops_total kernel ring_full malformed diverted; do
    [[ ${!v} =~ ^[0-9]+$ ]] || fail "could not read '$v' (got '${!v}') from $J / $R / nft"
done

cat <<EOF | tee "$OUT/counters.txt"
iperf3 sent:       $sent datagrams, $sent_bytes bytes (intervals sum to $interval_sum)
srv ingress (nft): $diverted data datagrams rewritten to :$RTDAQ_PORT, $other other UDP to :$IPERF_PORT (handshake)
rtdaq received:    $received datagrams, $rx_bytes bytes, malformed (no rtdaq header, expected) $malformed
rtdaq drops:       $drops ($drops_by); exit code $rtdaq_rc
kernel counters:   veth-cli tx_dropped $cli_tx_dropped, veth-srv rx_dropped $srv_rx_dropped, srv Udp NoPorts $srv_noports RcvbufErrors $srv_rcvbuf_errors
EOF

# ---- the checks -----------------------------------------------------------------------------
[ "$sent" -gt 0 ] || fail "iperf3 sent no datagrams"
[ "$drops" -eq "$drops_total" ] || fail "drops by reason sum to $drops but drops_total is $drops_total"
if [ $((received + drops)) -ne "$sent" ]; then
    echo "iperf3-interop: received + drops = $((received + drops)) but iperf3 sent $sent (difference $((sent - received - drops)))" >&2
    if [ "$diverted" -ne "$sent" ]; then
        echo "  only $diverted of them reached $SRV's prerouting: lost on the veth (tx_dropped $cli_tx_dropped, rx_dropped $srv_rx_dropped), before rtdaq" >&2
    fi
    if [ "$ring_full" -gt 0 ] && [ $((received + drops - sent)) -eq "$ring_full" ]; then
        echo "  the excess is exactly drops.ring_full ($ring_full): rtdaq counted those datagrams in rx.packets too" >&2
        echo "  (the consumer saw only $malformed = malformed); received - ring_full + drops = $((received - ring_full + drops))" >&2
    fi
    if [ $((received + drops)) -ne "$diverted" ]; then
        echo "  rtdaq accounts for $((received + drops)) of the $diverted that reached $SRV (NoPorts $srv_noports: datagrams with no socket, e.g. after rtdaq stopped)" >&2
    fi
    fail "received ($received) != sent ($sent) - drops ($drops)"
fi
[ "$diverted" -eq "$sent" ] || fail "nft diverted $diverted datagrams but iperf3 sent $sent"
[ "$malformed" -eq "$received" ] || fail "malformed $malformed != received $received: something other than iperf3 payloads arrived"
[ "$rx_bytes" -eq $((received * LEN)) ] || fail "rtdaq bytes $rx_bytes != $received x $LEN"
if [ $EXPECT_DROPS -eq 1 ] && [ "$kernel" -eq 0 ]; then
    fail "--expect-drops: rtdaq counted no kernel drops (rcvbuf ${RCVBUF:-as shipped})"
fi
echo "PASS: rtdaq received $received = iperf3 sent $sent - drops rtdaq counted $drops"
