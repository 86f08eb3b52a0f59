#!/usr/bin/env bash
# Check the sandbox root file system image: its files without mounting it
# (debugfs), then, booted, what a sandbox user sees.
#
# usage: tests/rootfs/check.sh [--no-boot] [IMAGE]
# Without IMAGE, builds (or reuses) the default one with tools/build-rootfs.sh
# (the agent, build/guest/tinyvmm-agent, as init) and also checks that a
# second, warm run is a fast cache hit.
# Unless --no-boot (or the image's init is not the agent), the image is then
# booted with ./tinyvmm and the kernel of tools/build-guest.sh (built on
# first use) on a 2 GiB copy-on-write drive, and one job checks, as the
# unprivileged user: HOME and cwd are /home/sandbox, pip, git, curl, node
# and npm run, `pip install` of a wheel goes to ~/.local (its command on
# PATH), npm's global prefix is ~/.local, and / was grown to the drive.
# Needs `make tinyvmm build/guest/tinyvmm-agent`; the guest boot takes
# ~20 s here and the job a minute or two (npm starts slowly); the job's
# timeout is $CHECK_TIMEOUT seconds (default 900).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
fails=0
boot=1
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

if [ "${1:-}" = --no-boot ]; then
	boot=0
	shift
fi
if (($#)); then
	img=$1
else
	agent=$root/build/guest/tinyvmm-agent
	[ -x "$agent" ] || { echo "no agent at $agent: make build/guest/tinyvmm-agent" >&2; exit 1; }
	img=$("$root/tools/build-rootfs.sh" --init "$agent" --print-path)
	start=$(date +%s%N)
	again=$("$root/tools/build-rootfs.sh" --init "$agent" --print-path 2>/dev/null)
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
/etc/pip.conf 0644 0 0
/etc/npmrc 0644 0 0
EOF

for f in /usr/bin/busybox /usr/bin/sh /usr/bin/ls /usr/bin/cat /usr/bin/mount \
	/usr/bin/reboot /usr/bin/sha256sum /usr/bin/env /etc/fstab \
	/etc/ssl/certs/ca-certificates.crt \
	/usr/lib/python3.11/json/__pycache__/__init__.cpython-311.pyc \
	/usr/bin/bash /usr/bin/pip /usr/bin/git /usr/bin/curl /usr/bin/node /usr/bin/npm \
	/usr/lib/python3.11/venv/__init__.py /usr/lib/locale/C.utf8/LC_CTYPE \
	/usr/bin/less /usr/bin/ps /usr/bin/unzip /usr/bin/xz /etc/services; do
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
check "sandbox's shell is bash" grep -qx 'sandbox:.*:/bin/bash' <<<"$passwd"
check "pip.conf lets pip install" grep -qx 'break-system-packages = true' <<<"$(dbg 'cat /etc/pip.conf')"
# shellcheck disable=SC2016 # the literal ${HOME} npm expands
check "npmrc puts npm -g into ~/.local" grep -qxF 'prefix=${HOME}/.local' <<<"$(dbg 'cat /etc/npmrc')"

# The agent grows / online at boot: that needs resize_inode (reserved GDT
# blocks) and no sparse_super2 (the kernel refuses to resize those).
sb=$(dumpe2fs -h "$img" 2>/dev/null)
features=$(sed -n 's/^Filesystem features: *//p' <<<"$sb")
gdt=$(sed -n 's/^Reserved GDT blocks: *//p' <<<"$sb")
no_feature() { ! grep -qw "$1" <<<"$features"; }
check "resize_inode feature" grep -qw resize_inode <<<"$features"
check "no sparse_super2 feature" no_feature sparse_super2
check "reserved GDT blocks (${gdt:-none})" [ "${gdt:-0}" -gt 0 ]

# A wheel with a console script, made in $1: pip in the guest must not need
# the network.
make_wheel() {
	python3 - "$1" <<'PY'
import base64, hashlib, sys, zipfile
files = {
    "tvmcheck/__init__.py": "def main():\n    print('tvmcheck ok')\n",
    "tvmcheck-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: tvmcheck\nVersion: 1.0\n",
    "tvmcheck-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: check.sh\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    "tvmcheck-1.0.dist-info/entry_points.txt": "[console_scripts]\ntvmcheck = tvmcheck:main\n",
}
record = []
for name, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(text.encode())}")
record.append("tvmcheck-1.0.dist-info/RECORD,,")
with zipfile.ZipFile(sys.argv[1] + "/tvmcheck-1.0-py3-none-any.whl", "w") as z:
    for name, text in files.items():
        z.writestr(name, text)
    z.writestr("tvmcheck-1.0.dist-info/RECORD", "\n".join(record) + "\n")
PY
}

# The job: the bare `echo $HOME; pwd` first, then one "ok   NAME" or
# "FAIL NAME" line per check (GUEST_CHECKS of them).
GUEST_CHECKS=14
# shellcheck disable=SC2016 # expanded in the guest
guest_script='echo $HOME; pwd
t() { if o=$("$@" 2>&1); then echo "ok   $*: $(echo "$o" | head -1)"; else echo "FAIL $*: $(echo "$o" | tail -1)"; fi; }
[ "$(id -u)" = 1000 ] && echo "ok   uid 1000" || echo "FAIL uid $(id -u)"
[ "$USER $LOGNAME $LANG" = "sandbox sandbox C.UTF-8" ] && echo "ok   USER LOGNAME LANG" ||
	echo "FAIL USER LOGNAME LANG: $USER $LOGNAME $LANG"
case $PATH in /home/sandbox/.local/bin:*) echo "ok   ~/.local/bin first on PATH" ;; *) echo "FAIL PATH $PATH" ;; esac
t pip --version
t git --version
t curl --version
t node --version
t npm --version
t python3 -m venv --help
t pip install --no-index /tmp/tvmcheck-1.0-py3-none-any.whl
t tvmcheck
[ "$(command -v tvmcheck)" = /home/sandbox/.local/bin/tvmcheck ] && echo "ok   pip install: command in ~/.local/bin" ||
	echo "FAIL tvmcheck at $(command -v tvmcheck)"
p=$(npm config get prefix 2>&1)
[ "$p" = /home/sandbox/.local ] && echo "ok   npm prefix ~/.local" || echo "FAIL npm prefix: $p"
kib=$(df -kP / | awk "NR == 2 {print \$2}")
[ "$kib" -gt 1800000 ] && echo "ok   / grown to the 2 GiB drive ($kib KiB)" || echo "FAIL / is $kib KiB"'

# Booted, as the unprivileged user, on a drive larger than the image.
boot_checks() {
	local tmp kernel out rc=0 line1 line2 rest
	# (debugfs may die of SIGPIPE once head has its 4 bytes: not an error.)
	if [ "$({ dbg 'cat /sbin/init' || true; } | head -c 4 | od -An -c | tr -d ' ')" != '177ELF' ]; then
		echo "skip boot checks: /sbin/init is not the agent (build the image with --init build/guest/tinyvmm-agent)"
		return
	fi
	if [ ! -x "$root/tinyvmm" ]; then
		check "boot checks: ./tinyvmm is built (make tinyvmm)" false
		return
	fi
	kernel=$(bash "$root/tools/build-guest.sh" --print-dir)/vmlinux
	tmp=$(mktemp -d)
	# A sparse copy, 2 GiB: the drive is larger than the file system.
	cp --sparse=always "$img" "$tmp/disk.ext4"
	truncate -s 2G "$tmp/disk.ext4"
	make_wheel "$tmp"
	# --no-snapshot: a template of this throwaway drive would only fill the
	# cache.
	out=$("$root/tinyvmm" run --no-snapshot --kernel "$kernel" --rootfs "$tmp/disk.ext4" \
		--put "$tmp/tvmcheck-1.0-py3-none-any.whl:/tmp/tvmcheck-1.0-py3-none-any.whl" \
		--timeout "${CHECK_TIMEOUT:-900}" -- bash -c "$guest_script" 2>"$tmp/err") || rc=$?
	check "boot job exit status $rc" [ "$rc" -eq 0 ]
	[ "$rc" -eq 0 ] || sed 's/^/  stderr: /' "$tmp/err"
	line1=$(sed -n 1p <<<"$out")
	line2=$(sed -n 2p <<<"$out")
	rest=$(sed -n '3,$p' <<<"$out")
	check "echo \$HOME: $line1" [ "$line1" = /home/sandbox ]
	check "pwd: $line2" [ "$line2" = /home/sandbox ]
	[ -z "$rest" ] || echo "$rest"
	fails=$((fails + $(grep -c '^FAIL' <<<"$rest" || true)))
	check "all $GUEST_CHECKS in-guest checks passed" [ "$(grep -c '^ok ' <<<"$rest" || true)" -eq "$GUEST_CHECKS" ]
	rm -rf "$tmp"
}
if ((boot)); then
	boot_checks
fi

if ((fails)); then
	echo "$fails check(s) failed: $img"
	exit 1
fi
echo "all checks passed: $img"
