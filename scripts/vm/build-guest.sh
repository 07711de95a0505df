#!/usr/bin/env bash
# Builds (once) and caches the Soft-RoCE test guest under $RTDAQ_VM_DIR (default target/vm):
# Debian bookworm kernels (stock linux-image-amd64 and PREEMPT_RT linux-image-rt-amd64, from
# the Debian packages), one bookworm minbase rootfs with rdma-core, ibverbs-utils,
# ibverbs-providers, rdmacm-utils, perftest and rt-tests (mmdebstrap), and one initramfs per
# kernel (the rootfs + that kernel's needed modules + scripts/vm/guest/init.sh as /init).
# Idempotent: a second run only checks the stamps (well under a second).
#
# Usage: scripts/vm/build-guest.sh [--kernel std|rt]...
#        scripts/vm/build-guest.sh --host-deps
#   --kernel K    build only this kernel's initramfs (default: both)
#   --host-deps   only install the missing host packages (qemu-system-x86 mmdebstrap kmod cpio;
#                 root, apt) and exit, through scripts/install-test-deps.sh --guest-only: never
#                 removes a package, and installs qemu-system-x86 at the version of an
#                 installed qemu-utils (from bookworm-backports when that is a backport).
# Env: RTDAQ_VM_DIR (work dir), RTDAQ_VM_MIRROR (Debian mirror for the rootfs).
# Exit: 0 ready, 1 failed (the reason on stderr).
set -euo pipefail
# shellcheck source=scripts/vm/common.sh
. "$(dirname "$0")/common.sh"
VM_PROG=build-guest.sh

host_deps=0
kernels=()
while [ $# -gt 0 ]; do
    case $1 in
        --host-deps) host_deps=1 ;;
        --kernel)
            if [ $# -lt 2 ] || ! vm_flavour "$2" >/dev/null; then vm_die "--kernel takes std or rt"; fi
            kernels+=("$2"); shift ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) vm_die "unknown argument: $1 (see --help)" ;;
    esac
    shift
done
[ ${#kernels[@]} -gt 0 ] || kernels=(std rt)

APT=(apt-get -o DPkg::Lock::Timeout=600)

# The host tools, never removing a package, qemu-system-x86 matched to an installed
# qemu-utils (a backport included): scripts/install-test-deps.sh --guest-only.
install_host_deps() {
    local missing=() c
    for c in $VM_HOST_CMDS; do command -v "$c" >/dev/null || missing+=("$c"); done
    [ ${#missing[@]} -eq 0 ] && return 0
    vm_log "installing host packages for: ${missing[*]}"
    "$VM_REPO/scripts/install-test-deps.sh" --guest-only ||
        vm_die "installing the host packages failed (see above)"
}

check_host() {
    local c missing=()
    for c in $VM_HOST_CMDS; do command -v "$c" >/dev/null || missing+=("$c"); done
    [ ${#missing[@]} -eq 0 ] ||
        vm_die "missing host commands: ${missing[*]} (run scripts/vm/build-guest.sh --host-deps as root, or apt-get install --no-install-recommends $VM_HOST_PKGS)"
}
need_root() { [ "$(id -u)" -eq 0 ] || vm_die "building the guest ($1) needs root"; }

# The kernel package behind Debian's meta package, e.g. linux-image-6.1.0-44-amd64.
fetch_kernel() {  # flavour
    local flavour=$1 d="$VM_WORK/k/$1"
    if ls "$d"/boot/vmlinuz-* >/dev/null 2>&1 && [ -d "$d/lib/modules" ]; then return 0; fi
    local meta="linux-image-$flavour" pkg
    need_root "kernel $flavour"
    apt-cache show "$meta" >/dev/null 2>&1 || { vm_log "apt-get update"; "${APT[@]}" update -qq; }
    pkg=$(apt-cache depends "$meta" | awk '/Depends: linux-image-/{print $2; exit}')
    [ -n "$pkg" ] || vm_die "cannot resolve $meta to a kernel package (apt-cache depends $meta)"
    vm_log "download + extract $pkg"
    mkdir -p "$VM_WORK/debs"
    rm -f "$VM_WORK/debs/$pkg"_*.deb
    (cd "$VM_WORK/debs" || exit 1; apt-get download -q "$pkg" 2>&1 | grep -v 'Download is performed unsandboxed' || true)
    ls "$VM_WORK/debs/$pkg"_*.deb >/dev/null 2>&1 || vm_die "apt-get download $pkg failed"
    rm -rf "$d.tmp"; mkdir -p "$d.tmp"
    dpkg-deb -x "$VM_WORK/debs/$pkg"_*.deb "$d.tmp"
    depmod -b "$d.tmp" "$(ls "$d.tmp/lib/modules")"
    rm -rf "$d"; mv "$d.tmp" "$d"
    rm -f "$VM_WORK/debs/$pkg"_*.deb
}

build_rootfs() {
    local stamp="${VM_SOURCES[*]} $VM_GUEST_PKGS"
    if [ -s "$VM_WORK/rootfs.tar" ] && [ "$(cat "$VM_WORK/rootfs.stamp" 2>/dev/null)" = "$stamp" ]; then return 0; fi
    need_root "rootfs"
    vm_log "mmdebstrap $VM_SUITE minbase + $VM_GUEST_PKGS (downloads ~60 MB)"
    rm -f "$VM_WORK/rootfs.tar.tmp"
    mmdebstrap --quiet --format=tar --variant=minbase --include="$VM_GUEST_PKGS" \
        --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
        --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
        "$VM_SUITE" "$VM_WORK/rootfs.tar.tmp" "${VM_SOURCES[@]}" || vm_die "mmdebstrap failed"
    mv "$VM_WORK/rootfs.tar.tmp" "$VM_WORK/rootfs.tar"
    echo "$stamp" > "$VM_WORK/rootfs.stamp"
}

build_initramfs() {  # std|rt
    local flavour d kv out r stamp
    flavour=$(vm_flavour "$1"); d="$VM_WORK/k/$flavour"
    kv=$(ls "$d/lib/modules")
    out="$VM_WORK/initramfs-$flavour.cpio"
    stamp="$kv|$VM_MODS|$(cat "$VM_WORK/rootfs.stamp")|$(sha256sum < "$VM_DIR_SCRIPTS/guest/init.sh")"
    if [ -s "$out" ] && [ "$(cat "$out.stamp" 2>/dev/null)" = "$stamp" ]; then return 0; fi
    need_root "initramfs"
    vm_log "assemble initramfs for $kv"
    r="$VM_WORK/root-$flavour"
    rm -rf "$r"; mkdir -p "$r"
    tar -C "$r" -xf "$VM_WORK/rootfs.tar"
    # kernel modules: the dependency closure of $VM_MODS only
    local m="$r/lib/modules/$kv" ko rel
    mkdir -p "$m"
    cp "$d/lib/modules/$kv"/modules.{order,builtin,builtin.modinfo} "$m"/
    # shellcheck disable=SC2086
    modprobe -d "$d" -S "$kv" --show-depends -a $VM_MODS | awk '$1 == "insmod" {print $2}' | sort -u |
    while read -r ko; do
        rel=${ko#"$d/lib/modules/$kv/"}; mkdir -p "$m/$(dirname "$rel")"; cp "$ko" "$m/$rel"
    done
    depmod -b "$r" "$kv"
    install -m 0755 "$VM_DIR_SCRIPTS/guest/init.sh" "$r/init"
    mkdir -p "$r/mnt/host" "$r/mnt/repo"
    (cd "$r" && find . -print0 | cpio --null -o -H newc --quiet) > "$out.tmp"
    mv "$out.tmp" "$out"; rm -rf "$r"
    echo "$stamp" > "$out.stamp"
}

if [ $host_deps = 1 ]; then install_host_deps; exit 0; fi
check_host
mkdir -p "$VM_WORK"
# One builder at a time (parallel guest-run.sh calls share the cache).
exec 9> "$VM_WORK/build.lock"
flock 9
t0=$(date +%s)
for k in "${kernels[@]}"; do fetch_kernel "$(vm_flavour "$k")"; done
build_rootfs
for k in "${kernels[@]}"; do build_initramfs "$k"; done
t=$(( $(date +%s) - t0 ))
[ $t -gt 2 ] && vm_log "guest ready in $VM_WORK (${t}s)"
exit 0
