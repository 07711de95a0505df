#!/usr/bin/env bash
# ucx-tests.sh: rtdaq's UCX egress over RDMA (Soft-RoCE, UCX rc_verbs) in the QEMU guest
# (issue #31).
#
# On the host:   scripts/vm/ucx-tests.sh <rtdaq built with --features ucx> <ucx_recv>
#   boots the guest through scripts/vm/guest-run.sh with both binaries and runs this script
#   there (RTDAQ_VM=1). Exit 0 when every test passed. ucx_recv is scripts/peers/ucx_recv.c
#   built on the host (cc ... $(pkg-config --cflags --libs ucx)); the guest has Debian's
#   libucx0 and ucx-utils (scripts/vm/common.sh), the same UCX 1.13 the host links.
# In the guest (rxe0 169.254.77.1, rxe1 169.254.77.2):
#   transports  ucx_info -d lists rc_verbs on both Soft-RoCE devices
#   perftest    ucx_perftest put_bw (RDMA WRITE, zero-copy, 64 KiB) at the UCT level over
#               rc_verbs, server on rxe1, client on rxe0: the transport works here (UCP-level
#               tag_bw needs ud_verbs for its wireup, which times out on the emulated rxe)
#   egress      rtdaq (configs/host-udp-egress-ucx.toml: its generator -> one RX queue ->
#               the UCX egress stage) sends over rc_verbs from rxe0 to ucx_recv on rxe1:
#               exit 0, nothing lost, every message in sequence with the end of stream, the
#               receiver's payloads = rtdaq's received packets, and rxe0's own counter of
#               RoCE packets sent grew by at least the messages sent (the data went over RDMA)
#   no_listener the same with nobody at the destination: exit 2 naming egress[0].destinations[0]
# The guest is emulated: nothing here measures speed.
set -uo pipefail

if [ "${RTDAQ_VM:-}" != 1 ]; then
    [ $# -eq 2 ] || { echo "usage: $0 <rtdaq-binary (--features ucx)> <ucx_recv>" >&2; exit 2; }
    here=$(cd "$(dirname "$0")" && pwd)
    exec "$here/guest-run.sh" --bin "$1" --bin "$2" --timeout 300 \
        -- bash scripts/vm/ucx-tests.sh "$(basename "$1")" "$(basename "$2")"
fi

rtdaq=${1:-rtdaq}
recv=${2:-ucx_recv}
T=$(mktemp -d)
pass=0 fail=0
ok() { echo "PASS $1"; pass=$((pass + 1)); }
ko() { echo "FAIL $1: $2"; fail=$((fail + 1)); for f in "${@:3}"; do [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }; done; }
IP1=$RTDAQ_VM_IP1

# transports
ucx_info -v | head -1
ucx_info -d > "$T/info.txt" 2>&1
if grep -q "Transport: rc_verbs" "$T/info.txt" && grep -q "Device: $RTDAQ_VM_DEV0:1" "$T/info.txt" &&
    grep -q "Device: $RTDAQ_VM_DEV1:1" "$T/info.txt"; then
    ok "transports: ucx_info -d lists rc_verbs on $RTDAQ_VM_DEV0:1 and $RTDAQ_VM_DEV1:1"
else
    ko transports "no rc_verbs on the rxe devices" "$T/info.txt"
fi

# perftest: UCT level (rc_verbs endpoints connected directly: UCP's own wireup over
# ud_verbs times out on the emulated rxe), RDMA WRITE zero-copy of 64 KiB messages
ucx_perftest -d "$RTDAQ_VM_DEV1:1" -x rc_verbs -p 13350 > "$T/pt-server.txt" 2>&1 &
sp=$!
sleep 1
timeout 60 ucx_perftest "$IP1" -p 13350 -d "$RTDAQ_VM_DEV0:1" -x rc_verbs -t put_bw -D zcopy \
    -s 65536 -n 200 > "$T/pt.txt" 2>&1
prc=$?
wait $sp
if [ $prc = 0 ] && grep -q '^Final:' "$T/pt.txt"; then
    ok "perftest: ucx_perftest put_bw (zcopy) over rc_verbs $RTDAQ_VM_DEV0 -> $RTDAQ_VM_DEV1: $(grep '^Final:' "$T/pt.txt" | tr -s ' ')"
else
    ko perftest "exit $prc" "$T/pt.txt" "$T/pt-server.txt"
fi

# egress: the shipped config, its destination on rxe1, UCX on rc_verbs, a slow generator
cfg() { # cfg FILE PORT
    sed -e "s/destinations = \[\"127.0.0.1:13337\"\]/destinations = [\"$IP1:$2\"]/" \
        -e 's/^ucx_transports = "tcp" .*/ucx_transports = "rc_verbs"/' \
        -e 's/^rate_gbps = 1.0 .*/rate_gbps = 0.02/' \
        configs/host-udp-egress-ucx.toml > "$1"
}
roce_sent() { cat "/sys/class/infiniband/$RTDAQ_VM_DEV0/ports/1/hw_counters/sent_pkts" 2>/dev/null || echo 0; }
# egress_once PORT: one try, a fresh receiver on PORT; sets the variables the verdict reads
egress_once() {
    cfg "$T/egress.toml" "$1"
    # Soft-RoCE under TCG: a connection's CM handshake is sometimes reset on the first try
    # (seen in CI: "failed to connect CM lane ... Connection reset by remote peer");
    # connect_wait_ms lets the start try again while the receiver listens.
    sed -i 's/^connect_wait_ms = 0 /connect_wait_ms = 20000 /' "$T/egress.toml"
    rm -f "$T/recv.json" "$T/egress.json"
    UCX_TLS=rc_verbs UCX_NET_DEVICES=$RTDAQ_VM_DEV1:1 "$recv" --addr "$IP1" --port "$1" --streams 1 \
        --seconds 60 --json "$T/recv.json" > "$T/recv.txt" 2>&1 &
    local rp=$!
    for _ in $(seq 50); do grep -q '^listening' "$T/recv.txt" && break; sleep 0.1; done
    local before
    before=$(roce_sent)
    UCX_NET_DEVICES=$RTDAQ_VM_DEV0:1 "$rtdaq" run --config "$T/egress.toml" --duration 3 \
        --report-json "$T/egress.json" > "$T/egress.log" 2>&1
    erc=$?
    # a receiver left waiting for a stream that never ended (a broken first connection)
    # is stopped after 20 s, not 60
    for _ in $(seq 200); do kill -0 $rp 2>/dev/null || break; sleep 0.1; done
    kill $rp 2>/dev/null
    wait $rp
    roce=$(($(roce_sent) - before))
    got=$(jq -r .payloads "$T/recv.json" 2>/dev/null)
    missing=$(jq -r .missing "$T/recv.json" 2>/dev/null)
    ended=$(jq -r .streams_ended "$T/recv.json" 2>/dev/null)
    rx=$(jq -r .rx.totals.packets "$T/egress.json" 2>/dev/null)
    lost=$(jq -r .lost "$T/egress.json" 2>/dev/null)
    sent=$(jq -r '.rx.queues[0].egress[0].payloads_sent' "$T/egress.json" 2>/dev/null)
    msgs=$(jq -r '.rx.queues[0].egress[0].datagrams' "$T/egress.json" 2>/dev/null)
    [ $erc = 0 ] && [ "$lost" = 0 ] && [ "${rx:-0}" -gt 0 ] && [ "$got" = "$rx" ] && [ "$sent" = "$rx" ] &&
        [ "$missing" = 0 ] && [ "$ended" = 1 ] && [ "$roce" -ge "${msgs:-1}" ]
}
egress_verdict() { echo "exit $erc, lost $lost, rx $rx, sent $sent in $msgs messages, receiver got $got, missing $missing, ended $ended, RoCE packets sent $roce"; }
# The emulated RDMA (TCG) has lost a connection's handshake now and then: one more try on a
# fresh port, and the first try's result and logs are printed, never hidden.
first="" good=0
if egress_once 13351; then
    good=1
else
    first=$(egress_verdict)
    echo "egress: the first try failed ($first); its logs, then a second try:"
    for f in "$T/egress.log" "$T/recv.txt"; do echo "--- $f"; tail -n 30 "$f"; done
    egress_once 13353 && good=1
fi
if [ $good = 1 ]; then
    ok "egress: rtdaq -> UCX rc_verbs ($RTDAQ_VM_DEV0 -> $RTDAQ_VM_DEV1): $rx payloads received, sent in $msgs messages and got by ucx_recv, 0 missing, end of stream; $RTDAQ_VM_DEV0 sent $roce RoCE packets${first:+ (on the second try; the first: $first)}"
else
    ko egress "$(egress_verdict)${first:+ (second try; the first: $first)}" \
        "$T/egress.log" "$T/recv.txt" "$T/recv.json"
fi

# no_listener
cfg "$T/nolisten.toml" 13352
UCX_NET_DEVICES=$RTDAQ_VM_DEV0:1 "$rtdaq" run --config "$T/nolisten.toml" --duration 2 \
    > "$T/nolisten.log" 2>&1
nrc=$?
if [ $nrc = 2 ] && grep -q 'egress\[0\].destinations\[0\]' "$T/nolisten.log"; then
    ok "no_listener: exit 2 naming egress[0].destinations[0]: $(grep -m1 'destinations\[0\]' "$T/nolisten.log")"
else
    ko no_listener "exit $nrc" "$T/nolisten.log"
fi

echo "ucx-tests: $pass passed, $fail failed"
[ $fail = 0 ]
