#!/bin/sh
# PID 1 of the rtdaq test guest (baked into the initramfs as /init by scripts/vm/build-guest.sh).
# Mounts the basics and the host's 9p shares, runs the per-run script /mnt/host/run.sh that
# guest-run.sh put there, then powers the guest off. Kernel messages go to ttyS0 (the
# console log); the command's output goes through virtio ports (see run.sh).
#
# With rtdaq.init=systemd on the kernel command line (guest-run.sh --init systemd) it does the
# same mounts, then hands PID 1 to systemd (exec): the default target is rtdaq-guest.target,
# whose one service runs run.sh and then powers the guest off (systemd_setup below).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
init_mode=init
grep -qw 'rtdaq.init=systemd' /proc/cmdline && init_mode=systemd
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
echo "GUEST-INIT uptime=$(cut -d' ' -f1 /proc/uptime) kernel=$(uname -r) init=$init_mode"

# systemd mode: the units that run run.sh under systemd and power off after it, and the
# units masked because the guest has nothing for them (udev: the init.sh guest has none
# either, and its .link policy would rewrite the veth MACs; firstboot: it prompts on the
# console; autofs is no module here) or because they only cost boot time under TCG.
systemd_setup() {
    # a fixed machine id: not a first boot (no preset-all, no firstboot)
    echo 7274646171677565737400000000f1f1 > /etc/machine-id
    mkdir -p /etc/systemd/system
    for u in systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket \
        systemd-udev-trigger.service systemd-udev-settle.service systemd-firstboot.service \
        systemd-pcrphase.service systemd-pcrphase-sysinit.service systemd-repart.service \
        proc-sys-fs-binfmt_misc.automount systemd-binfmt.service systemd-pstore.service \
        systemd-random-seed.service systemd-hwdb-update.service \
        apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer fstrim.timer; do
        ln -sf /dev/null "/etc/systemd/system/$u"
    done
    cat > /etc/systemd/system/rtdaq-guest.target <<'UNIT'
[Unit]
Description=rtdaq test guest: the harness's command (guest-run.sh --init systemd)
Requires=basic.target
Wants=rtdaq-guest-run.service
After=basic.target
AllowIsolate=yes
UNIT
    # Type=exec, not oneshot: the boot finishes while COMMAND runs (is-system-running says
    # running, not starting). run.sh's own lines go to the console as with init.sh; the
    # command's stdout/stderr go to the virtio ports (run.sh). poweroff-immediate: the state
    # file is synced, no need to stop every unit first (seconds under TCG).
    cat > /etc/systemd/system/rtdaq-guest-run.service <<'UNIT'
[Unit]
Description=rtdaq test guest: /mnt/host/run.sh
After=basic.target
SuccessAction=poweroff-immediate
FailureAction=poweroff-immediate

[Service]
Type=exec
ExecStart=/bin/bash /mnt/host/run.sh
ExecStopPost=/bin/sh -c 'sync; echo "GUEST-DONE uptime=$$(cut -d. -f1 /proc/uptime) s"'
LimitMEMLOCK=infinity
StandardOutput=journal+console
StandardError=journal+console
UNIT
    ln -sf rtdaq-guest.target /etc/systemd/system/default.target
}
hostname guest
ip link set lo up
for m in virtio_pci 9pnet_virtio 9p virtio_console; do modprobe "$m" || echo "GUEST: modprobe $m failed"; done
if mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 hostshare /mnt/host; then
    # the project checkout, read-only (optional)
    mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro repo /mnt/repo 2>/dev/null ||
        echo "GUEST: no repo share"
    echo booted > /mnt/host/state
    if [ "$init_mode" = systemd ]; then
        systemd_setup
        echo "GUEST-INIT exec systemd uptime=$(cut -d' ' -f1 /proc/uptime)"
        exec /lib/systemd/systemd
        echo "GUEST: exec /lib/systemd/systemd failed"
        echo "setup-failed exec /lib/systemd/systemd failed" >> /mnt/host/state
    elif [ -f /mnt/host/run.sh ]; then
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
