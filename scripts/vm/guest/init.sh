#!/bin/sh
# PID 1 of the rtdaq test guest (baked into the initramfs as /init by scripts/vm/build-guest.sh).
# Mounts the basics and the host's 9p shares, runs the per-run script /mnt/host/run.sh that
# guest-run.sh put there, then powers the guest off. Kernel messages go to ttyS0 (the
# console log); the command's output goes through virtio ports (see run.sh).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
echo "GUEST-INIT uptime=$(cut -d' ' -f1 /proc/uptime) kernel=$(uname -r)"
hostname guest
ip link set lo up
for m in virtio_pci 9pnet_virtio 9p virtio_console; do modprobe "$m" || echo "GUEST: modprobe $m failed"; done
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 hostshare /mnt/host; then
    # the project checkout, read-only (optional)
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro repo /mnt/repo 2>/dev/null ||
        echo "GUEST: no repo share"
    echo booted > /mnt/host/state
    if [ -f /mnt/host/run.sh ]; then
        bash /mnt/host/run.sh
    else
        echo "GUEST: /mnt/host/run.sh missing"
    fi
    umount /mnt/repo 2>/dev/null
    sync
    umount /mnt/host
else
    echo "GUEST: 9p mount of the host share failed"
fi
echo "GUEST-DONE uptime=$(cut -d' ' -f1 /proc/uptime)"
sync
echo o > /proc/sysrq-trigger
sleep 30
