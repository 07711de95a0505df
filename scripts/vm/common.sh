# shellcheck shell=bash disable=SC2034
# Shared settings of scripts/vm/*.sh (sourced, not run). See scripts/vm/README.md.

VM_DIR_SCRIPTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VM_REPO=$(cd "$VM_DIR_SCRIPTS/../.." && pwd)
# Everything built or downloaded lives here (kernels, rootfs, initramfs, logs, per-run dirs).
VM_WORK=${RTDAQ_VM_DIR:-$VM_REPO/target/vm}
VM_SUITE=bookworm
VM_MIRROR=${RTDAQ_VM_MIRROR:-http://deb.debian.org/debian}
VM_SECURITY_MIRROR=${RTDAQ_VM_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
# The rootfs's apt sources: the suite, its updates and its security updates (the same
# package versions as an up-to-date bookworm host, so host-built binaries find their libraries).
VM_SOURCES=("deb $VM_MIRROR $VM_SUITE main" "deb $VM_MIRROR $VM_SUITE-updates main"
    "deb $VM_SECURITY_MIRROR $VM_SUITE-security main")
# Guest userspace (Debian packages, mmdebstrap minbase + these). systemd is PID 1 only with
# guest-run.sh --init systemd (its binaries are inert otherwise: /init is guest/init.sh).
VM_GUEST_PKGS="rdma-core,ibverbs-utils,ibverbs-providers,libibverbs1,librdmacm1,rdmacm-utils,perftest,rt-tests,stress-ng,libucx0,ucx-utils,iproute2,kmod,procps,iputils-ping,util-linux,jq,systemd"
# Kernel modules copied into the initramfs (with their dependency closure).
VM_MODS="rdma_rxe veth sch_fq sch_etf sch_tbf 9p 9pnet_virtio virtio_pci virtio_console ib_uverbs rdma_ucm ib_umad crc32_generic crc32_pclmul"
# Host commands the build and the boot need, and the Debian packages that provide them.
VM_HOST_CMDS="qemu-system-x86_64 mmdebstrap depmod modprobe cpio dpkg-deb apt-get flock timeout"
VM_HOST_PKGS="qemu-system-x86 mmdebstrap kmod cpio"

vm_log() { echo "[vm $(date +%T)] $*" >&2; }
vm_die() { echo "${VM_PROG:-vm}: $*" >&2; exit "${VM_DIE_RC:-1}"; }

# The debian kernel flavour for --kernel std|rt.
vm_flavour() {
    case $1 in
        std) echo amd64 ;;
        rt) echo rt-amd64 ;;
        *) return 1 ;;
    esac
}

# kvm or tcg (cached in $VM_WORK/accel; RTDAQ_VM_ACCEL overrides).
# PVM hosts (module kvm_pvm, e.g. Firecracker with nested PVM) have /dev/kvm but run only
# PVM-enabled guest kernels; a stock Debian kernel dies there. They get TCG.
vm_accel() {
    if [ -n "${RTDAQ_VM_ACCEL:-}" ]; then echo "$RTDAQ_VM_ACCEL"; return; fi
    if [ -s "$VM_WORK/accel" ]; then cat "$VM_WORK/accel"; return; fi
    local a=tcg
    if [ ! -d /sys/module/kvm_pvm ] && [ -w /dev/kvm ] && grep -qwE 'vmx|svm' /proc/cpuinfo; then
        a=kvm
    fi
    mkdir -p "$VM_WORK"
    echo $a > "$VM_WORK/accel"
    echo $a
}
