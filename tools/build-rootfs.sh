#!/usr/bin/env bash
# Build the sandbox's root file system: an ext4 image holding Debian
# bookworm's python3, busybox and ca-certificates (plus the Essential set:
# dash, bash, coreutils...), a user "sandbox" (uid/gid 1000) and, as
# /sbin/init, the file given by --init (default: guest/test-init).
#
# usage: tools/build-rootfs.sh [--init PATH] [--print-path]
#
# Two cached layers under $TINYVMM_CACHE (default /var/tmp/tinyvmm-cache):
#   rootfs-<hash>/base.tar            Debian packages + guest/rootfs/ + users;
#                                     <hash> covers this script (so the package
#                                     list), guest/rootfs/ and the apt sources.
#                                     Slow (mmdebstrap, network): built once.
#   rootfs-<hash>/base-<init>.ext4    base.tar + init, <init> = sha256 of the
#                                     init binary: a new agent costs only the
#                                     few-second mke2fs step.
# The image is sparse, has no journal, and must be treated as read-only
# (copy it, or open it read-only) since it is shared by all callers.
# No mounts: mke2fs -d copies a staging directory, owners included (we run
# as root, so chown in the staging dir is what ends up in the image).
# Progress goes to stderr; --print-path prints the image path on stdout.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${TINYVMM_CACHE:-/var/tmp/tinyvmm-cache}
init=$root/guest/test-init
print_path=0

suite=bookworm
pkgs=(python3 busybox ca-certificates)
# The host's Debian sources: bookworm + -updates + -security (mmdebstrap's
# default would be the same mirrors, but this keeps one source of truth).
sources=/etc/apt/sources.list.d/debian.sources
# Free space for the job's files; the guest runs as uid 1000, so -m 0 below
# (no root-reserved blocks) makes all of it usable.
headroom_mib=64

log() { echo "build-rootfs: $*" >&2; }
die() { log "error: $*"; exit 1; }

while (($#)); do
	case $1 in
	--init) init=${2:?--init needs a path}; shift 2 ;;
	--init=*) init=${1#--init=}; shift ;;
	--print-path) print_path=1; shift ;;
	-h | --help) sed -n '2,/^set -e/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; exit 0 ;;
	*) die "unknown argument: $1 (see --help)" ;;
	esac
done
[ -f "$init" ] || die "no init binary at $init"
[ -f "$sources" ] || die "no Debian apt sources at $sources"

# Everything but the final path goes to stderr: fd 3 is the real stdout.
exec 3>&1 1>&2

base_hash=$({
	cat "${BASH_SOURCE[0]}" "$sources"
	tar -C "$root/guest" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - rootfs
} | sha256sum | cut -c1-16)
init_hash=$(sha256sum <"$init" | cut -c1-16)
dir=$cache/rootfs-$base_hash
base_tar=$dir/base.tar
image=$dir/base-$init_hash.ext4

done_msg() {
	log "image: $image"
	if ((print_path)); then echo "$image" >&3; fi
}
if [ -f "$image" ]; then
	done_msg
	exit 0
fi

mkdir -p "$dir"
# One builder per rootfs hash; a waiter then finds the image already built.
exec 9>"$dir/.lock"
flock 9
if [ -f "$image" ]; then
	done_msg
	exit 0
fi

for p in mmdebstrap e2fsprogs; do
	if [ "$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null)" != installed ]; then
		log "installing $p"
		apt-get update -q
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$p"
	fi
done

# Temporaries live next to the results, so the closing mv's are atomic
# renames. mmdebstrap mounts /proc etc. inside its own chroot under $tmp
# while it runs: --one-file-system keeps a cleanup after a crash off them.
tmp=$(mktemp -d "$dir/.tmp.XXXXXX")
trap 'rm -rf --one-file-system "$tmp"' EXIT
chmod 755 "$tmp" # apt downloads as _apt into mmdebstrap's dir under it
stage=$tmp/stage
mkdir "$stage"
# No --xattrs: nothing installed carries xattrs or file capabilities, and
# they would double the extraction time.
tar_opts=(--numeric-owner)

if [ ! -f "$base_tar" ]; then
	log "bootstrapping Debian $suite with ${pkgs[*]} (needs the network)..."
	start=$SECONDS
	# --variant=essential: dpkg's maintainer scripts need a real Essential
	# set; the merged-usr hook stands in for the usrmerge package, which
	# would drag in perl (~50 MB). No docs, man pages, translations, or
	# gconv modules (glibc iconv charsets: python has its own codecs).
	TMPDIR=$tmp mmdebstrap --variant=essential \
		--include="$(IFS=,; echo "${pkgs[*]}")" \
		--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-exclude=/usr/share/lintian/*' \
		--dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/gconv/*' \
		"$suite" - "$sources" | tar -C "$stage" -xp "${tar_opts[@]}"
	log "bootstrapped in $((SECONDS - start)) s"

	# Nothing in the guest runs apt (not installed); the rest is leftovers
	# of the build. (mmdebstrap already emptied the apt lists and cache.)
	rm -rf "$stage"/etc/apt "$stage"/var/lib/apt "$stage"/var/cache/apt
	rm -f "$stage"/var/cache/debconf/*-old "$stage"/var/lib/dpkg/*-old
	find "$stage/var/log" -type f -delete

	# guest/rootfs/: hostname, hosts, an empty resolv.conf (mmdebstrap
	# copied the host's ones), the fstab test-init's `mount -a` reads.
	cp -R --remove-destination "$root/guest/rootfs/." "$stage/"

	echo 'sandbox:*:1000:1000:sandbox:/home/sandbox:/bin/sh' >>"$stage/etc/passwd"
	echo 'sandbox:*:1000:' >>"$stage/etc/group"
	install -d -m 0755 -o 1000 -g 1000 "$stage/home/sandbox"
	chmod 1777 "$stage/tmp"

	# busybox fills in what the Essential set lacks (mount, reboot, ps, ip,
	# vi, wget...). Every link goes into /usr/bin so that test-init's
	# PATH=/bin finds them (merged /usr: /bin and /sbin are both under
	# /usr anyway). init is ours, not busybox's. The staged busybox runs
	# here directly: the host is bookworm too. -L: links may be absolute.
	for a in $("$stage/usr/bin/busybox" --list); do
		case $a in init | linuxrc) continue ;; esac
		for d in usr/bin usr/sbin; do
			if [ -e "$stage/$d/$a" ] || [ -L "$stage/$d/$a" ]; then continue 2; fi
		done
		ln -s busybox "$stage/usr/bin/$a"
	done

	# python3.11's postinst already byte-compiled the stdlib inside the
	# chroot with bookworm's own interpreter; the .pyc files must stay
	# valid (source mtimes survive tar and mke2fs -d), or the slow guest
	# recompiles on every import: uid 1000 cannot write __pycache__.
	log "checking python in the staging dir (chroot, uid 1000)..."
	if ! out=$(chroot --userspec=1000:1000 "$stage" /usr/bin/python3 -v -c '
import json, csv, ssl
assert ssl.create_default_context().cert_store_stats()["x509_ca"], "no CAs"
print(6 * 7)' 2>"$tmp/pyv") || [ "$out" != 42 ]; then
		tail -5 "$tmp/pyv"
		die "python3 in the staging dir failed"
	fi
	if grep '^# code object from /.*\.py$' "$tmp/pyv" >&2; then
		die "python3 compiled the modules above from source: stale or missing .pyc"
	fi

	tar -C "$stage" --sort=name "${tar_opts[@]}" -cf "$tmp/base.tar" .
	mv -f "$tmp/base.tar" "$base_tar"
else
	tar -C "$stage" -xpf "$base_tar" "${tar_opts[@]}"
fi

install -m 0755 -o 0 -g 0 "$init" "$stage/usr/sbin/init"

# Content plus headroom, in whole MiB (virtio-blk wants 512-byte sectors).
content_mib=$(du -sm "$stage" | cut -f1)
size_mib=$((content_mib + headroom_mib))
log "mke2fs: $content_mib MiB of files in a $size_mib MiB image..."
# -b 4096: for a file this small mke2fs would otherwise pick 1 KiB blocks.
# -i 8192: twice the default inode count, for jobs writing many small
# files. No journal: the VMs are thrown away, never recovered, and the
# slow guest saves the journal writes.
truncate -s "${size_mib}M" "$tmp/image.ext4"
mke2fs -q -t ext4 -d "$stage" -L tinyvmm-root -E root_owner=0:0 \
	-b 4096 -i 8192 -m 0 -O ^has_journal "$tmp/image.ext4"
if ! e2fsck -fn "$tmp/image.ext4" >"$tmp/fsck.log" 2>&1; then
	cat "$tmp/fsck.log"
	die "e2fsck found errors in the new image"
fi
debugfs -R 'cat /sbin/init' "$tmp/image.ext4" 2>/dev/null | cmp -s - "$init" ||
	die "/sbin/init in the image differs from $init"

mv -f "$tmp/image.ext4" "$image"
# Each new init (agent rebuild) adds an image here: keep the newest four.
find "$dir" -maxdepth 1 -name 'base-*.ext4' -printf '%T@ %p\n' | sort -rn |
	tail -n +5 | cut -d' ' -f2- | xargs -r rm -f --
done_msg
