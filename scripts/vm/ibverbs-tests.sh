#!/usr/bin/env bash
# ibverbs-tests.sh: the ibverbs engine's RoCE tests in the Soft-RoCE guest (issue #8).
#
# On the host:   scripts/vm/ibverbs-tests.sh <rtdaq-binary built with engine-ibverbs> [test binaries...]
#   boots the guest through scripts/vm/guest-run.sh, copies the binaries in and runs this
#   script there (RTDAQ_VM=1). Exit 0 when every test passed.
# In the guest:  the tests themselves (rxe0 169.254.77.1, rxe1 169.254.77.2):
#   send        rtdaq RoCE server (3 connections, 3 RX queues) <- rtdaq client, SEND: exit 0, lost 0,
#               every message the client sent received and validated (sequence + payload
#               pattern), no drop on either end, io_thread_allocations 0 on both ends
#   write_imm   the same with op = "write_imm" (RDMA WRITE with immediate into granted slots)
#   read        the same with op = "read" (pull mode: the server RDMA-READs each message from
#               the client's buffers, announced in descriptor messages; the client frees a
#               buffer only when the server returned its slot)
#   send_nodrain, write_imm_nodrain, read_nodrain
#               the same with a client that sends as fast as it can and ends right after its
#               last send (count reached, drain_ms = 0): it disconnects at once, and the
#               server still accounts for every message
#   send_paused, write_imm_paused
#               the server process is stopped while the client sends 3000 messages (within
#               the credits) and disconnects: when the server runs again its peers are gone
#               and their tails still in its completion queues; every message is delivered
#               (the PASS line says how many after their peer had gone)
#   read_paused the same for op = "read", except that the server runs again after 3 s, while
#               the client waits (up to 5 s) for its messages to be pulled: in pull mode the
#               data is in the sender's memory, so a sender that leaves first takes it along
#               (it then counts what was not pulled as dropped)
#   rdma_client librdmacm's rdma_client (rdmacm-utils) -> rtdaq server: without a reply
#               (the default) its message is counted and rdma_client waits in vain; with
#               engine.ibverbs.reply = "echo" / "ack" rdma_client gets its answer and exits
#               0, and the server counts the message and the reply
#   send_as_unit
#               send with both ends as user nobody with exactly the shipped unit's
#               capabilities (setpriv): the unit's privileges suffice for ibverbs
#   ucmatose    rtdaq client -> ucmatose server (rdmacm-utils): messages exchanged both ways
#   peer_killed the client is killed (SIGKILL) mid-stream: the server detects and counts it,
#               no hang, no allocation on its queue threads
#   reconnect   the server goes away and comes back: the client reconnects (its TX thread
#               adopts the new connections without allocating)
#   wrong_addr  client to a port nobody listens on: exit 2 naming the address; server on an
#               address no RDMA device has: exit 2 "no RDMA device"
#
# With RTDAQ_IB_KERNEL=rt (host side) the guest boots Debian's PREEMPT_RT kernel with a third
# CPU for housekeeping (as scripts/vm/rt-appliance.sh) and runs a subset: rtdaq doctor passes
# kernel.preempt_rt, and the send / write_imm pairs and rdma_client with a reply run with
# every queue thread at SCHED_FIFO 50 (checked in /proc while they run), the processes
# started on the housekeeping CPU.
# Extra test binaries given on the command line run in the guest too (each must exit 0):
# scripts/test.sh passes the engine crate's integration tests (reply_peer_without_receives:
# replies to a peer that never posts a receive never stall reception).
set -uo pipefail

if [ "${RTDAQ_VM:-}" != 1 ]; then
    [ $# -ge 1 ] || { echo "usage: $0 <rtdaq-binary> [test binaries...]" >&2; exit 2; }
    here=$(cd "$(dirname "$0")" && pwd)
    bins=()
    for b in "$@"; do bins+=(--bin "$b"); done
    names=()
    for b in "$@"; do names+=("$(basename "$b")"); done
    if [ "${RTDAQ_IB_KERNEL:-std}" = rt ]; then
        RTDAQ_VM_SMP=${RTDAQ_VM_SMP:-3} exec "$here/guest-run.sh" --kernel rt "${bins[@]}" --timeout 600 \
            -- bash scripts/vm/ibverbs-tests.sh "${names[@]}"
    fi
    exec "$here/guest-run.sh" "${bins[@]}" --timeout 600 -- bash scripts/vm/ibverbs-tests.sh "${names[@]}"
fi

rtdaq=${1:-rtdaq}
shift || true
rt=0
[ "${RTDAQ_VM_KERNEL:-std}" = rt ] && rt=1
# On the PREEMPT_RT guest: processes start on the last (housekeeping) CPU, queue threads run
# at SCHED_FIFO 50 on cores 0 and 1 (the configs' cpu_core), and pair() samples them.
launch=()
rt_sed=()
if [ $rt = 1 ]; then
    launch=(taskset -c "$(($(nproc) - 1))")
    rt_sed=('s/^cpu_core = \([0-9]*\)/cpu_core = \1\nrt_priority = 50/')
fi
T=$(mktemp -d)
pass=0 fail=0
ok() { echo "PASS $1"; pass=$((pass + 1)); }
ko() { echo "FAIL $1: $2"; fail=$((fail + 1)); for f in "${@:3}"; do [ -f "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }; done; }
num() { grep -o "\"$2\": *[0-9]*" "$1" | head -n 1 | grep -o '[0-9]*$'; }
rx_packets() { sed -n 's/.*"rx": *{ *"totals": *{[^}]*"packets": *\([0-9]*\).*/\1/p' "$1" | head -n 1; }
variant() { # variant SRC DST sed-expressions...
    local src=$1 dst=$2
    shift 2
    cp "$src" "$dst"
    for e in "$@"; do sed -i "$e" "$dst"; done
}

allocs() { tr -d '\n ' <"$1" 2>/dev/null | sed -n 's/.*"io_thread_allocations":\([0-9]*\).*/\1/p'; }

# pair NAME OP PORT [client sed-expressions...]: rtdaq server <- rtdaq client. With
# pause_server=1 the server process is stopped (SIGSTOP) once the client runs, until the
# client has sent everything and disconnected: the server then finds the tail of each
# connection still in its completion queue and its peer already gone. With pause_server=2
# (pull mode) it runs again after 3 s, while the client still waits for its messages to be
# pulled.
pause_server=0
server_sed=()
pair() {
    local name=$1 op=$2 port=$3
    shift 3
    variant configs/vm-roce-server.toml "$T/$name-s.toml" "s/^op = .*/op = \"$op\"/" "s/:7471/:$port/" "${server_sed[@]}" "${rt_sed[@]}"
    variant configs/vm-roce-client.toml "$T/$name-c.toml" "s/^op = .*/op = \"$op\"/" "s/:7471/:$port/" "$@" "${rt_sed[@]}"
    "${launch[@]}" "$rtdaq" run --config "$T/$name-s.toml" --duration 16 --report-json "$T/$name-s.json" >"$T/$name-s.log" 2>&1 &
    local sp=$!
    sleep 1
    if [ $rt = 1 ]; then
        # The server's threads (tid class rtprio cpu name), sampled above the queue threads.
        chrt -f 90 ps -L -o tid=,cls=,rtprio=,psr=,comm= -p $sp >"$T/$name-threads.txt" 2>&1
    fi
    local crc
    if [ "$pause_server" != 0 ]; then
        "$rtdaq" run --config "$T/$name-c.toml" --report-json "$T/$name-c.json" >"$T/$name-c.log" 2>&1 &
        local cp=$!
        for _ in $(seq 200); do grep -q "queues running" "$T/$name-c.log" && break; sleep 0.05; done
        sleep 0.2 # the server's first grant (write_imm) goes out
        kill -STOP $sp
        if [ "$pause_server" = 2 ]; then
            sleep 3
            kill -CONT $sp
        fi
        wait $cp
        crc=$?
        kill -CONT $sp
    else
        "${launch[@]}" "$rtdaq" run --config "$T/$name-c.toml" --report-json "$T/$name-c.json" >"$T/$name-c.log" 2>&1
        crc=$?
    fi
    wait $sp
    local src=$?
    local got sent tdrops rdrops sa ca late
    got=$(tr -d '\n ' <"$T/$name-s.json" 2>/dev/null | sed -n 's/.*"rx":{"totals":{[^}]*"packets":\([0-9]*\).*/\1/p')
    rdrops=$(tr -d '\n ' <"$T/$name-s.json" 2>/dev/null | sed -n 's/.*"rx":{"totals":{[^}]*"drops_total":\([0-9]*\).*/\1/p')
    sent=$(tr -d '\n ' <"$T/$name-c.json" 2>/dev/null | sed -n 's/.*"tx":{"totals":{[^}]*"packets":\([0-9]*\).*/\1/p')
    tdrops=$(tr -d '\n ' <"$T/$name-c.json" 2>/dev/null | sed -n 's/.*"tx":{"totals":{[^}]*"drops_total":\([0-9]*\).*/\1/p')
    sa=$(allocs "$T/$name-s.json")
    ca=$(allocs "$T/$name-c.json")
    # Messages that completed after their peer had disconnected (delivered by the drain).
    late=$(sed -n 's/.* \([0-9]*\) message(s) that completed after the peer left.*/\1/p' "$T/$name-s.log" | awk '{ s += $1 } END { print s + 0 }')
    # Every message the client's generator made was sent (no TX drop) and received by the
    # server, validated by sequence number and payload pattern (lost 0, exit 0), nothing
    # dropped on either side, no allocation on any queue thread. The emulated guest is
    # slow: the generator may not reach its count within the run, so the check is
    # sent == received, not a fixed number.
    if [ $crc = 0 ] && [ $src = 0 ] && [ "$(num "$T/$name-s.json" lost)" = 0 ] && [ "${sent:-0}" -gt 0 ] \
        && [ "$got" = "$sent" ] && [ "$tdrops" = 0 ] && [ "$rdrops" = 0 ] && [ "$sa" = 0 ] && [ "$ca" = 0 ]; then
        ok "$name ($sent messages on 3 connections: all sent, all received and validated, lost 0, io_thread_allocations 0/0; $late delivered after their peer disconnected)"
        if [ $rt = 1 ]; then
            # The server's three RX queue threads at SCHED_FIFO 50 on cores 0 and 1.
            local ff
            ff=$(awk '$2 == "FF" && $3 == 50 && ($4 == 0 || $4 == 1)' "$T/$name-threads.txt" | wc -l)
            if [ "$ff" -ge 3 ] && ! grep -qiE 'without SCHED_FIFO|CAP_SYS_NICE' "$T/$name-s.log" "$T/$name-c.log"; then
                ok "$name on PREEMPT_RT: $ff server threads at SCHED_FIFO 50 on cores 0/1: $(awk '$2 == "FF" {printf "%s(cpu %s) ", $5, $4}' "$T/$name-threads.txt")"
            else
                ko "$name-rt" "expected 3 queue threads at SCHED_FIFO 50 on cores 0/1, saw $ff" "$T/$name-threads.txt" "$T/$name-s.log"
            fi
        fi
    else
        ko "$name" "client exit $crc (sent ${sent:-?}, TX drops ${tdrops:-?}, allocations ${ca:-?}), server exit $src (received ${got:-?}, RX drops ${rdrops:-?}, lost $(num "$T/$name-s.json" lost), allocations ${sa:-?})" "$T/$name-s.log" "$T/$name-c.log"
    fi
}

# rdma_test NAME PORT REPLY: rdma_client (one 16-byte message, then it waits for one reply)
# against an rtdaq server with engine.ibverbs.reply = REPLY ("" = the default, no reply).
rdma_test() {
    local name=$1 port=$2 reply=$3 wait=10
    local extra=()
    [ -n "$reply" ] && extra=("/^\[engine.ibverbs\]/a $reply")
    [ -n "$reply" ] || wait=4
    variant configs/vm-roce-server.toml "$T/$name-s.toml" "s/:7471/:$port/" 's/^connections = 3/connections = 1/' \
        '/^\[run\]/a validate = "count"' "${extra[@]}" "${rt_sed[@]}"
    awk '/^\[\[interfaces.rx_queues\]\]/ { n++ } /^\[run\]/ { n = 0 } n >= 2 { next } { print }' "$T/$name-s.toml" >"$T/$name-s1.toml"
    mv "$T/$name-s1.toml" "$T/$name-s.toml"
    "${launch[@]}" "$rtdaq" run --config "$T/$name-s.toml" --duration $((wait + 2)) --report-json "$T/$name-s.json" >"$T/$name-s.log" 2>&1 &
    local sp=$!
    sleep 1
    timeout "$wait" rdma_client -s 169.254.77.1 -p "$port" >"$T/$name.log" 2>&1
    local rcrc=$?
    wait $sp
    local src=$?
    local got replies failures
    got=$(tr -d '\n ' <"$T/$name-s.json" 2>/dev/null | sed -n 's/.*"rx":{"totals":{[^}]*"packets":\([0-9]*\).*/\1/p')
    replies=$(sed -n 's/.*, \([0-9]*\) repl(ies) sent.*/\1/p' "$T/$name-s.log" | head -n 1)
    failures=$(sed -n 's/.*, \([0-9]*\) reply failure(s).*/\1/p' "$T/$name-s.log" | head -n 1)
    if [ -z "$reply" ]; then
        # Default: a pure sink. The message is received and counted, no reply goes out.
        if [ "$got" = 1 ] && grep -q "foreign peer" "$T/$name-s.log" && [ "$replies" = 0 ] && [ $rcrc != 0 ]; then
            ok "$name: rdma_client -> rtdaq server without reply (default): 1 message received, no reply sent (rdma_client exit $rcrc: it waits for one)"
        else
            ko "$name" "server exit $src received ${got:-?} replies ${replies:-?}, rdma_client exit $rcrc" "$T/$name-s.log" "$T/$name.log"
        fi
    elif [ $rcrc = 0 ] && [ "$got" = 1 ] && [ "$replies" = 1 ] && [ "$failures" = 0 ] && [ $src = 0 ] \
        && [ "$(allocs "$T/$name-s.json")" = 0 ] \
        && [ "$(jq -r '[.ports[]? | select(.driver == "rdma_cm") | .xstats.replies_sent // 0] | add' "$T/$name-s.json")" = 1 ]; then
        ok "$name: rdma_client -> rtdaq server with ${reply//\\n/, }: rdma_client exit 0, 1 message received, 1 reply sent (also in the report's ports), 0 failures"
    else
        ko "$name" "server exit $src received ${got:-?} replies ${replies:-?} failures ${failures:-?}, rdma_client exit $rcrc" "$T/$name-s.log" "$T/$name.log"
    fi
}

echo "== rtdaq $("$rtdaq" version | head -n 1); devices: $(cd /sys/class/infiniband && echo *)"
if [ $rt = 1 ]; then
    # PREEMPT_RT subset: the doctor, the two modes, a real peer with a reply.
    echo "== PREEMPT_RT guest: $(uname -r), /sys/kernel/realtime = $(cat /sys/kernel/realtime 2>/dev/null || echo absent), $(nproc) CPUs"
    "$rtdaq" doctor --json >"$T/doctor.json" 2>/dev/null
    st=$(jq -r '.[] | select(.check == "kernel.preempt_rt") | .status' "$T/doctor.json" 2>/dev/null)
    if [ "$st" = pass ]; then
        ok "rtdaq doctor (ibverbs build): kernel.preempt_rt pass"
    else
        ko doctor_rt "kernel.preempt_rt is '${st:-missing}'" "$T/doctor.json"
    fi
    pair send send 7471
    pair write_imm write_imm 7472
    rdma_test rdma_client_echo 7479 'reply = "echo"'
    echo "ibverbs guest tests (PREEMPT_RT): $pass passed, $fail failed"
    [ $fail = 0 ]
    exit
fi
pair send send 7471
pair write_imm write_imm 7472
pair read read 7483
# The shipped unit's privileges (issue #18): server and client as user nobody with exactly
# rtdaq.service's capabilities (its ibverbs drop-in adds device access only). This guest has
# no udev, so its /dev/infiniband nodes are root's 0600; on a real host rdma-core's udev rules
# make uverbs and rdma_cm 0666, which the test sets first.
unit_caps=$(sed -n 's/^AmbientCapabilities=//p' rt-tuning/systemd/rtdaq.service | tr 'A-Z ' 'a-z\n' | sed 's/^cap_/+/' | paste -sd,)
chmod 0666 /dev/infiniband/*
chmod 0777 "$T"
launch=(setpriv --reuid=nobody --regid=nogroup --clear-groups --inh-caps="-all,$unit_caps"
    --ambient-caps="-all,$unit_caps" --bounding-set="-all,$unit_caps" --no-new-privs)
before=$pass
pair send_as_unit send 7486
launch=()
if [ $pass -gt "$before" ]; then
    if grep -qiE 'CAP_|without SCHED_FIFO|not locked|permission denied' "$T/send_as_unit-s.log" "$T/send_as_unit-c.log"; then
        ko send_as_unit_privileges "a privilege warning as user nobody with $unit_caps" "$T/send_as_unit-s.log" "$T/send_as_unit-c.log"
    else
        ok "send_as_unit: both ends as user nobody with exactly the unit's capabilities ($unit_caps): no privilege warning"
    fi
fi
# A client that disconnects right after its last send: as fast as it can (so the server's
# completion queue still holds a backlog when the peer goes), a count it reaches well within
# the run, no drain time.
pair send_nodrain send 7477 's/^count = .*/count = 3000/' 's/^rate_gbps = .*/rate_gbps = 1/' 's/^drain_ms = .*/drain_ms = 0/'
pair write_imm_nodrain write_imm 7478 's/^count = .*/count = 3000/' 's/^rate_gbps = .*/rate_gbps = 1/' 's/^drain_ms = .*/drain_ms = 0/'
pair read_nodrain read 7484 's/^count = .*/count = 3000/' 's/^rate_gbps = .*/rate_gbps = 1/' 's/^drain_ms = .*/drain_ms = 0/'
# The same while the server is stopped: 3000 messages over about 2 s (within the credits:
# 1000 per connection) sent, acknowledged by the server's RDMA device, and the peer gone,
# before the server runs again.
pause_server=1
# One message per poll (a slow consumer) and room for 1000 messages per connection.
server_sed=('s/^batch_size = .*/batch_size = 1/' 's/^credits = .*/credits = 1024/' 's/^buf_count = .*/buf_count = 8192/')
pair send_paused send 7481 's/^count = .*/count = 3000/' 's/^drain_ms = .*/drain_ms = 0/'
pair write_imm_paused write_imm 7482 's/^count = .*/count = 3000/' 's/^drain_ms = .*/drain_ms = 0/'
# Pull mode: the client holds all 3000 messages (buf_count 4096) until the server, running
# again after 3 s, has pulled them; the server polls in bursts of 32 so that it pulls the
# backlog within the client's 5 s wait on the emulated CPU.
pause_server=2
server_sed=('s/^credits = .*/credits = 1024/' 's/^buf_count = .*/buf_count = 8192/')
pair read_paused read 7485 's/^count = .*/count = 3000/' 's/^drain_ms = .*/drain_ms = 0/' 's/^buf_count = .*/buf_count = 4096/'
pause_server=0
server_sed=()

# A real peer into rtdaq: rdma_client sends one 16-byte message (no rtdaq header: count only)
# and waits for one reply.
rdma_test rdma_client 7473 ""
rdma_test rdma_client_echo 7479 'reply = "echo"'
rdma_test rdma_client_ack 7480 'reply = "ack"\nreply_bytes = 16'

# rtdaq client -> ucmatose server: ucmatose answers each message (a credit for rtdaq).
# ucmatose's stdout is line-buffered (stdbuf) so that a hang shows its last phase
# ("initiating data transfers", "receiving data transfers", "disconnecting"). It hung once in
# a CI run (stop 25: 10 messages sent, ucmatose past its sends, killed after 20 s) and not in
# 25 runs in a row in the same guest since; an attempt that fails is printed whole with the
# rxe counters, and the test is tried once more: a second failure fails it.
uc_attempt() { # uc_attempt N: 0 when ucmatose exited 0 and rtdaq sent every message
    timeout 20 stdbuf -oL -eL ucmatose -p 7474 -C 10 -S 64 >"$T/uc.log" 2>&1 &
    local up=$! urc crc sent
    for _ in $(seq 40); do
        rdma res show cm_id 2>/dev/null | grep -q "LISTEN.*:7474" && break
        sleep 0.05
    done
    "$rtdaq" run --config "$T/uc-c.toml" --duration 4 --report-json "$T/uc-c.json" >"$T/uc-c.log" 2>&1
    crc=$?
    wait $up
    urc=$?
    sent=$(tr -d '\n ' <"$T/uc-c.json" 2>/dev/null | sed -n 's/.*"tx":{"totals":{[^}]*"packets":\([0-9]*\).*/\1/p')
    uc_why="ucmatose exit $urc, rtdaq exit $crc, sent ${sent:-?} (attempt $1)"
    [ $urc = 0 ] && [ "${sent:-0}" -ge 10 ]
}
variant configs/vm-roce-client.toml "$T/uc-c.toml" "s/:7471/:7474/" 's/^connections = 3/connections = 1/' \
    's/^count = .*/count = 10/' 's/^payload_size = .*/payload_size = 64/'
if uc_attempt 1; then
    ok "rtdaq client -> ucmatose server (10 messages, ucmatose exit 0)"
else
    echo "RETRY ucmatose: $uc_why; its output, rtdaq's and the rxe counters follow"
    for f in "$T/uc.log" "$T/uc-c.log"; do echo "--- $f"; tail -n 30 "$f"; done
    for c in /sys/class/infiniband/rxe*/ports/1/hw_counters/*; do
        [ -f "$c" ] && printf '%s=%s ' "${c#/sys/class/infiniband/}" "$(cat "$c")"
    done
    echo
    if uc_attempt 2; then
        ok "rtdaq client -> ucmatose server (10 messages, ucmatose exit 0; attempt 2, attempt 1 printed above)"
    else
        ko ucmatose "$uc_why" "$T/uc.log" "$T/uc-c.log"
    fi
fi

# Peer killed mid-stream.
variant configs/vm-roce-client.toml "$T/pk-c.toml" "s/:7471/:7475/" 's/^count = .*/count = 100000000/'
variant configs/vm-roce-server.toml "$T/pk-s.toml" "s/:7471/:7475/"
start=$(date +%s)
"$rtdaq" run --config "$T/pk-s.toml" --duration 8 --report-json "$T/pk-s.json" >"$T/pk-s.log" 2>&1 &
sp=$!
sleep 1
"$rtdaq" run --config "$T/pk-c.toml" --duration 30 >"$T/pk-c.log" 2>&1 &
cp=$!
# Kill it once it is streaming (connected, queues running), not at a fixed time: on a loaded
# host the emulated guest may need more than 2 s to connect.
for _ in $(seq 100); do grep -q "queues running" "$T/pk-c.log" && break; sleep 0.05; done
sleep 1
kill -KILL $cp
wait $cp 2>/dev/null
wait $sp
src=$?
took=$(($(date +%s) - start))
lost=$(sed -n 's/.*, \([0-9]*\) peer(s) lost.*/\1/p' "$T/pk-s.log" | head -n 1)
if [ "${lost:-0}" -ge 1 ] && [ $took -le 15 ] && [ $src -le 1 ] && [ "$(allocs "$T/pk-s.json")" = 0 ]; then
    ok "peer killed: detected and counted ($lost lost), server ended after ${took} s (exit $src), io_thread_allocations 0"
else
    ko peer_killed "lost ${lost:-?}, took ${took} s, exit $src, allocations $(allocs "$T/pk-s.json")" "$T/pk-s.log"
fi

# Client reconnects after the server went away and came back.
variant configs/vm-roce-client.toml "$T/rk-c.toml" "s/:7471/:7476/" 's/^count = .*/count = 100000000/' 's/^rate_gbps = .*/rate_gbps = 0.01/'
variant configs/vm-roce-server.toml "$T/rk-s.toml" "s/:7471/:7476/" '/^\[run\]/a validate = "count"'
"$rtdaq" run --config "$T/rk-s.toml" --duration 3 >"$T/rk-s1.log" 2>&1 &
s1=$!
sleep 1
"$rtdaq" run --config "$T/rk-c.toml" --duration 9 --report-json "$T/rk-c.json" >"$T/rk-c.log" 2>&1 &
cp=$!
wait $s1
sleep 1
"$rtdaq" run --config "$T/rk-s.toml" --duration 4 >"$T/rk-s2.log" 2>&1
wait $cp
rec=$(sed -n 's/.*, \([0-9]*\) reconnect(s).*/\1/p' "$T/rk-c.log" | head -n 1)
# The client's TX thread adopts the new connections without allocating.
if [ "${rec:-0}" -ge 1 ] && grep -q "established" "$T/rk-s2.log" && [ "$(allocs "$T/rk-c.json")" = 0 ]; then
    ok "client reconnected ($rec reconnect(s)), io_thread_allocations 0"
else
    ko reconnect "reconnects ${rec:-?}, allocations $(allocs "$T/rk-c.json")" "$T/rk-c.log" "$T/rk-s2.log"
fi

# Wrong addresses.
variant configs/vm-roce-client.toml "$T/wa-c.toml" "s/:7471/:7999/"
"$rtdaq" run --config "$T/wa-c.toml" --duration 2 >"$T/wa-c.log" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "interfaces\[0\].address.*no connection after" "$T/wa-c.log"; then
    ok "wrong address (nobody listening): exit 2, names interfaces[0].address"
else
    ko wrong_addr "exit $rc" "$T/wa-c.log"
fi
variant configs/vm-roce-server.toml "$T/wa-s.toml" "s/169.254.77.1:7471/169.254.99.1:7471/"
"$rtdaq" run --config "$T/wa-s.toml" --duration 2 >"$T/wa-s.log" 2>&1
rc=$?
if [ $rc = 2 ] && grep -q "no RDMA device" "$T/wa-s.log"; then
    ok "server address on no RDMA device: exit 2, \"no RDMA device\""
else
    ko wrong_addr_server "exit $rc" "$T/wa-s.log"
fi

for b in "$@"; do
    if "$b" >"$T/$b.log" 2>&1; then ok "$b"; else ko "$b" "exit $?" "$T/$b.log"; fi
done
echo "ibverbs guest tests: $pass passed, $fail failed"
[ $fail = 0 ]
