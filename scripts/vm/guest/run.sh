#!/bin/bash
# Runs inside the guest, started by /init, once per guest-run.sh call (copied into the run's
# 9p share as /mnt/host/run.sh). Brings up Soft-RoCE, installs the --bin binaries, runs the
# command and records its exit code for the host.
#
# Files in /mnt/host (written by guest-run.sh): cmd (the command, bash-quoted), timeout
# (seconds), kernel (std|rt), bin/ (binaries). Written here: state (one word per line:
# booted, rxe-up, started, then "rc N" or "timeout N"; "setup-failed ..." on a setup error),
# out/ (the command's $RTDAQ_VM_OUT). stdout/stderr of the command: virtio ports named
# rtdaq.stdout / rtdaq.stderr (files on the host that guest-run.sh streams).
H=/mnt/host
state() { echo "$*" >> $H/state; sync; }
fail() { echo "GUEST-SETUP-FAILED: $*"; echo "guest setup failed: $*" > "$ERR"; state "setup-failed $*"; exit 0; }
port() {  # the /dev node of the virtio port with this name
    local p
    for p in /sys/class/virtio-ports/*; do
        [ "$(cat "$p/name" 2>/dev/null)" = "$1" ] && { echo "/dev/${p##*/}"; return 0; }
    done
    return 1
}
OUT_DEV=$(port rtdaq.stdout) || OUT_DEV=/dev/console
ERR=$(port rtdaq.stderr) || ERR=/dev/console
ulimit -l unlimited

# ---- Soft-RoCE on a veth pair in the initial namespace ---------------------------------------
# rdma_rxe in 6.1 binds its UDP/4791 socket in init_net only: an rxe device on a netdev in
# another namespace never passes traffic. So both ends stay here, and policy routing sends
# 169.254.77.1 <-> 169.254.77.2 over the veth wire instead of the local table.
modprobe crc32_pclmul 2>/dev/null || modprobe crc32_generic
for m in rdma_rxe veth ib_uverbs rdma_ucm; do modprobe $m || fail "modprobe $m"; done
ip link add vA type veth peer name vB || fail "veth pair"
ip addr add 169.254.77.1/24 dev vA
ip addr add 169.254.77.2/24 dev vB
ip link set vA mtu 9000; ip link set vB mtu 9000
ip link set vA up; ip link set vB up
for i in all vA vB; do sysctl -qw "net.ipv4.conf.$i.accept_local=1" "net.ipv4.conf.$i.rp_filter=0"; done
ip rule add pref 100 iif vA lookup local
ip rule add pref 101 iif vB lookup local
ip rule add pref 200 lookup 200
ip rule add pref 300 lookup local
ip rule del pref 0
ip route add 169.254.77.2/32 dev vA src 169.254.77.1 table 200
ip route add 169.254.77.1/32 dev vB src 169.254.77.2 table 200
rdma link add rxe0 type rxe netdev vA || fail "rdma link add rxe0"
rdma link add rxe1 type rxe netdev vB || fail "rdma link add rxe1"
# The IPv4 RoCE v2 GID of each device (169.254.77.1 = ::ffff:a9fe:4d01).
gid_index() {  # device, last hex group of the address
    local g
    for g in /sys/class/infiniband/"$1"/ports/1/gids/*; do
        if [ "$(cat "$g")" = "0000:0000:0000:0000:0000:ffff:a9fe:$2" ] &&
            [ "$(cat "/sys/class/infiniband/$1/ports/1/gid_attrs/types/${g##*/}" 2>/dev/null)" = "RoCE v2" ]; then
            echo "${g##*/}"; return 0
        fi
    done
    return 1
}
for _ in $(seq 50); do
    GID0=$(gid_index rxe0 4d01) && GID1=$(gid_index rxe1 4d02) && break
    sleep 0.1
done
if [ -z "${GID0:-}" ] || [ -z "${GID1:-}" ]; then fail "no IPv4 RoCE v2 GID on rxe0/rxe1"; fi
[ "$(cat /sys/class/infiniband/rxe0/ports/1/state)" = "4: ACTIVE" ] || fail "rxe0 port not ACTIVE"
ping -q -c 1 -W 5 -I 169.254.77.1 169.254.77.2 >/dev/null || fail "ping 169.254.77.1 -> .2 over the veth"
echo "GUEST: rxe0@vA 169.254.77.1 gid $GID0, rxe1@vB 169.254.77.2 gid $GID1"
state rxe-up

# ---- the binaries and the command -----------------------------------------------------------
if [ -d $H/bin ]; then
    for b in "$H"/bin/*; do
        [ -f "$b" ] || continue
        install -m 0755 "$b" /usr/local/bin/
        # a host binary whose shared libraries the guest lacks: say so before it fails
        if missing=$(ldd "$b" 2>/dev/null | grep 'not found'); then
            echo "guest-run (guest): $(basename "$b") needs libraries the guest lacks: $(awk '{printf "%s ", $1}' <<< "$missing")" > "$ERR"
        fi
    done
fi
mkdir -p $H/out
export RTDAQ_VM=1 RTDAQ_VM_KERNEL RTDAQ_VM_OUT=$H/out RTDAQ_VM_REPO=/mnt/repo \
    RTDAQ_VM_DEV0=rxe0 RTDAQ_VM_DEV1=rxe1 RTDAQ_VM_NETDEV0=vA RTDAQ_VM_NETDEV1=vB \
    RTDAQ_VM_IP0=169.254.77.1 RTDAQ_VM_IP1=169.254.77.2 RTDAQ_VM_GID0=$GID0 RTDAQ_VM_GID1=$GID1 \
    RTDAQ_VM_GID=$GID0 HOME=/root
RTDAQ_VM_KERNEL=$(cat $H/kernel)
T=$(cat $H/timeout)
cmd=$(cat $H/cmd)
if [ -d /mnt/repo/scripts ]; then cd /mnt/repo || true; else cd /root || true; fi
state started
t0=$(cut -d. -f1 /proc/uptime)
# -k: a command that ignores SIGTERM is killed 10 s later
eval "timeout -k 10 $T $cmd" < /dev/null > "$OUT_DEV" 2> "$ERR"
rc=$?
t1=$(cut -d. -f1 /proc/uptime)
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    if [ $((t1 - t0)) -ge "$T" ]; then state "timeout $rc"; exit 0; fi
fi
state "rc $rc"
