#!/bin/bash
# shellcheck disable=SC2317  # the check functions run through check()
# Guest side of scripts/vm/selftest.sh on the stock kernel (run through guest-run.sh --bin).
# Checks: ibv_devices lists rxe0 and rxe1; librdmacm's rdma_server (169.254.77.1, rxe0) and
# rdma_client (from 169.254.77.2, rxe1) exchange their messages over the veth; verbs RC
# ping-pong rxe1 -> rxe0. Exits with $1 (default 0) when every check passed, 1 otherwise, so
# the caller also sees that the exit code crosses the guest boundary.
set -u
want_rc=${1:-0}
fails=0
check() {  # name, then the command
    local name=$1; shift
    if "$@"; then echo "selftest-std: PASS $name"; else echo "selftest-std: FAIL $name"; fails=$((fails + 1)); fi
}
tx_packets() { cat "/sys/class/net/$1/statistics/tx_packets"; }

echo "selftest-std: kernel $(uname -r), $(uname -v)"
ibv_devices | tee /tmp/devices
check "ibv_devices lists rxe0" grep -qE '^\s+rxe0\s' /tmp/devices
check "ibv_devices lists rxe1" grep -qE '^\s+rxe1\s' /tmp/devices

rdmacm() {
    local b_before sp crc src
    b_before=$(tx_packets "$RTDAQ_VM_NETDEV1")
    timeout 60 rdma_server -s "$RTDAQ_VM_IP0" > /tmp/rdma_server.txt 2>&1 & sp=$!
    sleep 1
    timeout 50 rdma_client -s "$RTDAQ_VM_IP0" > /tmp/rdma_client.txt 2>&1; crc=$?
    wait "$sp"; src=$?
    sed 's/^/  [server] /' /tmp/rdma_server.txt; sed 's/^/  [client] /' /tmp/rdma_client.txt
    echo "  rdma_server exit $src, rdma_client exit $crc, $RTDAQ_VM_NETDEV1 sent $(( $(tx_packets "$RTDAQ_VM_NETDEV1") - b_before )) packets"
    [ "$crc" -eq 0 ] && [ "$src" -eq 0 ] && grep -q 'end 0' /tmp/rdma_client.txt && grep -q 'end 0' /tmp/rdma_server.txt &&
        [ "$(tx_packets "$RTDAQ_VM_NETDEV1")" -gt "$b_before" ]
}
check "rdma_server ($RTDAQ_VM_IP0) <-> rdma_client ($RTDAQ_VM_IP1) exchange messages" rdmacm

pingpong() {
    local sp crc src
    timeout 60 ibv_rc_pingpong -d rxe0 -g "$RTDAQ_VM_GID0" -n 100 -s 1024 > /tmp/pp_server.txt 2>&1 & sp=$!
    sleep 1
    timeout 50 ibv_rc_pingpong -d rxe1 -g "$RTDAQ_VM_GID1" -n 100 -s 1024 "$RTDAQ_VM_IP0" > /tmp/pp_client.txt 2>&1; crc=$?
    wait "$sp"; src=$?
    if [ "$crc" -ne 0 ] || [ "$src" -ne 0 ]; then cat /tmp/pp_server.txt /tmp/pp_client.txt; return 1; fi
}
check "ibv_rc_pingpong rxe1 -> rxe0 (100 x 1 KiB, RC)" pingpong

echo "written in the guest on $(uname -r)" > "$RTDAQ_VM_OUT/selftest-std.txt"
if [ $fails -ne 0 ]; then echo "selftest-std: $fails check(s) failed"; exit 1; fi
echo "selftest-std: all passed, exiting with $want_rc"
exit "$want_rc"
