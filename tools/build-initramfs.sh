#!/usr/bin/env bash
# Build the tinyvmm test initramfs: a newc cpio holding busybox-static as
# /bin/busybox and /bin/sh, guest/test-init as /init, an /etc/fstab for
# its `mount -a`, and guest/blkbench.c and guest/netbench.c built static as
# /bin/blkbench and /bin/netbench (the guest ends of tools/bench-blk.sh and
# tools/bench-net.sh).
#
# Written twice into $TINYVMM_CACHE/initramfs-<hash>/ (default cache
# /var/tmp/tinyvmm-cache), keyed by the busybox-static version, test-init,
# the benchmark sources and this script:
#   initramfs.cpio     uncompressed: boots ~30 s faster on this host, where
#                      the kernel's gunzip runs emulated (~15 us per byte)
#   initramfs.cpio.gz  the same, gzip'd
# Prints that directory on stdout; progress goes to stderr.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${TINYVMM_CACHE:-/var/tmp/tinyvmm-cache}
init=$root/guest/test-init
blkbench=$root/guest/blkbench.c
netbench=$root/guest/netbench.c

log() { echo "build-initramfs: $*" >&2; }

for p in busybox-static cpio; do
	if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != installed ]; then
		log "installing $p"
		apt-get update >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y "$p" >&2
	fi
done

version=$(dpkg-query -W -f='${Version}' busybox-static)
hash=$(cat <(echo "$version") "$init" "$blkbench" "$netbench" "${BASH_SOURCE[0]}" | sha256sum | cut -c1-16)
out=$cache/initramfs-$hash
if [ -f "$out/initramfs.cpio" ] && [ -f "$out/initramfs.cpio.gz" ]; then
	echo "$out"
	exit 0
fi

log "building with busybox-static $version..."
mkdir -p "$cache"
# Built next to its final place so the closing mv is an atomic rename.
tmp=$(mktemp -d "$cache/.initramfs-$hash.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fs=$tmp/root

mkdir -p "$fs"/{bin,dev,etc,proc,sys,tmp,root}
chmod 1777 "$fs/tmp"
install -m 755 /bin/busybox "$fs/bin/busybox"
install -m 755 "$init" "$fs/init"
# The in-guest benchmark clients, static like busybox.
for b in "$blkbench" "$netbench"; do
	gcc -std=gnu11 -D_GNU_SOURCE -Wall -Wextra -Werror -Os -static -s -o "$fs/bin/$(basename "$b" .c)" "$b"
done
cat >"$fs/etc/fstab" <<'EOF'
proc /proc proc defaults 0 0
sysfs /sys sysfs defaults 0 0
devtmpfs /dev devtmpfs defaults 0 0
EOF
# Only /bin/sh: Debian's busybox sh runs every applet by name without a
# symlink (FEATURE_SH_STANDALONE), and unpacking each symlink costs ~13 ms
# of emulated kernel time (~3.5 s for all 270). For a full set inside the
# guest: busybox --install -s
ln -s busybox "$fs/bin/sh"
# The kernel's built-in initramfs has /dev/console too; this keeps the
# archive self-contained. Needs root, which the build has.
mknod -m 600 "$fs/dev/console" c 5 1

(cd "$fs" && find . -mindepth 1 -print0 | LC_ALL=C sort -z |
	cpio --null --create --format=newc --owner=0:0 --quiet) >"$tmp/initramfs.cpio"
gzip -9 -n -k "$tmp/initramfs.cpio"
rm -rf "$fs"

chmod 755 "$tmp"
# A concurrent build may have finished first; then keep its result.
mv -T "$tmp" "$out" 2>/dev/null || rm -rf "$tmp"
trap - EXIT
log "done: $out"
echo "$out"
