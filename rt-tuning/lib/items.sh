# shellcheck shell=bash
# rt-tuning/lib/items.sh: one function per tuning item. Each reads the current state below
# $ROOT, reports ok / change / skip / reboot, and (apply) changes it through change() from
# common.sh, which records the revert command. Sourced, not run.
#
# Inputs (set by tune.sh): MODE (check|apply), ROOT, ISO (CPUs to isolate: the board's plus
# the config's queue cores), HK (housekeeping CPUs), CFG_* (lib/config.sh), BOARD_* (lib/boards.sh).

# A finding that apply cannot fix by itself (missing device, kernel refusal): counted as failed.
problem() {
    printf '  FAILED  %-22s %s\n' "$1" "$2"
    N_FAILED=$((N_FAILED + 1))
}

# ---- CPU frequency governor ----------------------------------------------------------------
# Why: a queue thread that busy-polls at a low clock misses its deadline when the clock ramps.
item_governor() {
    local f cur n=0 c
    declare -A by_old=()
    for f in "$(rp /sys/devices/system/cpu)"/cpu[0-9]*/cpufreq/scaling_governor; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        cur=$(<"$f")
        [ "$cur" = performance ] && continue
        local avail=${f%/scaling_governor}/scaling_available_governors
        if [ -f "$avail" ] && ! grep -qw performance "$avail"; then
            problem governor "$f: no 'performance' governor offered ($(<"$avail"))"
            continue
        fi
        by_old[$cur]+=" $f"
    done
    if [ $n = 0 ]; then
        note governor "no cpufreq scaling_governor files (no frequency scaling): nothing to set"
        return
    fi
    if [ ${#by_old[@]} = 0 ]; then ok governor "all $n CPUs: performance"; return; fi
    local old files nums cpus base
    base=$(q "$(rp /sys/devices/system/cpu)")
    for old in "${!by_old[@]}"; do
        read -r -a files <<< "${by_old[$old]}"
        nums=$(for c in "${files[@]}"; do c=${c%/cpufreq/*}; echo "${c##*/cpu}"; done | sort -n | tr '\n' ' ')
        nums=${nums% }
        cpus=$(tr ' ' '\n' <<< "$nums" | cpus_compress)
        change governor "cpu $cpus: $old -> performance" \
            "for c in $nums; do echo performance > $base/cpu\$c/cpufreq/scaling_governor; done" \
            "for c in $nums; do echo $(q "$old") > $base/cpu\$c/cpufreq/scaling_governor; done"
    done
}

# ---- IRQ affinity ----------------------------------------------------------------------------
# Why: an interrupt on a queue core preempts the queue thread; every IRQ goes to housekeeping.
item_irq() {
    if [ -z "$HK" ] || [ -z "$ISO" ]; then
        note irq-affinity "no housekeeping/isolated split (housekeeping '${HK}', isolated '${ISO}'): IRQs left where they are"
        return
    fi
    local dir f cur irq n=0
    local -a move=() olds=()
    dir=$(rp /proc/irq)
    if [ ! -d "$dir" ]; then note irq-affinity "no $dir"; return; fi
    for f in "$dir"/[0-9]*/smp_affinity_list; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        cur=$(<"$f")
        [ -n "$(cpus_and "$cur" "$ISO")" ] || continue
        irq=${f%/smp_affinity_list}; irq=${irq##*/}
        move+=("$irq") olds+=("$cur")
    done
    # the default for IRQs registered later
    local dflt=$dir/default_smp_affinity
    if [ -f "$dflt" ]; then
        cur=$(<"$dflt")
        if [ -n "$(cpus_and "$(mask_to_cpus "$cur")" "$ISO")" ]; then
            change irq-affinity "default_smp_affinity: $cur -> $(cpus_to_mask "$HK") (CPUs $HK)" \
                "echo $(cpus_to_mask "$HK") > $(q "$dflt")" "echo $(q "$cur") > $(q "$dflt")"
        fi
    fi
    if [ ${#move[@]} = 0 ]; then
        ok irq-affinity "all $n IRQs off the isolated CPUs $ISO (on $HK)"
        return
    fi
    # One change per group of IRQs with the same old affinity. The kernel refuses some
    # (per-CPU and managed IRQs: EIO); apply reports those and goes on.
    declare -A group=()
    local i
    for i in "${!move[@]}"; do group[${olds[i]}]+=" ${move[i]}"; done
    local old irqs
    for old in "${!group[@]}"; do
        read -r -a irqs <<< "$(tr ' ' '\n' <<< "${group[$old]}" | sort -n | tr '\n' ' ')"
        if [ "$MODE" = check ]; then
            change irq-affinity "IRQs ${irqs[*]}: CPUs $old -> $HK" \
                "for i in ${irqs[*]}; do echo $HK > $(q "$dir")/\$i/smp_affinity_list; done" ""
            continue
        fi
        local moved=() refused=()
        for irq in "${irqs[@]}"; do
            if echo "$HK" 2>/dev/null > "$dir/$irq/smp_affinity_list"; then moved+=("$irq"); else refused+=("$irq"); fi
        done
        if [ ${#moved[@]} -gt 0 ]; then
            printf '  changed %-22s %s\n' irq-affinity "IRQs ${moved[*]}: CPUs $old -> $HK"
            local revert
            revert="for i in ${moved[*]}; do echo $(q "$old") > $(q "$dir")/\$i/smp_affinity_list; done 2>/dev/null"
            printf '            ran:    for i in %s; do echo %s > %s/%s/smp_affinity_list; done\n' "${moved[*]}" "$HK" "$(q "$dir")" "\$i"
            printf '            revert: %s\n' "$revert"
            N_CHANGE=$((N_CHANGE + 1))
            REVERT_LINES+=("# irq-affinity: IRQs ${moved[*]}: CPUs $old -> $HK" "$revert")
        fi
        if [ ${#refused[@]} -gt 0 ]; then
            note irq-affinity "IRQs ${refused[*]}: the kernel refuses to move them (per-CPU or managed IRQs; isolcpus=managed_irq in the GRUB snippet keeps managed ones off the isolated CPUs)"
        fi
    done
}

# ---- hugepages -------------------------------------------------------------------------------
# Why: `huge` memory regions are mapped with MAP_HUGETLB from the global pool at start.
item_hugepages() {
    local kb need label
    for kb in 2048 1048576; do
        if [ $kb = 2048 ]; then need=$CFG_HP_2M label=2M; else need=$CFG_HP_1G label=1G; fi
        if [ "${need:-0}" -eq 0 ]; then ok "hugepages-$label" "the config needs none"; continue; fi
        local d total free resv surplus over avail want
        d=$(rp /sys/kernel/mm/hugepages/hugepages-${kb}kB)
        if [ ! -f "$d/nr_hugepages" ]; then
            problem "hugepages-$label" "the config needs $need pages of $label but $d does not exist (kernel without $label pages: add hugepagesz=$label to the kernel command line)"
            continue
        fi
        total=$(<"$d/nr_hugepages") free=$(cat "$d/free_hugepages" 2>/dev/null || echo "$total")
        resv=$(cat "$d/resv_hugepages" 2>/dev/null || echo 0)
        surplus=$(cat "$d/surplus_hugepages" 2>/dev/null || echo 0)
        over=$(cat "$d/nr_overcommit_hugepages" 2>/dev/null || echo 0)
        avail=$(( free - resv + (over > surplus ? over - surplus : 0) ))
        if [ "$avail" -ge "$need" ]; then
            ok "hugepages-$label" "$avail available, the config needs $need"
            continue
        fi
        want=$((total + need - avail))
        local cmd revert
        cmd="echo $want > $(q "$d/nr_hugepages")" revert="echo $total > $(q "$d/nr_hugepages")"
        if [ -n "$ROOT" ]; then
            # a fake tree has no kernel behind it: grow free_hugepages as the kernel would
            cmd+=" && echo $((free + want - total)) > $(q "$d/free_hugepages")"
            revert+=" && echo $free > $(q "$d/free_hugepages")"
        fi
        if change "hugepages-$label" "nr_hugepages $total -> $want ($avail available, the config needs $need)" "$cmd" "$revert" &&
            [ "$MODE" = apply ]; then
            local got; got=$(<"$d/nr_hugepages")
            [ "$got" -ge "$want" ] || problem "hugepages-$label" "the kernel reserved only $got of $want (memory fragmented): reserve them at boot, add hugepagesz=$label hugepages=$want to the GRUB snippet"
        fi
    done
}

# ---- sysctl-like files ------------------------------------------------------------------------
# item_procval ITEM FILE WANT WHY
item_procval() {
    local item=$1 file want=$3 cur
    file=$(rp "$2")
    if [ ! -f "$file" ]; then note "$item" "$file does not exist on this kernel: nothing to set"; return; fi
    cur=$(<"$file")
    if [ "$cur" = "$want" ]; then ok "$item" "$want"; return; fi
    change "$item" "$cur -> $want" "echo $want > $(q "$file")" "echo $(q "$cur") > $(q "$file")"
}

# ---- transparent hugepages -------------------------------------------------------------------
# Why: khugepaged compaction stalls and page-fault latency spikes on the queue cores.
item_thp() {
    local file cur sel
    file=$(rp /sys/kernel/mm/transparent_hugepage/enabled)
    if [ ! -f "$file" ]; then note transparent-hugepages "no $file (kernel without THP)"; return; fi
    cur=$(<"$file")
    sel=$(sed -n 's/.*\[\(.*\)\].*/\1/p' <<< "$cur"); sel=${sel:-$cur}
    if [ "$sel" = never ]; then ok transparent-hugepages never; return; fi
    if [ -n "$ROOT" ]; then
        # a fake tree: write what the kernel would show afterwards
        local after=${cur//[\[\]]/}
        after=${after/never/[never]}
        change transparent-hugepages "$sel -> never" "echo $(q "$after") > $(q "$file")" "echo $(q "$cur") > $(q "$file")"
    else
        change transparent-hugepages "$sel -> never" "echo never > $(q "$file")" "echo $(q "$sel") > $(q "$file")"
    fi
}

# ---- interfaces: MTU and PCIe MRRS --------------------------------------------------------------
is_pci() { [[ $1 =~ ^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$ ]]; }
full_bdf() { if [[ $1 == ?????:* ]] || [[ $1 =~ ^[0-9a-fA-F]{4}: ]]; then echo "${1,,}"; else echo "0000:${1,,}"; fi; }

# The netdev of a config address ("" for socket / RDMA CM URIs or when not found).
iface_netdev() {
    local a=$1 d
    case $a in udp://* | tcp://* | rdma://*) return 0 ;; esac
    if is_pci "$a"; then
        for d in "$(rp "/sys/bus/pci/devices/$(full_bdf "$a")/net")"/*; do
            [ -e "$d" ] && { echo "${d##*/}"; return 0; }
        done
        return 0
    fi
    echo "$a"
}

# Why: frames larger than the MTU are dropped by the NIC before any queue sees them.
item_mtu() {
    local e addr mtu dev f cur
    if [ ${#CFG_IFACES[@]} = 0 ]; then note mtu "the config has no interfaces"; return; fi
    for e in "${CFG_IFACES[@]}"; do
        read -r addr mtu <<< "$e"
        case $addr in
        udp://* | tcp://*)
            note mtu "$addr: socket interface, the config's mtu ($mtu) only sizes datagrams; no netdev changed"
            continue ;;
        rdma://*)
            note mtu "$addr: RDMA CM endpoint, the kernel picks the device by route; set the MTU of that port yourself (ip link set dev <netdev> mtu $mtu): no netdev changed"
            continue ;;
        esac
        dev=$(iface_netdev "$addr")
        f=$(rp "/sys/class/net/$dev/mtu")
        if [ -z "$dev" ] || [ ! -f "$f" ]; then
            problem mtu "$addr: no network device found (${dev:-no netdev under the PCI function}; driver bound, right namespace?)"
            continue
        fi
        cur=$(<"$f")
        if [ "$cur" -ge "$mtu" ]; then ok mtu "$dev: $cur (the config needs $mtu)"; continue; fi
        if [ -n "$ROOT" ]; then
            change mtu "$dev: $cur -> $mtu" "echo $mtu > $(q "$f")" "echo $cur > $(q "$f")"
        else
            change mtu "$dev: $cur -> $mtu" "ip link set dev $(q "$dev") mtu $mtu" "ip link set dev $(q "$dev") mtu $cur"
        fi
    done
}

# PCI functions of the configured raw interfaces.
nic_bdfs() {
    local e addr dev link
    for e in "${CFG_IFACES[@]}"; do
        read -r addr _ <<< "$e"
        case $addr in udp://* | tcp://* | rdma://*) continue ;; esac
        if is_pci "$addr"; then full_bdf "$addr"; continue; fi
        # the PCI function: the device link's target, else PCI_SLOT_NAME in device/uevent
        dev=""
        if link=$(readlink "$(rp "/sys/class/net/$addr/device")" 2>/dev/null); then dev=${link##*/}; fi
        if ! is_pci "$dev"; then
            dev=$(sed -n 's/^PCI_SLOT_NAME=//p' "$(rp "/sys/class/net/$addr/device/uevent")" 2>/dev/null || true)
        fi
        if is_pci "$dev"; then echo "$dev"; fi
    done | sort -u
}

# Byte I/O on a PCI config-space file (a fake tree's sys/bus/pci/devices/<bdf>/config).
cfg_byte() { od -An -tu1 -j "$2" -N1 "$1" | tr -d ' '; }
cfg_word() { local lo hi; lo=$(cfg_byte "$1" "$2"); hi=$(cfg_byte "$1" $(($2 + 1))); echo $((lo | hi << 8)); }
# Offset of the PCI Express capability (id 0x10) in a config-space file, or nothing.
cfg_pcie_cap() {
    local f=$1 ptr id hops=0
    ptr=$(cfg_byte "$f" 52)   # 0x34: capabilities pointer
    while [ -n "$ptr" ] && [ "$ptr" -ge 64 ] && [ $hops -lt 48 ]; do
        id=$(cfg_byte "$f" "$ptr")
        [ "$id" = 16 ] && { echo "$ptr"; return 0; }
        ptr=$(cfg_byte "$f" $((ptr + 1)))
        hops=$((hops + 1))
    done
}
# The shell command that writes 16-bit VALUE at OFFSET of FILE (little endian).
cfg_write_cmd() {
    printf "printf '\\\\x%02x\\\\x%02x' | dd of=%s bs=1 seek=%d conv=notrunc status=none" \
        $(($3 & 255)) $(($3 >> 8 & 255)) "$(q "$1")" "$2"
}
mrrs_bytes() { echo $((128 << $1)); }

# Why: a NIC writing into memory reads descriptors and TX data with PCIe read requests; the
# largest read request (MRRS, Device Control bits 14:12) caps DMA read throughput. 4096 = 5.
item_mrrs() {
    local bdfs bdf
    bdfs=$(nic_bdfs)
    if [ -z "$bdfs" ]; then note pcie-mrrs "no PCI NIC in the config (socket or RDMA CM interfaces only)"; return; fi
    for bdf in $bdfs; do
        if [ -n "$ROOT" ]; then
            # fake tree: edit the config-space file directly (setpci cannot be pointed at it)
            local f cap off ctl new
            f=$(rp "/sys/bus/pci/devices/$bdf/config")
            if [ ! -f "$f" ]; then note pcie-mrrs "$bdf: no $f in the fake tree"; continue; fi
            cap=$(cfg_pcie_cap "$f")
            if [ -z "$cap" ]; then problem pcie-mrrs "$bdf: no PCI Express capability in $f"; continue; fi
            off=$((cap + 8)) ctl=$(cfg_word "$f" $((cap + 8)))
            if [ $((ctl >> 12 & 7)) = 5 ]; then ok pcie-mrrs "$bdf: 4096"; continue; fi
            new=$(( (ctl & ~0x7000) | 0x5000 ))
            change pcie-mrrs "$bdf: MRRS $(mrrs_bytes $((ctl >> 12 & 7))) -> 4096 (DevCtl $(printf '%04x -> %04x' "$ctl" "$new"), fake config space)" \
                "$(cfg_write_cmd "$f" "$off" "$new")" "$(cfg_write_cmd "$f" "$off" "$ctl")"
        else
            if ! command -v setpci >/dev/null; then note pcie-mrrs "$bdf: setpci not found (apt-get install pciutils)"; continue; fi
            local hex ctl
            if [ ! -e "/sys/bus/pci/devices/$bdf" ]; then problem pcie-mrrs "$bdf: no such PCI device on this host"; continue; fi
            hex=$(setpci -s "$bdf" CAP_EXP+8.w 2>&1) || true
            if ! [[ $hex =~ ^[0-9a-fA-F]{4}$ ]]; then problem pcie-mrrs "$bdf: setpci cannot read DevCtl (${hex:-no output})"; continue; fi
            ctl=$((16#$hex))
            if [ $((ctl >> 12 & 7)) = 5 ]; then ok pcie-mrrs "$bdf: 4096"; continue; fi
            if change pcie-mrrs "$bdf: MRRS $(mrrs_bytes $((ctl >> 12 & 7))) -> 4096 (DevCtl $hex)" \
                "setpci -s $bdf CAP_EXP+8.w=5000:7000" \
                "setpci -s $bdf CAP_EXP+8.w=$(printf '%04x' $((ctl & 0x7000))):7000" && [ "$MODE" = apply ]; then
                hex=$(setpci -s "$bdf" CAP_EXP+8.w)
                [ $((16#$hex >> 12 & 7)) = 5 ] || problem pcie-mrrs "$bdf: read back DevCtl $hex, MRRS not 4096 (kernel lockdown under Secure Boot blocks config-space writes)"
            fi
        fi
    done
}

# ---- deep idle states -------------------------------------------------------------------------
# Why: waking a queue core from a deep C-state costs tens to hundreds of microseconds. At run
# time tune.sh disables every cpuidle state but state0 on the queue/isolated cores; the GRUB
# snippet's cpuidle.off=1 (arm64) or max_cstate (x86) makes it permanent.
item_cstates() {
    local cpus c d st n=0 cur
    cpus=$(cpus_or "$ISO" "$CFG_CORES")
    local -a on=()
    for c in $(cpus_expand "$cpus"); do
        d=$(rp "/sys/devices/system/cpu/cpu$c/cpuidle")
        [ -d "$d" ] || continue
        for st in "$d"/state[0-9]*; do
            [ -f "$st/disable" ] || continue
            n=$((n + 1))
            [ "${st##*/state}" = 0 ] && continue   # state0: WFI / POLL, the shallow one
            cur=$(<"$st/disable")
            [ "$cur" = 1 ] || on+=("$st")
        done
    done
    if [ $n = 0 ]; then note cpu-idle-states "no cpuidle states on CPUs ${cpus:-none} (cpuidle off or not built)"; return; fi
    if [ ${#on[@]} = 0 ]; then ok cpu-idle-states "deep states disabled on CPUs $cpus"; return; fi
    local base rel="" x states
    base=$(rp /sys/devices/system/cpu)
    for x in "${on[@]}"; do rel+=" ${x#"$base/"}"; done
    states=$(for x in "${on[@]}"; do echo "${x##*/state}"; done | cpus_compress)
    change cpu-idle-states "disable states $states on CPUs $cpus (${#on[@]} cpuidle states)" \
        "for s in$rel; do echo 1 > $(q "$base")/\$s/disable; done" \
        "for s in$rel; do echo 0 > $(q "$base")/\$s/disable; done"
}

# ---- GPU clocks --------------------------------------------------------------------------------
# Why: GPU kernels on packet batches must not wait for the GPU to ramp its clocks.
# nvidia-smi is $RTDAQ_TUNE_NVIDIA_SMI when set (tests use a stand-in), else `nvidia-smi`.
item_gpu_clocks() {
    local smi=${RTDAQ_TUNE_NVIDIA_SMI:-}
    if [ -z "$smi" ]; then
        if [ -n "$ROOT" ]; then note gpu-clocks "skipped under --root (nvidia-smi talks to the real driver)"; return; fi
        smi=$(command -v nvidia-smi || true)
        [ -n "$smi" ] || { note gpu-clocks "no nvidia-smi: no NVIDIA GPU driver here, nothing to set"; return; }
    fi
    local out line idx sm sm_max mem mem_max
    if ! out=$("$smi" --query-gpu=index,clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem --format=csv,noheader,nounits 2>&1); then
        note gpu-clocks "nvidia-smi failed: $out"
        return
    fi
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        IFS=', ' read -r idx sm sm_max mem mem_max <<< "$line"
        if ! [[ $sm_max =~ ^[0-9]+$ ]] || ! [[ $mem_max =~ ^[0-9]+$ ]]; then
            note gpu-clocks "GPU $idx: clocks not reported ($line; integrated GPU: its clocks follow the board's power mode)"
            continue
        fi
        if [ "$sm" -ge "$sm_max" ]; then ok gpu-clocks "GPU $idx: SM $sm MHz (max)"
        else change gpu-clocks "GPU $idx: SM clock $sm -> locked at $sm_max MHz" \
            "$(q "$smi") -i $idx -lgc $sm_max,$sm_max" "$(q "$smi") -i $idx -rgc"; fi
        if [ "$mem" -ge "$mem_max" ]; then ok gpu-clocks "GPU $idx: memory $mem MHz (max)"
        else change gpu-clocks "GPU $idx: memory clock $mem -> locked at $mem_max MHz" \
            "$(q "$smi") -i $idx -lmc $mem_max,$mem_max" "$(q "$smi") -i $idx -rmc"; fi
    done <<< "$out"
}

# ---- kernel command line (GRUB snippet) ---------------------------------------------------------
# Why: isolation (isolcpus, nohz_full, rcu_nocbs), boot-time IRQ placement and idle states
# can only be set at boot. tune.sh writes them for the operator; it never reboots.
cmdline_value() {   # the last value of PARAM in the command line text $2
    local p=$1 tok v=""
    for tok in $2; do [[ $tok == "$p="* ]] && v=${tok#"$p="}; done
    printf '%s' "$v"
}
item_cmdline() {
    local cmdline_file cmdline want=() missing=()
    cmdline_file=$(rp /proc/cmdline)
    cmdline=$(cat "$cmdline_file" 2>/dev/null || true)
    local arch=${BOARD_ARCH:-$(uname -m)}
    if [ -n "$ISO" ] && [ -n "$HK" ]; then
        want+=("isolcpus=managed_irq,domain,$ISO" "nohz_full=$ISO" "rcu_nocbs=$ISO" "irqaffinity=$HK")
        local v p
        for p in isolcpus nohz_full rcu_nocbs; do
            v=$(cmdline_value "$p" "$cmdline")
            while [[ $v =~ ^[a-z_]+,(.*)$ ]]; do v=${BASH_REMATCH[1]}; done   # drop the flags (managed_irq,domain,)
            if [ -z "$v" ] || ! cpus_subset "$ISO" "$v"; then missing+=("$p"); fi
        done
        v=$(cmdline_value irqaffinity "$cmdline")
        if [ -z "$v" ] || ! cpus_subset "$v" "$HK"; then missing+=(irqaffinity); fi
    else
        note kernel-cmdline "no housekeeping/isolated split: no isolcpus, nohz_full, rcu_nocbs, irqaffinity"
    fi
    # deep idle states: their exit latency lands on the next packet
    local idle=()
    case $arch in
    aarch64 | arm64) idle=(cpuidle.off=1) ;;
    x86_64) idle=(processor.max_cstate=1 intel_idle.max_cstate=0) ;;
    esac
    # The idle parameter goes into the snippet whenever one is written, but alone it asks for
    # no reboot: item_cstates disables the deep states at run time (and rtdaq-tune.service
    # again at every boot), which is what doctor's cpu.cstates accepts as well.
    want+=("${idle[@]}")
    if [ ${#missing[@]} = 0 ]; then
        ok kernel-cmdline "has isolcpus, nohz_full, rcu_nocbs, irqaffinity for the CPU split"
        return
    fi

    local snippet snippet_path=/etc/default/grub.d/rtdaq.cfg
    snippet=$(rp "$snippet_path")
    local lines=(
        "# rtdaq: kernel command line for platform $PLATFORM (config ${CFG_NAME:-?}), written by rt-tuning/tune.sh apply."
        "# Takes effect only after the operator runs update-grub (or grub2-mkconfig) and reboots."
        "# Revert: delete this file, run update-grub, reboot."
        "# Boards that boot through extlinux (L4T) instead of GRUB: append RTDAQ_CMDLINE to the APPEND line of /boot/extlinux/extlinux.conf."
        "RTDAQ_CMDLINE=\"${want[*]}\""
        "GRUB_CMDLINE_LINUX_DEFAULT=\"\${GRUB_CMDLINE_LINUX_DEFAULT:+\$GRUB_CMDLINE_LINUX_DEFAULT }\$RTDAQ_CMDLINE\""
    )
    local content cur_content=""
    content=$(printf '%s\n' "${lines[@]}")
    [ -f "$snippet" ] && cur_content=$(<"$snippet")
    if [ "$cur_content" != "$content" ]; then
        local l cmd revert
        cmd="mkdir -p $(q "$(dirname "$snippet")") && printf '%s\\n'"
        for l in "${lines[@]}"; do cmd+=" $(q "$l")"; done
        cmd+=" > $(q "$snippet")"
        if [ -f "$snippet" ]; then
            revert="printf '%s\\n'"
            while IFS= read -r l; do revert+=" $(q "$l")"; done < "$snippet"
            revert+=" > $(q "$snippet")"
        else
            revert="rm -f $(q "$snippet")"
        fi
        local shown
        shown=$(printf "cat > %s <<'EOF'\n" "$(q "$snippet")"; printf '%s\n' "${lines[@]}"; printf 'EOF')
        shown=${shown//$'\n'/$'\n'                 }
        change kernel-cmdline "write $snippet_path: ${want[*]}" "$cmd" "$revert; echo 'then run update-grub and reboot'" "$shown"
    fi
    local p
    for p in "${missing[@]}"; do
        pending "kernel-cmdline" "$p: not on the running kernel's command line; in $snippet_path, active after update-grub + reboot (by the operator)"
        PENDING[${#PENDING[@]} - 1]=$p
    done
}
