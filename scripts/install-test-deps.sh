#!/usr/bin/env bash
# Installs what rtdaq's tests need on a Debian 12 (bookworm) host as it comes: the Debian
# packages below, the Soft-RoCE guest's host tools, and the rustfmt/clippy components and the
# aarch64 target. scripts/test.sh runs it first; run it alone as root to prepare a machine.
#
# Never removes a package: every apt-get install is simulated first (apt-get -s) and the
# script stops, naming them, if apt would remove anything; the install itself runs with
# --no-remove. qemu-system-x86 must match the installed qemu-utils (a machine may come with
# a newer qemu-utils from bookworm-backports, which Breaks bookworm's qemu-system-common):
# the script then installs qemu-system-x86 at exactly that version from the suite that has
# it, adding Debian's <codename>-backports source (/etc/apt/sources.list.d/
# rtdaq-backports.sources, with the archive's own key) when the version is a backport and no
# configured suite has it.
#
# Usage: scripts/install-test-deps.sh [--simulate] [--guest-only]
#   --guest-only only the Soft-RoCE guest's host tools (qemu-system-x86 mmdebstrap kmod cpio;
#                what scripts/vm/build-guest.sh --host-deps runs)
#   --simulate   resolve everything (apt-get update, the backports source if needed) and show
#                what would be installed, without installing; exit 1 if apt would remove a
#                package. The fresh-machine check (scripts/fresh-machine-check.sh) runs it in
#                a clean Debian root.
# Env: RTDAQ_APT_MIRROR (default http://deb.debian.org/debian) for the backports source.
# Exit: 0 done (or, simulated, nothing would be removed), 1 failed (the reason on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."

simulate=0
guest_only=0
for a in "$@"; do
    case $a in
        --simulate) simulate=1 ;;
        --guest-only) guest_only=1 ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "install-test-deps.sh: unknown argument $a (see --help)" >&2; exit 1 ;;
    esac
done

die() { echo "install-test-deps.sh: $*" >&2; exit 1; }
log() { echo "[install-test-deps] $*" >&2; }

# Debian packages: util-linux (setpriv: privilege-drop tests; taskset: the busy-host test),
# iproute2 (namespaces), procps, iperf3 + nftables + jq (the iperf3 interop test: a real
# external sender), iputils-ping (test bed), shellcheck (scripts), clang llvm m4 libelf-dev
# zlib1g-dev pkg-config (the AF_XDP engine: libbpf/libxdp and its XDP program), tcpreplay (a
# real raw-frame sender), dpdk dpdk-dev libdpdk-dev libclang-dev (rtdaq-dpdk-sys: DPDK 22.11
# headers/libraries/PMDs and bindgen), gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
# (the sealed aarch64 binary and its tests under qemu-aarch64; docs/deploy.md),
# libibverbs-dev librdmacm-dev (rtdaq-ibverbs-sys: rdma-core 44), tcpdump tshark (the
# recording tests' readers: tcpdump, tshark, capinfos), python3-venv (the venv below with
# baseband and spead2), mmdebstrap kmod cpio (the
# Soft-RoCE guest and the fresh-machine check's clean root), qemu-system-x86 (the guest;
# matched to qemu-utils below), and prometheus (the metrics test: a real Prometheus server
# scraping rtdaq, and promtool), libucx-dev ucx-utils (the UCX egress: rtdaq-ucx-sys builds
# against UCX 1.13; ucx_perftest / ucx_info are its transport check and bandwidth baseline),
# linuxptp (the PTP test), rt-tests stress-ng (scripts/bench-jitter.sh: cyclictest beside
# rtdaq, ordinary load).
APT_PACKAGES=(util-linux iproute2 procps git ca-certificates iperf3 nftables jq iputils-ping
    shellcheck clang llvm m4 libelf-dev zlib1g-dev pkg-config tcpreplay dpdk dpdk-dev libdpdk-dev
    libclang-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user libibverbs-dev
    librdmacm-dev tcpdump tshark python3-venv mmdebstrap kmod cpio prometheus ethtool
    libucx-dev ucx-utils linuxptp rt-tests stress-ng)
[ $guest_only = 0 ] || APT_PACKAGES=(mmdebstrap kmod cpio)
APT=(apt-get -o DPkg::Lock::Timeout=600)
MIRROR=${RTDAQ_APT_MIRROR:-http://deb.debian.org/debian}
BPO_SOURCES=/etc/apt/sources.list.d/rtdaq-backports.sources

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

# The suite (e.g. bookworm-backports) whose apt source has qemu-system-x86 at version $1.
qemu_suite_for() {
    apt-cache madison qemu-system-x86 2>/dev/null | awk -F'|' -v want="$1" '
        { v = $2; gsub(/ /, "", v); split($3, f, " "); split(f[2], s, "/") }
        v == want { print s[1]; exit }'
}

# Adds Debian's backports suite for this release (a file of its own, the archive's key).
add_backports_source() {
    local codename
    codename=$(awk -F= '$1 == "VERSION_CODENAME" { gsub(/"/, "", $2); print $2 }' /etc/os-release)
    [ -n "$codename" ] || die "cannot tell the Debian release (/etc/os-release has no VERSION_CODENAME)"
    log "adding $codename-backports ($MIRROR) as $BPO_SOURCES: the installed qemu-utils is a backport"
    cat > "$BPO_SOURCES" <<EOF
# Added by rtdaq's scripts/install-test-deps.sh: qemu-system-x86 matching the installed
# backported qemu-utils. Backports have priority 100: nothing else is upgraded from here.
Types: deb
URIs: $MIRROR
Suites: $codename-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    "${APT[@]}" update -qq
}

# Simulates `apt-get install ARGS...`; fails naming every package apt would remove.
no_removal() {
    local plan removed
    plan=$(DEBIAN_FRONTEND=noninteractive "${APT[@]}" -s install -y "$@" 2>&1) ||
        die "apt-get -s install $* failed:
$plan"
    removed=$(awk '/^Remv /{print $2}' <<< "$plan" | tr '\n' ' ')
    [ -z "$removed" ] || die "apt-get install $* would remove: $removed(refusing; nothing was changed)"
    log "apt-get install $*: $(grep -c '^Inst ' <<< "$plan" || true) packages to install, none removed"
}

apt_install() {
    no_removal "$@"
    [ $simulate = 1 ] && return 0
    DEBIAN_FRONTEND=noninteractive "${APT[@]}" install -y -q --no-remove "$@"
}

install_apt() {
    local missing=() p
    for p in "${APT_PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
    local need_qemu=0
    command -v qemu-system-x86_64 >/dev/null || need_qemu=1
    if [ ${#missing[@]} -eq 0 ] && [ $need_qemu = 0 ]; then
        log "Debian packages: all installed"
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        [ $need_qemu = 0 ] || missing+=(qemu-system-x86)
        die "missing packages: ${missing[*]} (run as root: scripts/install-test-deps.sh)"
    fi
    "${APT[@]}" update -qq
    [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
    [ $need_qemu = 1 ] || return 0
    # The guest's QEMU, matched to an installed qemu-utils.
    local qemu=(--no-install-recommends qemu-system-x86) have suite
    if installed qemu-utils; then
        have=$(dpkg-query -W -f='${Version}' qemu-utils)
        suite=$(qemu_suite_for "$have")
        if [ -z "$suite" ] && [[ $have == *bpo* ]]; then
            add_backports_source
            suite=$(qemu_suite_for "$have")
        fi
        [ -n "$suite" ] || die "qemu-utils $have is installed and no apt source has qemu-system-x86 $have; add the suite that has it, or install a matching qemu-system-x86 yourself"
        log "qemu-utils $have is installed: qemu-system-x86 $have from $suite"
        qemu=(--no-install-recommends -t "$suite" "qemu-system-x86=$have")
    fi
    apt_install "${qemu[@]}"
}

install_rust() {
    [ $simulate = 1 ] && return 0
    local c
    for c in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
    done
    rustup target list --installed 2>/dev/null | grep -qx aarch64-unknown-linux-gnu ||
        rustup target add aarch64-unknown-linux-gnu
}

# The Python peers (PyPI) in a venv of the repository's own, target/pyenv: Debian's Python
# refuses system-wide pip installs (PEP 668). baseband reads the DADA and VDIF files the
# recorder writes and writes VDIF files; spead2 sends and receives SPEAD streams; scapy
# builds eCPRI frames and the pcap files the Python package's tests read; pytest runs those
# tests and maturin builds the package's wheel (python/, docs/python.md).
PYENV=target/pyenv
PY_PEERS="baseband spead2 scapy pytest maturin"
install_python() {
    [ $simulate = 1 ] && return 0
    if [ -x "$PYENV/bin/python" ] && [ -x "$PYENV/bin/maturin" ] &&
        "$PYENV/bin/python" -c 'import baseband, spead2, scapy, pytest' 2>/dev/null; then
        log "Python venv $PYENV: $PY_PEERS installed"
        return 0
    fi
    log "Python venv $PYENV: pip install $PY_PEERS (numpy, astropy)"
    [ -x "$PYENV/bin/python" ] || python3 -m venv "$PYENV" ||
        die "python3 -m venv $PYENV failed (python3-venv is installed above)"
    # shellcheck disable=SC2086 # one word per package
    "$PYENV/bin/pip" install -q --disable-pip-version-check $PY_PEERS ||
        die "pip install $PY_PEERS failed (needs https://pypi.org)"
}

install_apt
[ $guest_only = 1 ] || install_rust
[ $guest_only = 1 ] || install_python
if [ $simulate = 1 ]; then
    log "simulated: nothing installed, nothing would be removed"
else
    log "done"
fi
