#!/usr/bin/env bash
# The fresh-machine check: do the README's two commands work where only the Rust toolchain is
# installed? Builds a clean Debian 12 root like the project's new machines (mmdebstrap
# minbase + gcc with its libc6-dev + ca-certificates, and qemu-utils from bookworm-backports
# as those machines come with it), then, in a fresh clone of this repository's HEAD inside it:
#   1. the README's first command, `cargo run --release -- --duration 2` (the embedded default,
#      2 s), with the host's Rust toolchain bind-mounted read-only and the host's cargo
#      registry as the read-only lower layer of an overlay, in a network namespace of its own
#      (loopback only, so no crate download and no port shared with the host): it must exit 0
#      and print PASS;
#   2. a control that the root really is clean: building the AF_XDP engine there must fail
#      (libbpf-sys needs libelf-dev, which only scripts/test.sh installs). If it built, the
#      root would not show that the default build needs nothing but the toolchain;
#   3. the README's second command's install step, simulated: scripts/install-test-deps.sh
#      --simulate in the root must resolve every package without removing one (apt-get -s),
#      qemu-system-x86 matched to the backported qemu-utils included.
# Everything it mounts is unmounted and the root removed on exit; the clean root's tarball is
# kept under target/fresh-machine (made again when its recipe changes).
#
# Usage: scripts/fresh-machine-check.sh        (root; needs mmdebstrap, git, unshare)
# Env:   RTDAQ_FRESH_DIR (work dir, default target/fresh-machine),
#        RTDAQ_APT_MIRROR (default http://deb.debian.org/debian)
# Exit:  0 all three hold, 1 one failed (which, and its output, on stderr).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
WORK=${RTDAQ_FRESH_DIR:-$REPO/target/fresh-machine}
MIRROR=${RTDAQ_APT_MIRROR:-http://deb.debian.org/debian}
SECURITY=${MIRROR%/debian}/debian-security

die() { echo "fresh-machine-check: $*" >&2; exit 1; }
log() { echo "[fresh-machine $(date +%T)] $*" >&2; }

[ "$(id -u)" -eq 0 ] || die "needs root (mmdebstrap, chroot, mounts)"
for c in mmdebstrap git unshare chroot rustup cargo; do
    command -v "$c" >/dev/null || die "missing $c (scripts/install-test-deps.sh installs mmdebstrap)"
done

# --- the clean root (cached tarball) ---------------------------------------------------------
SOURCES=("deb $MIRROR bookworm main" "deb $MIRROR bookworm-updates main"
    "deb $SECURITY bookworm-security main" "deb $MIRROR bookworm-backports main")
PKGS="gcc,libc6-dev,ca-certificates,qemu-utils/bookworm-backports"
STAMP="v1 ${SOURCES[*]} $PKGS"
TAR=$WORK/root.tar
mkdir -p "$WORK"
if [ ! -s "$TAR" ] || [ "$(cat "$TAR.stamp" 2>/dev/null)" != "$STAMP" ]; then
    log "mmdebstrap bookworm minbase + $PKGS (downloads ~80 MB)"
    rm -rf "$TAR.tmp" "$WORK/root.tmp.tar"
    # The backports source only serves qemu-utils: removed again, as on the project's machines
    # (which have the backported qemu-utils and no backports source).
    # shellcheck disable=SC2016 # $1 is mmdebstrap's, in the hook
    mmdebstrap --quiet --variant=minbase --include="$PKGS" \
        --customize-hook='sed -i "/bookworm-backports/d" "$1/etc/apt/sources.list"' \
        bookworm "$WORK/root.tmp.tar" "${SOURCES[@]}" || die "mmdebstrap failed"
    mv "$WORK/root.tmp.tar" "$TAR"
    echo "$STAMP" > "$TAR.stamp"
fi

# --- a fresh root from it, with the host's toolchain and registry read-only ---------------------
ROOT=$(mktemp -d "$WORK/root.XXXXXX")
MOUNTS=()
cleanup() {
    local m i
    for ((i = ${#MOUNTS[@]} - 1; i >= 0; i--)); do
        m=${MOUNTS[$i]}
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || echo "cannot unmount $m" >&2
    done
    rm -rf --one-file-system "$ROOT"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bind() {  # SRC DST [ro]
    mkdir -p "$2"
    mount --bind "$1" "$2"
    MOUNTS+=("$2")
    [ "${3:-}" != ro ] || mount -o remount,bind,ro "$2"
}
tar -C "$ROOT" -xf "$TAR"
mount -t proc proc "$ROOT/proc"; MOUNTS+=("$ROOT/proc")
bind /sys "$ROOT/sys" ro
bind /dev "$ROOT/dev"
cp /etc/resolv.conf "$ROOT/etc/resolv.conf" 2>/dev/null || true

TOOLCHAIN=$(rustc --print sysroot)
bind "$TOOLCHAIN" "$ROOT/opt/rust" ro
# Every crate of Cargo.lock in the host's registry (the only download of this check), which
# becomes the read-only lower layer of the root's $CARGO_HOME/registry: cargo in the root
# writes (unpacked sources, locks) into the upper layer, never into the host's copy.
cargo fetch --locked -q
HOST_REGISTRY=${CARGO_HOME:-$HOME/.cargo}/registry
mkdir -p "$ROOT/root/.cargo/registry" "$WORK/overlay.$$/upper" "$WORK/overlay.$$/work"
mount -t overlay overlay \
    -o "lowerdir=$HOST_REGISTRY,upperdir=$WORK/overlay.$$/upper,workdir=$WORK/overlay.$$/work" \
    "$ROOT/root/.cargo/registry"
MOUNTS+=("$ROOT/root/.cargo/registry")
trap 'cleanup; rm -rf "$WORK/overlay.$$"' EXIT

git clone -q --no-hardlinks "$REPO" "$ROOT/build/rtdaq"
log "fresh clone of $(git -C "$REPO" rev-parse --short HEAD) in a clean root; toolchain $(rustc --version)"

# Runs a shell command in the root: clean environment, the toolchain on PATH, no network but
# its own loopback.
in_root() {
    unshare --net sh -c 'ip link set lo up 2>/dev/null || true; exec "$@"' sh \
        chroot "$ROOT" /usr/bin/env -i HOME=/root CARGO_HOME=/root/.cargo \
        PATH=/opt/rust/bin:/usr/local/bin:/usr/bin:/bin TERM=dumb sh -c "cd /build/rtdaq && $1"
}

fail=0
# 1. The README's first command.
log "1/3 README command 1 in the clean root: cargo run --release -- --duration 2"
if out=$(in_root 'cargo run --release -- --duration 2' 2>&1); then rc=0; else rc=$?; fi
if [ $rc -eq 0 ] && grep -q 'lost (tolerance 0): PASS' <<< "$out"; then
    log "1/3 ok: exit 0, $(grep -o '[0-9]* lost (tolerance 0): PASS' <<< "$out")"
else
    echo "$out" | tail -40 >&2
    echo "fresh-machine-check: 1/3 FAILED: cargo run --release in the clean root exited $rc (a PASS line expected)" >&2
    fail=1
fi

# 2. The control: a crate that needs a C library the clean root lacks must fail there.
log "2/3 control: cargo build -p rtdaq-engine-afxdp must fail in the clean root (no libelf-dev)"
if out=$(in_root 'cargo build -q -p rtdaq-engine-afxdp' 2>&1); then
    echo "fresh-machine-check: 2/3 FAILED: the AF_XDP engine built in the clean root, so the root is not clean" >&2
    fail=1
elif grep -qiE 'gelf\.h|libelf|No such file' <<< "$out"; then
    log "2/3 ok: it fails for the missing C library: $(grep -m1 -iE 'gelf\.h|libelf' <<< "$out" | cut -c1-160)"
else
    echo "$out" | tail -20 >&2
    echo "fresh-machine-check: 2/3 FAILED: the AF_XDP build failed for another reason than a missing library" >&2
    fail=1
fi

# 3. The install step of scripts/test.sh, simulated in the root (it needs the network for
#    apt-get update: not in a namespace of its own).
log "3/3 scripts/install-test-deps.sh --simulate in the clean root (apt-get -s: nothing removed)"
if out=$(chroot "$ROOT" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        bash /build/rtdaq/scripts/install-test-deps.sh --simulate 2>&1); then
    grep '^\[install-test-deps\]' <<< "$out" >&2 || true
    log "3/3 ok"
else
    echo "$out" | tail -30 >&2
    echo "fresh-machine-check: 3/3 FAILED: the install step would fail or remove packages on a fresh machine" >&2
    fail=1
fi

[ $fail -eq 0 ] || exit 1
log "the README's commands hold on a fresh machine (run, control, install plan)"
