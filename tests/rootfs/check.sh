#!/usr/bin/env bash
# Check the sandbox root file system image, without mounting it (debugfs).
#
# usage: tests/rootfs/check.sh [IMAGE]
# Without IMAGE, builds (or reuses) the default one with tools/build-rootfs.sh
# and also checks that a second, warm run is a fast cache hit.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fails=0
# check DESCRIPTION COMMAND...: one result line per check, never exits.
check() {
	local what=$1
	shift
	if "$@"; then
		echo "ok   $what"
	else
		echo "FAIL $what"
		fails=$((fails + 1))
	fi
}

if (($#)); then
	img=$1
else
	img=$("$root/tools/build-rootfs.sh" --print-path)
	start=$(date +%s%N)
	again=$("$root/tools/build-rootfs.sh" --print-path 2>/dev/null)
	ms=$((($(date +%s%N) - start) / 1000000))
	check "warm run returns the same image" [ "$again" = "$img" ]
	check "warm run is a cache hit ($ms ms)" [ "$ms" -lt 2000 ]
fi
[ -f "$img" ] || { echo "no image at $img" >&2; exit 1; }

dbg() { debugfs -R "$1" "$img" 2>/dev/null; }
exists() { dbg "stat $1" | grep -q '^Inode:'; }
absent() { ! exists "$1"; }
# "MODE UID GID" of a path, from debugfs stat.
owner_mode() {
	dbg "stat $1" | awk '{for (i = 1; i < NF; i++) if ($i == "Mode:") m = $(i + 1)}
		/^User:/ {print m, $2, $4; exit}'
}
# Entries of a directory but . and ..; ls -p prints /ino/mode/uid/gid/name/size/.
entries() { dbg "ls -p $1" | awk -F/ 'NF > 5 && $6 != "." && $6 != ".."' | wc -l; }

fsck_clean() { e2fsck -fn "$img" >/dev/null 2>&1; }
check "e2fsck -fn finds nothing" fsck_clean
size=$(stat -c %s "$img")
check "size $((size >> 20)) MiB is whole MiB" [ $((size % 1048576)) -eq 0 ]
label=$(dumpe2fs -h "$img" 2>/dev/null | sed -n 's/^Filesystem volume name: *//p')
check "label '$label'" [ "$label" = tinyvmm-root ]

while read -r path want; do
	got=$(owner_mode "$path")
	check "$path: '$got' (want '$want')" [ "$got" = "$want" ]
done <<'EOF'
/sbin/init 0755 0 0
/usr/bin/python3.11 0755 0 0
/home/sandbox 0755 1000 1000
/tmp 01777 0 0
/root 0700 0 0
/etc/passwd 0644 0 0
EOF

for f in /usr/bin/busybox /usr/bin/sh /usr/bin/ls /usr/bin/cat /usr/bin/mount \
	/usr/bin/reboot /usr/bin/sha256sum /usr/bin/env /etc/fstab \
	/etc/ssl/certs/ca-certificates.crt \
	/usr/lib/python3.11/json/__pycache__/__init__.cpython-311.pyc; do
	check "has $f" exists "$f"
done
for d in /usr/share/doc /usr/share/man /usr/share/locale; do
	n=$(entries "$d")
	check "$d is empty ($n entries)" [ "$n" -eq 0 ]
done
for d in /etc/apt /var/lib/apt /var/cache/apt; do
	check "no $d" absent "$d"
done

check "/etc/resolv.conf is empty" [ -z "$(dbg 'cat /etc/resolv.conf')" ]
check "/etc/hostname is sandbox" [ "$(dbg 'cat /etc/hostname')" = sandbox ]
hosts=$(dbg 'cat /etc/hosts')
check "/etc/hosts has localhost" grep -q '^127\.0\.0\.1[[:space:]]*localhost' <<<"$hosts"
passwd=$(dbg 'cat /etc/passwd')
check "root is uid 0" grep -qx 'root:[^:]*:0:0:.*' <<<"$passwd"
check "sandbox is 1000:1000, home /home/sandbox" \
	grep -qx 'sandbox:[^:]*:1000:1000:[^:]*:/home/sandbox:.*' <<<"$passwd"
check "group sandbox is 1000" grep -qx 'sandbox:[^:]*:1000:.*' <<<"$(dbg 'cat /etc/group')"

if ((fails)); then
	echo "$fails check(s) failed: $img"
	exit 1
fi
echo "all checks passed: $img"
