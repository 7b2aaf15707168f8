#!/bin/sh
# /init of the rxe peer VM that `cargo xtask interop` boots (busybox sh, PID 1).
#
# Loads the modules listed in /etc/xroce/modules, gives eth0 the address from the kernel
# command line (xroce.ip=A.B.C.D/NN, xroce.ip6=ADDR/NN, xroce.mtu=N), mounts the host's
# share (virtio-9p, tag "xroce") at /share, creates Soft-RoCE device rxe0 on eth0 and writes
# /share/ready with the indices of the IPv4 GID, the global IPv6 GID and the link-local
# one. Then it runs jobs:
#
#   the host writes   /share/jobs/ID.sh           (renamed into place when complete)
#   the guest writes  /share/out/ID.pid           the job's process group
#                     /share/out/ID.log           its output (stdout and stderr)
#                     /share/out/ID.status        its exit status, once it has exited
#
# /share/poweroff makes it power the VM off.
export PATH=/usr/bin HOME=/root

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /dev/shm
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /tmp
mount -t tmpfs tmpfs /run

say() { echo "xroce-peer: $*"; }

ip=10.77.0.2/24
ip6=fd00:77::2/64
mtu=1500
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        xroce.ip=*) ip=${arg#xroce.ip=} ;;
        xroce.ip6=*) ip6=${arg#xroce.ip6=} ;;
        xroce.mtu=*) mtu=${arg#xroce.mtu=} ;;
    esac
done

while read -r module; do
    [ -n "$module" ] && { insmod "$module" || say "insmod $module failed"; }
done < /etc/xroce/modules

ip link set lo up
n=0
while [ ! -e /sys/class/net/eth0 ] && [ $n -lt 200 ]; do usleep 20000; n=$((n + 1)); done
ip link set eth0 mtu "$mtu"
ip addr add "$ip" dev eth0
# Usable at once, without duplicate address detection (busybox's ip has no `nodad`).
echo 0 > /proc/sys/net/ipv6/conf/eth0/accept_dad
ip addr add "$ip6" dev eth0 || say "no IPv6 address $ip6"
ip link set eth0 up

mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=none xroce /share \
    || say "cannot mount the host share"
mkdir -p /share/jobs /share/out

rdma link add rxe0 type rxe netdev eth0 || say "rdma link add rxe0 failed"

# The GID table fills in asynchronously: wait for the IPv4-mapped entry.
gids=/sys/class/infiniband/rxe0/ports/1/gids
index=
n=0
while [ -z "$index" ] && [ $n -lt 200 ]; do
    for i in 0 1 2 3 4 5 6 7; do
        gid=
        read -r gid < "$gids/$i" 2>/dev/null
        case "$gid" in
            0000:0000:0000:0000:0000:ffff:*) index=$i; break ;;
        esac
    done
    [ -n "$index" ] || usleep 20000
    n=$((n + 1))
done

# And for the global IPv6 address (its GID is the address itself).
prefix6=$(echo "${ip6%%/*}" | cut -d: -f1)
index6=
n=0
while [ -z "$index6" ] && [ $n -lt 100 ]; do
    for i in 0 1 2 3 4 5 6 7; do
        gid6=
        read -r gid6 < "$gids/$i" 2>/dev/null
        case "$gid6" in
            "$prefix6":*) index6=$i; break ;;
        esac
    done
    [ -n "$index6" ] || usleep 20000
    n=$((n + 1))
done

# And eth0's link-local address (rxe's default GID).
indexll=
for i in 0 1 2 3 4 5 6 7; do
    gidll=
    read -r gidll < "$gids/$i" 2>/dev/null
    case "$gidll" in
        fe80:*) indexll=$i; break ;;
    esac
done

read -r uptime _ < /proc/uptime
{
    echo "gid_index=$index"
    echo "gid=$gid"
    echo "gid6_index=$index6"
    echo "gid6=$gid6"
    echo "gidll_index=$indexll"
    echo "kernel=$(uname -r)"
    echo "uptime=$uptime"
} > /share/ready.tmp
mv /share/ready.tmp /share/ready
say "ready: rxe0 on eth0 $ip $ip6, IPv4 GID index $index, IPv6 GID index $index6, link-local GID index $indexll, uptime ${uptime}s"

cd /tmp
while [ ! -e /share/poweroff ]; do
    for job in /share/jobs/*.sh; do
        [ -f "$job" ] || continue
        id=${job##*/}
        id=${id%.sh}
        mv "$job" "/tmp/$id.sh" || continue
        (
            setsid sh -c 'echo $$ > "$1.pid"; exec sh "$2" > "$1.log" 2>&1 < /dev/null' \
                job "/share/out/$id" "/tmp/$id.sh"
            echo $? > "/share/out/$id.status.tmp"
            mv "/share/out/$id.status.tmp" "/share/out/$id.status"
        ) &
    done
    usleep 20000
done

say "powering off"
sync
umount /share
poweroff -f
