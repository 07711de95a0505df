# shellcheck shell=bash
# rt-tuning/lib/common.sh: helpers shared by tune.sh: paths under --root, CPU lists and masks,
# reporting and the revert log. Sourced, not run.

# Path of a host file below the --root tree ($ROOT is "" for the real host).
rp() { printf '%s%s' "$ROOT" "$1"; }

# Quotes one word for the revert script and the printed commands.
q() { printf '%q' "$1"; }

# ---- CPU lists ("0-3,8") --------------------------------------------------------------------
# Expands a CPU list to one number per line, sorted, unique. Empty or "(null)" gives nothing.
cpus_expand() {
    local list=${1//[[:space:]]/} part a b
    [ -n "$list" ] && [ "$list" != "(null)" ] || return 0
    local IFS=,
    for part in $list; do
        [ -n "$part" ] || continue
        part=${part%%:*}            # "0-7:2/4" group syntax: ranges only
        if [[ $part == *-* ]]; then
            a=${part%-*} b=${part#*-}
            seq "$a" "$b"
        else
            echo "$part"
        fi
    done | sort -n -u
}

# Compresses numbers (stdin, one per line) into a CPU list "0-3,8".
cpus_compress() {
    local n start="" prev="" out=""
    while read -r n; do
        [ -n "$n" ] || continue
        if [ -z "$start" ]; then
            start=$n prev=$n
        elif [ "$n" -eq $((prev + 1)) ]; then
            prev=$n
        else
            out+="${out:+,}$start"; [ "$prev" != "$start" ] && out+="-$prev"
            start=$n prev=$n
        fi
    done < <(sort -n -u)
    if [ -n "$start" ]; then
        out+="${out:+,}$start"; [ "$prev" != "$start" ] && out+="-$prev"
    fi
    printf '%s' "$out"
}

# Normalises a CPU list ("3,0-2" -> "0-3").
cpus_norm() { cpus_expand "$1" | cpus_compress; }

# CPUs of list A that are in list B (a CPU list).
cpus_and() { comm -12 <(cpus_expand "$1" | sort) <(cpus_expand "$2" | sort) | cpus_compress; }

# CPUs of list A that are not in list B.
cpus_minus() { comm -23 <(cpus_expand "$1" | sort) <(cpus_expand "$2" | sort) | cpus_compress; }

# Union of two lists.
cpus_or() { { cpus_expand "$1"; cpus_expand "$2"; } | cpus_compress; }

# True when every CPU of list A is in list B.
cpus_subset() { [ -z "$(cpus_minus "$1" "$2")" ]; }

# Hex CPU mask (as in /proc/irq/default_smp_affinity: "ff,ffffffff", any case) -> CPU list.
mask_to_cpus() {
    local hex=${1//,/} i d bit cpu=0
    hex=${hex//[[:space:]]/}
    for ((i = ${#hex} - 1; i >= 0; i--)); do
        d=$((16#${hex:i:1}))
        for bit in 0 1 2 3; do
            (( d >> bit & 1 )) && echo $((cpu + bit))
        done
        cpu=$((cpu + 4))
    done | cpus_compress
}

# CPU list -> hex mask in the kernel's format (32-bit groups joined by commas).
cpus_to_mask() {
    local -a words=() ; local n w i out=""
    while read -r n; do
        [ -n "$n" ] || continue
        w=$((n / 32))
        words[w]=$(( ${words[w]:-0} | (1 << (n % 32)) ))
    done < <(cpus_expand "$1")
    local top=0
    for i in "${!words[@]}"; do top=$i; done
    for ((i = top; i >= 0; i--)); do
        if [ "$i" -eq "$top" ]; then out+=$(printf '%x' "${words[i]:-0}")
        else out+=$(printf ',%08x' "${words[i]:-0}"); fi
    done
    printf '%s' "${out:-0}"
}

# ---- reporting ------------------------------------------------------------------------------
# Counters of this run.
N_CHANGE=0      # check: would change; apply: changed
N_FAILED=0      # apply: a change that failed
N_REBOOT=0      # waits for the operator's reboot (kernel command line)
REVERT_LINES=() # apply: revert commands of this run, in the order of the changes
PENDING=()      # names of the items waiting for a reboot

say() { printf '%s\n' "$*"; }
# ok ITEM TEXT: nothing to change
ok() { printf '  ok      %-22s %s\n' "$1" "$2"; }
# note ITEM TEXT: skipped or informational (not counted)
note() { printf '  skip    %-22s %s\n' "$1" "$2"; }
# pending ITEM TEXT: needs the operator (reboot)
pending() { printf '  reboot  %-22s %s\n' "$1" "$2"; N_REBOOT=$((N_REBOOT + 1)); PENDING+=("$1"); }

# change ITEM DESCRIPTION APPLY-CMD REVERT-CMD [SHOWN]
# check: prints what apply would do. apply: runs APPLY-CMD (a shell command string built with
# q()), prints it (or SHOWN, a readable equivalent) and its revert command, and records
# REVERT-CMD for the revert script.
change() {
    local item=$1 what=$2 cmd=$3 revert=$4 shown=${5:-$3}
    if [ "$MODE" = check ]; then
        printf '  change  %-22s %s\n' "$item" "$what"
        printf '            would run: %s\n' "$shown"
        N_CHANGE=$((N_CHANGE + 1))
        return 0
    fi
    if bash -c "$cmd" 2>"$TMPD/err"; then
        printf '  changed %-22s %s\n' "$item" "$what"
        printf '            ran:    %s\n' "$shown"
        printf '            revert: %s\n' "$revert"
        N_CHANGE=$((N_CHANGE + 1))
        REVERT_LINES+=("# $item: $what" "$revert")
        return 0
    fi
    printf '  FAILED  %-22s %s\n' "$item" "$what"
    printf '            ran:    %s\n' "$cmd"
    sed 's/^/            error:  /' "$TMPD/err"
    N_FAILED=$((N_FAILED + 1))
    return 1
}

# Writes the revert commands of this apply run to the front of the revert script (newest
# changes are undone first), keeping earlier runs' blocks after it.
write_revert_script() {
    [ ${#REVERT_LINES[@]} -gt 0 ] || return 0
    local f
    f=$(rp "$REVERT_SCRIPT")
    mkdir -p "$(dirname "$f")"
    {
        echo "#!/bin/bash"
        echo "# rtdaq rt-tuning revert script: undoes what 'tune.sh apply' changed, newest first."
        echo "# Run it as root (bash $REVERT_SCRIPT), then delete it. Generated; do not edit."
        echo "# ---- end of header"
        echo "# ---- apply of $(date -u +%Y-%m-%dT%H:%M:%SZ) (platform $PLATFORM, config $CONFIG_LABEL)"
        local i
        # undo in reverse order of the changes
        for ((i = ${#REVERT_LINES[@]} - 2; i >= 0; i -= 2)); do
            printf '%s\n%s\n' "${REVERT_LINES[i]}" "${REVERT_LINES[i + 1]}"
        done
        if [ -f "$f" ]; then sed '1,/^# ---- end of header$/d' "$f"; fi
    } > "$f.new"
    chmod 0700 "$f.new"
    mv "$f.new" "$f"
    say "revert script: $f (run it with bash to undo these changes)"
}
