# shellcheck shell=bash disable=SC2034  # CFG_* and CONFIG_LABEL are read by tune.sh
# rt-tuning/lib/config.sh: what tune.sh needs from a deployment config. Sourced, not run.
#
# Sets: CFG_NAME, CFG_PLATFORM, CFG_CORES (CPU list of every queue/consumer thread),
#       CFG_HP_2M, CFG_HP_1G (hugepages the memory regions need), CFG_IFACES (one
#       "address mtu" entry per interface), CFG_SOURCE (how it was read).
#
# Preferred source: `rtdaq config check FILE` of an rtdaq binary (the validator itself, so the
# numbers are exactly the ones the appliance uses; the summary has the cores, the interfaces
# with their MTU, and the hugepages per size). Fallback when no binary can run here (a cross-
# built aarch64 binary on an x86 build host, say): a grep/awk reading of the TOML that knows
# only the keys used below (platform, cpu_core, consumer_core, [[interfaces]] address/mtu,
# [[memory_regions]] kind/buf_size/buf_count/page_size) and does not validate anything.

CFG_NAME="" CFG_PLATFORM="" CFG_CORES="" CFG_HP_2M=0 CFG_HP_1G=0 CFG_SOURCE=""
CFG_IFACES=()

# The rtdaq binary to ask: --bin, $RTDAQ_BIN, `rtdaq` on PATH, /usr/local/bin/rtdaq, then
# this checkout's target/release/rtdaq. Prints nothing when none runs here (or --bin none).
find_rtdaq() {
    local c
    [ "${RTDAQ_BIN_ARG:-}" != none ] || return 0   # --bin none: the grep-level fallback
    for c in "${RTDAQ_BIN_ARG:-}" "${RTDAQ_BIN:-}" "$(command -v rtdaq 2>/dev/null || true)" \
        /usr/local/bin/rtdaq "$TUNE_DIR/../target/release/rtdaq"; do
        [ -n "$c" ] && [ -x "$c" ] && "$c" version >/dev/null 2>&1 && { printf '%s' "$c"; return 0; }
    done
    return 0
}

# Parses the summary `rtdaq config check FILE` prints (stdin).
parse_check_summary() {
    local line in_if=0 addr mtu
    while IFS= read -r line; do
        case $line in
        'config "'*) CFG_NAME=${line#config \"}; CFG_NAME=${CFG_NAME%%\"*}
                     CFG_PLATFORM=${line##*platform }; in_if=0 ;;
        interfaces:) in_if=1 ;;
        '  name '*) ;;
        queues:*) in_if=0 ;;
        'cores used:'*) line=${line#cores used:}; CFG_CORES=$(cpus_norm "${line// /}") ;;
        *hugepages:*x\ 2M*)
            CFG_HP_2M=$(sed -n 's/.*hugepages: \([0-9]*\) x 2M.*/\1/p' <<< "$line")
            CFG_HP_1G=$(sed -n 's/.* \([0-9]*\) x 1G.*/\1/p' <<< "$line") ;;
        '  '*)
            if [ $in_if = 1 ]; then
                read -r _ addr mtu _ <<< "$line"
                CFG_IFACES+=("$addr $mtu")
            fi ;;
        esac
    done
    CFG_HP_2M=${CFG_HP_2M:-0} CFG_HP_1G=${CFG_HP_1G:-0}
}

# The grep-level fallback over the TOML text (stdin); see the file comment for its limits.
parse_toml_fallback() {
    local out
    out=$(awk '
        function val(s) { sub(/^[^=]*=[ \t]*/, "", s); sub(/[ \t]*#.*$/, "", s); gsub(/"/, "", s); return s }
        function flush_region() {
            if (kind == "huge") {
                stride = int((bufsize + 127) / 128) * 128
                bytes = stride * bufcount
                if (page == "1G") g1 += int((bytes + 1073741823) / 1073741824)
                else m2 += int((bytes + 2097151) / 2097152)
            }
            kind = ""; page = ""; bufsize = 0; bufcount = 0
        }
        function flush_iface() { if (addr != "") ifs = ifs addr " " (mtu == "" ? 1500 : mtu) "\n"; addr = ""; mtu = "" }
        /^[ \t]*\[/ {
            if (sect == "region") flush_region()
            if ($0 ~ /^[ \t]*\[\[interfaces\]\]/) { flush_iface(); sect = "iface" }
            else if ($0 ~ /^[ \t]*\[\[memory_regions\]\]/) sect = "region"
            else if ($0 ~ /^[ \t]*\[\[interfaces\./) sect = "queue"
            else { if (sect == "iface" || sect == "queue") flush_iface(); sect = "other" }
            next
        }
        /^[ \t]*name[ \t]*=/ && sect == "" { name = val($0) }
        /^[ \t]*platform[ \t]*=/ && sect == "" { platform = val($0) }
        /^[ \t]*(cpu_core|consumer_core)[ \t]*=/ { cores = cores val($0) "," }
        /^[ \t]*kind[ \t]*=/ && sect == "region" { kind = val($0) }
        /^[ \t]*page_size[ \t]*=/ && sect == "region" { page = val($0) }
        /^[ \t]*buf_size[ \t]*=/ && sect == "region" { bufsize = val($0) + 0 }
        /^[ \t]*buf_count[ \t]*=/ && sect == "region" { bufcount = val($0) + 0 }
        /^[ \t]*address[ \t]*=/ && sect == "iface" { addr = val($0) }
        /^[ \t]*mtu[ \t]*=/ && sect == "iface" { mtu = val($0) }
        END {
            if (sect == "region") flush_region()
            flush_iface()
            printf "NAME=%s\nPLATFORM=%s\nCORES=%s\nHP2M=%d\nHP1G=%d\n%s", name, (platform == "" ? "host" : platform), cores, m2, g1, ifs
        }')
    local line
    while IFS= read -r line; do
        case $line in
        NAME=*) CFG_NAME=${line#NAME=} ;;
        PLATFORM=*) CFG_PLATFORM=${line#PLATFORM=} ;;
        CORES=*) CFG_CORES=$(cpus_norm "${line#CORES=}") ;;
        HP2M=*) CFG_HP_2M=${line#HP2M=} ;;
        HP1G=*) CFG_HP_1G=${line#HP1G=} ;;
        ?*) CFG_IFACES+=("$line") ;;
        esac
    done <<< "$out"
}

# load_config FILE: FILE may be empty (then the binary's embedded config, via `rtdaq config show`).
load_config() {
    local file=$1 bin summary
    bin=$(find_rtdaq)
    if [ -z "$file" ]; then
        [ -n "$bin" ] || { echo "tune.sh: no --config and no runnable rtdaq binary (--bin PATH) to read the embedded config from" >&2; return 2; }
        file=$TMPD/embedded.toml
        "$bin" config show > "$file"
        CONFIG_LABEL="embedded config of $bin"
    else
        [ -f "$file" ] || { echo "tune.sh: config file $file not found" >&2; return 2; }
        CONFIG_LABEL=$file
    fi
    if [ -n "$bin" ] && ! summary=$("$bin" config check "$file" 2>&1); then
        if grep -q 'this binary was built without' <<< "$summary"; then
            # valid for another build of rtdaq (a GPU config and a binary without `gpu`, say):
            # this binary cannot summarise it, so read it the grep-level way
            say "note: $bin cannot read this config ($(grep -m1 -o 'built without [^;]*' <<< "$summary")); reading it the grep-level way"
            bin=""
        else
            echo "tune.sh: $file is not a valid deployment config:" >&2
            echo "$summary" >&2
            return 2
        fi
    fi
    if [ -n "$bin" ]; then
        parse_check_summary <<< "$summary"
        CFG_SOURCE="rtdaq config check ($bin)"
    else
        parse_toml_fallback < "$file"
        CFG_SOURCE="grep-level TOML reading (no runnable rtdaq binary; not validated)"
    fi
    [ -n "$CFG_PLATFORM" ] || { echo "tune.sh: could not read the platform of $file" >&2; return 2; }
}
