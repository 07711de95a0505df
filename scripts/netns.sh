#!/usr/bin/env bash
# Two network namespaces joined by a veth pair, for running rtdaq and its peers by hand:
#
#   netns rtdaq-a  rtdaq0a 169.254.90.1/30 ==== rtdaq0b 169.254.90.2/30  netns rtdaq-b
#
# The addresses exist only inside the namespaces (169.254.77.x belongs to
# scripts/iperf3-interop.sh, 169.254.X.x with X in 100..249 to the Rust test bed
# rtdaq-testbed). MACs are locally administered: 02:72:74:00:5a:01 (a), 02:72:74:00:5a:02 (b).
# Loopback is up in both namespaces; IPv6 is off unless --ipv6 (no router solicitations, DAD
# or MLD frames on the veth).
#
# Usage (as root):
#   scripts/netns.sh up     [--mtu MTU] [--name PREFIX] [--ipv6]
#                           create (or repair) and bring up; idempotent: the pair ends up as
#                           the options say (MTU 1500 when --mtu is not given)
#   scripts/netns.sh down   [--name PREFIX]   delete both namespaces (and so the veth pair);
#                           nothing to do when absent
#   scripts/netns.sh status [--name PREFIX]   show them; exit 0 when up, 1 when not
# Options:
#   --mtu MTU       veth MTU, 68..65535 (default 1500; 9000 for jumbo frames)
#   --name PREFIX   namespaces PREFIX-a and PREFIX-b (default rtdaq); the veth names stay
#                   rtdaq0a / rtdaq0b (each lives in its own namespace)
#   --ipv6          keep IPv6 on (default: off)
# Exit: 0 ok; 1 status: not (fully) up, or a command failed; 2 usage, not root, missing tool.
# Needs: iproute2 (ip), procps (sysctl).
set -euo pipefail
export PATH="$PATH:/usr/sbin:/sbin"

PROG=netns.sh
IF_A=rtdaq0a
IF_B=rtdaq0b
ADDR_A=169.254.90.1/30
ADDR_B=169.254.90.2/30
MAC_A=02:72:74:00:5a:01
MAC_B=02:72:74:00:5a:02

usage() {
    cat <<'EOF'
usage: scripts/netns.sh up|down|status [--mtu MTU] [--name PREFIX] [--ipv6]
  up       create (or repair) namespaces PREFIX-a and PREFIX-b joined by veth rtdaq0a/rtdaq0b,
           169.254.90.1/30 (a) and 169.254.90.2/30 (b), and bring them up (idempotent)
  down     delete both namespaces (idempotent)
  status   show them; exit 0 when up, 1 when not
  --mtu MTU      veth MTU, 68..65535 (up only; default 1500)
  --name PREFIX  namespace prefix (default rtdaq)
  --ipv6         keep IPv6 on (up only; default off)
EOF
}
bad_usage() {
    echo "$PROG: $*" >&2
    usage >&2
    exit 2
}
say() { echo "$PROG: $*"; }

# ---- arguments ------------------------------------------------------------------------------
CMD=""
MTU=""
PREFIX=rtdaq
IPV6=0
while [ $# -gt 0 ]; do
    case "$1" in
    up | down | status)
        [ -z "$CMD" ] || bad_usage "more than one command: $CMD and $1"
        CMD=$1
        ;;
    --mtu)
        [ $# -ge 2 ] || bad_usage "--mtu needs a value"
        MTU=$2
        shift
        ;;
    --mtu=*) MTU=${1#--mtu=} ;;
    --name)
        [ $# -ge 2 ] || bad_usage "--name needs a value"
        PREFIX=$2
        shift
        ;;
    --name=*) PREFIX=${1#--name=} ;;
    --ipv6) IPV6=1 ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) bad_usage "unknown argument: $1" ;;
    esac
    shift
done
[ -n "$CMD" ] || bad_usage "missing command (up, down or status)"
if [ -n "$MTU" ]; then
    [ "$CMD" = up ] || bad_usage "--mtu only applies to up"
    if ! [[ $MTU =~ ^[0-9]{2,5}$ ]] || [ "$MTU" -lt 68 ] || [ "$MTU" -gt 65535 ]; then
        bad_usage "--mtu must be a number in 68..65535, not '$MTU'"
    fi
else
    MTU=1500
fi
if [ "$IPV6" = 1 ] && [ "$CMD" != up ]; then bad_usage "--ipv6 only applies to up"; fi
[[ $PREFIX =~ ^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$ ]] ||
    bad_usage "--name must be 1..41 characters of [A-Za-z0-9_.-], not '$PREFIX'"
# rtdaq-<pid>-<n>-... belongs to the Rust test bed, whose cleanup removes it when <pid> is gone
[[ $PREFIX =~ ^rtdaq-[0-9]+-[0-9]+ ]] &&
    bad_usage "--name '$PREFIX' looks like a test bed namespace (rtdaq-<pid>-<n>-...)"
NS_A=$PREFIX-a
NS_B=$PREFIX-b

[ "$(id -u)" -eq 0 ] || {
    echo "$PROG: run as root (it creates network namespaces and a veth pair)" >&2
    exit 2
}
command -v ip >/dev/null || {
    echo "$PROG: 'ip' not found: apt-get install iproute2" >&2
    exit 2
}

# ---- helpers --------------------------------------------------------------------------------
ns_exists() { [ -e "/run/netns/$1" ]; }
link_exists() { ns_exists "$1" && ip -n "$1" link show dev "$2" >/dev/null 2>&1; }

# set_ipv6 NS VALUE NAME...: net.ipv6.conf.NAME.disable_ipv6=VALUE inside NS
set_ipv6() {
    local ns=$1 value=$2 name args=()
    shift 2
    [ -d /proc/sys/net/ipv6 ] || return 0
    command -v sysctl >/dev/null || {
        echo "$PROG: 'sysctl' not found: apt-get install procps" >&2
        exit 2
    }
    for name in "$@"; do args+=("net.ipv6.conf.$name.disable_ipv6=$value"); done
    ip netns exec "$ns" sysctl -q -w "${args[@]}"
}

# show_end NS IF: one line with the namespace, interface, addresses, MAC, MTU, state
show_end() {
    local ns=$1 ifname=$2 line mac mtu state idx addrs
    if ! ns_exists "$ns"; then
        printf '%-14s absent\n' "$ns"
        return 1
    fi
    if ! line=$(ip -n "$ns" -o link show dev "$ifname" 2>/dev/null); then
        printf '%-14s %-8s absent\n' "$ns" "$ifname"
        return 1
    fi
    idx=${line%%:*}
    mac=$(awk '{for (i = 1; i < NF; i++) if ($i == "link/ether") print $(i + 1)}' <<<"$line")
    mtu=$(awk '{for (i = 1; i < NF; i++) if ($i == "mtu") print $(i + 1)}' <<<"$line")
    state=$(awk '{for (i = 1; i < NF; i++) if ($i == "state") print $(i + 1)}' <<<"$line")
    addrs=$(ip -n "$ns" -o addr show dev "$ifname" | awk '{printf "%s%s", sep, $4; sep = ","}')
    printf '%-14s %-8s %-18s %s  mtu %s  ifindex %s  %s\n' \
        "$ns" "$ifname" "${addrs:-(no address)}" "$mac" "$mtu" "$idx" "$state"
    [ "$state" = UP ]
}

wait_up() {
    local ns=$1 ifname=$2 i
    for i in $(seq 1 100); do
        ip -n "$ns" -o link show dev "$ifname" | grep -q ' state UP ' && return 0
        [ "$i" -lt 100 ] && sleep 0.05
    done
    echo "$PROG: $ifname in $ns did not come up within 5 s" >&2
    return 1
}

# ---- commands -------------------------------------------------------------------------------
do_up() {
    local ns
    for ns in "$NS_A" "$NS_B"; do
        if ns_exists "$ns"; then
            say "namespace $ns exists"
        else
            ip netns add "$ns"
            say "created namespace $ns"
        fi
        if [ "$IPV6" = 1 ]; then set_ipv6 "$ns" 0 all default; else set_ipv6 "$ns" 1 all default; fi
        ip -n "$ns" link set lo up
    done
    if link_exists "$NS_A" "$IF_A" && link_exists "$NS_B" "$IF_B"; then
        say "veth $IF_A ($NS_A) <-> $IF_B ($NS_B) exists"
    else
        # half a pair (or a stray interface of that name): start over
        if link_exists "$NS_A" "$IF_A"; then ip -n "$NS_A" link del "$IF_A"; fi
        if link_exists "$NS_B" "$IF_B"; then ip -n "$NS_B" link del "$IF_B"; fi
        ip -n "$NS_A" link add "$IF_A" address "$MAC_A" mtu "$MTU" type veth \
            peer name "$IF_B" address "$MAC_B" mtu "$MTU" netns "$NS_B"
        say "created veth $IF_A ($NS_A) <-> $IF_B ($NS_B)"
    fi
    local side ns_ ifn addr mac old_mtu
    for side in a b; do
        if [ $side = a ]; then
            ns_=$NS_A ifn=$IF_A addr=$ADDR_A mac=$MAC_A
        else
            ns_=$NS_B ifn=$IF_B addr=$ADDR_B mac=$MAC_B
        fi
        set_ipv6 "$ns_" "$((1 - IPV6))" "$ifn"
        old_mtu=$(ip -n "$ns_" -o link show dev "$ifn" | awk '{for (i = 1; i < NF; i++) if ($i == "mtu") print $(i + 1)}')
        ip -n "$ns_" link set dev "$ifn" address "$mac" mtu "$MTU"
        [ "$old_mtu" = "$MTU" ] || say "$ifn: mtu $old_mtu -> $MTU"
        ip -n "$ns_" addr replace "$addr" dev "$ifn"
        ip -n "$ns_" link set dev "$ifn" up
    done
    say "addresses $ADDR_A ($IF_A), $ADDR_B ($IF_B); mtu $MTU; IPv6 $([ "$IPV6" = 1 ] && echo on || echo off); links up"
    wait_up "$NS_A" "$IF_A"
    wait_up "$NS_B" "$IF_B"
    show_end "$NS_A" "$IF_A"
    show_end "$NS_B" "$IF_B"
    echo "try: ip netns exec $NS_A ping -c1 ${ADDR_B%/*}"
}

do_down() {
    local ns pids
    for ns in "$NS_A" "$NS_B"; do
        if ! ns_exists "$ns"; then
            say "namespace $ns absent"
            continue
        fi
        pids=$(ip netns pids "$ns" | paste -sd ' ' -)
        if [ -n "$pids" ]; then
            say "warning: processes still run in $ns (pids $pids); they keep it alive until they exit"
        fi
        ip netns delete "$ns"
        say "deleted namespace $ns"
    done
}

do_status() {
    local ok=0
    show_end "$NS_A" "$IF_A" || ok=1
    show_end "$NS_B" "$IF_B" || ok=1
    if [ $ok = 0 ]; then say "up"; else say "not up"; fi
    return $ok
}

case "$CMD" in
up) do_up ;;
down) do_down ;;
status) do_status ;;
esac
