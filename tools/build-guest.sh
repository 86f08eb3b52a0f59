#!/usr/bin/env bash
# Build (or find cached) the guest kernel and test initramfs and gather them in
# $TINYVMM_CACHE/guest-<hash>/ as vmlinux, bzImage, initramfs.cpio and
# initramfs.cpio.gz (the same archive gzip'd; the plain one boots ~30 s
# faster here, as the kernel's gunzip runs emulated).
#
# Usage: tools/build-guest.sh [--print-dir]
#   --print-dir  print that directory on stdout (the only stdout output).
# Both builds are cached, so a warm run only hashes a few files.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${TINYVMM_CACHE:-/var/tmp/tinyvmm-cache}

print_dir=0
case ${1:-} in
--print-dir) print_dir=1 ;;
"") ;;
*) echo "usage: $0 [--print-dir]" >&2; exit 2 ;;
esac

kernel=$(bash "$here/build-kernel.sh")
initramfs=$(bash "$here/build-initramfs.sh")

# The two cache directories are named by their input hashes, so their names
# (and this script, which picks the files) identify the combination.
hash=$(cat <(printf '%s\n%s\n' "$kernel" "$initramfs") "${BASH_SOURCE[0]}" |
	sha256sum | cut -c1-16)
out=$cache/guest-$hash

if [ ! -d "$out" ]; then
	tmp=$(mktemp -d "$cache/.guest-$hash.tmp.XXXXXX")
	trap 'rm -rf "$tmp"' EXIT
	# Hard links cost no space; cp is the fallback across filesystems.
	for f in "$kernel/vmlinux" "$kernel/bzImage" \
		"$initramfs/initramfs.cpio" "$initramfs/initramfs.cpio.gz"; do
		ln "$f" "$tmp/" 2>/dev/null || cp "$f" "$tmp/"
	done
	chmod 755 "$tmp"
	# Atomic rename; if a concurrent run got there first, keep its copy.
	mv -T "$tmp" "$out" 2>/dev/null || rm -rf "$tmp"
	trap - EXIT
fi

echo "build-guest: guest in $out" >&2
if [ "$print_dir" -eq 1 ]; then
	echo "$out"
fi
