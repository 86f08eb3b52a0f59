#!/usr/bin/env bash
# Build the sandbox's root file system: an ext4 image of Debian bookworm with
# what a sandbox user expects (python3 with pip and venv, git, curl, bash,
# Node.js with npm, procps, less...; see pkgs below), a user "sandbox"
# (uid/gid 1000, home /home/sandbox, shell bash) and, as /sbin/init, the
# file given by --init (default: guest/test-init).
#
# usage: tools/build-rootfs.sh [--init PATH] [--print-path]
#        tools/build-rootfs.sh [--init PATH] [--print-path] [--out FILE]
#            [--packages a,b,c] [--pip x,y] [--npm z] [--copy LOCAL:GUEST]...
#
# The second form builds a user image: the base image plus more Debian
# packages, pip packages (installed system-wide, /usr/local), npm packages
# (installed globally, /usr/local) and local files or directories copied in
# (owned by root, or by sandbox under /home/sandbox; GUEST is the copy's
# path, a directory's contents merge into an existing one, a file copied to
# GUEST/ keeps its name; copies come before the pip and npm steps, so a
# copied wheel or tarball can be installed). Each option may be given more
# than once; --out FILE gets a copy of the result (else only the cached
# image is made). pip and npm need the network while the image is built; a
# Debian package that does not exist is one error line naming it, as is a
# failed pip or npm install.
#
# pip for the unprivileged user: /etc/pip.conf (guest/rootfs/) sets
# break-system-packages, so Debian's "externally managed" marker does not
# stop `pip install x`; as uid 1000 the system site-packages are not
# writable, so pip installs into ~/.local (its automatic user fallback:
# "Defaulting to user installation") and ~/.local/bin is on the jobs' PATH.
# No `user = true`: that would break pip inside a venv (`python3 -m venv`
# works as usual, and there pip installs into the venv). npm likewise:
# /etc/npmrc puts `npm install -g` into ~/.local.
#
# Two cached layers under $TINYVMM_CACHE (default /var/tmp/tinyvmm-cache):
#   rootfs-<hash>/base.tar            Debian packages + guest/rootfs/ + users
#                                     (+ the user image's additions); <hash>
#                                     covers this script (so the package
#                                     list), guest/rootfs/, the apt sources
#                                     and every option above (copied files
#                                     by content). Slow (mmdebstrap,
#                                     network): built once.
#   rootfs-<hash>/base-<init>.ext4    base.tar + init, <init> = sha256 of the
#                                     init binary: a new agent costs only the
#                                     few-second mke2fs step.
# The image is sparse, has no journal, and must be treated as read-only
# (copy it, or open it read-only) since it is shared by all callers. It
# keeps resize_inode (and no sparse_super2), so the guest agent can grow it
# online to a larger drive (EXT4_IOC_RESIZE_FS) at boot.
# No mounts: mke2fs -d copies a staging directory, owners included (we run
# as root, so chown in the staging dir is what ends up in the image).
# Progress goes to stderr; --print-path prints the image path (or FILE) on
# stdout.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${TINYVMM_CACHE:-/var/tmp/tinyvmm-cache}
init=$root/guest/test-init
print_path=0
out=

suite=bookworm
# build-essential (gcc, g++, make, libc6-dev) is left out: it would make the
# image and every cold build much bigger (measured in README), and pip finds
# wheels for the common packages (pandas, numpy). A user image can add it:
# --packages build-essential.
pkgs=(python3 python3-pip python3-venv busybox ca-certificates bash git curl
	nodejs npm procps less zip unzip xz-utils netbase tzdata)
extra_pkgs=() pip_pkgs=() npm_pkgs=() copies=()
# The host's Debian sources: bookworm + -updates + -security (mmdebstrap's
# default would be the same mirrors, but this keeps one source of truth).
sources=/etc/apt/sources.list.d/debian.sources
# Free space for the job's files when the drive is not larger than the
# image (the agent grows the file system to the drive); the guest runs as
# uid 1000, so -m 0 below (no root-reserved blocks) makes all of it usable.
headroom_mib=64

log() { echo "build-rootfs: $*" >&2; }
die() { log "error: $*"; exit 1; }

# add_list ARRAY OPTION VALUE: append VALUE's comma-separated names to ARRAY,
# checked against PATTERN (what the tool accepts as a plain name).
add_list() {
	local -n arr=$1
	local opt=$2 pattern=$3 name
	local -a names
	IFS=, read -r -a names <<<"$4"
	((${#names[@]})) || die "$opt needs a name"
	for name in "${names[@]}"; do
		[[ $name =~ $pattern ]] || die "$opt: bad name '$name'"
		arr+=("$name")
	done
}

while (($#)); do
	case $1 in
	--init) init=${2:?--init needs a path}; shift 2 ;;
	--init=*) init=${1#--init=}; shift ;;
	--print-path) print_path=1; shift ;;
	--out) out=${2:?--out needs a file}; shift 2 ;;
	--out=*) out=${1#--out=}; shift ;;
	# Debian package names; pip and npm specs also take versions, extras and
	# local files, but never a leading '-' (no options slipped in).
	--packages) add_list extra_pkgs "$1" '^[a-z0-9][a-z0-9+.-]+$' "${2?--packages needs names}"; shift 2 ;;
	--pip) add_list pip_pkgs "$1" '^[A-Za-z0-9_./][^[:space:]]*$' "${2?--pip needs names}"; shift 2 ;;
	--npm) add_list npm_pkgs "$1" '^[@A-Za-z0-9_./][^[:space:]]*$' "${2?--npm needs names}"; shift 2 ;;
	--copy)
		spec=${2?--copy needs LOCAL:GUEST}
		[[ $spec == *:/* ]] || die "--copy $spec: want LOCAL:GUEST with an absolute GUEST path"
		src=${spec%:/*} dst=/${spec##*:/}
		[ -e "$src" ] || die "--copy $spec: no file or directory $src"
		[[ $dst != */../* && $dst != */.. && $dst != / ]] || die "--copy $spec: bad guest path $dst"
		copies+=("$(realpath "$src")" "$dst")
		shift 2 ;;
	-h | --help) sed -n '2,/^set -e/{/^#/s/^# \{0,1\}//p}' "${BASH_SOURCE[0]}"; exit 0 ;;
	*) die "unknown argument: $1 (see --help)" ;;
	esac
done
[ -f "$init" ] || die "no init binary at $init"
[ -f "$sources" ] || die "no Debian apt sources at $sources"
if ((${#extra_pkgs[@]})); then
	mapfile -t extra_pkgs < <(printf '%s\n' "${extra_pkgs[@]}" | sort -u)
	pkgs+=("${extra_pkgs[@]}")
fi

# Everything but the final path goes to stderr: fd 3 is the real stdout.
exec 3>&1 1>&2

# What gets hashed is what gets installed, even if the file is rebuilt
# (make agent) while we run.
init_copy=$(mktemp)
tmp=
# shellcheck disable=SC2317 # the EXIT trap calls it
cleanup() {
	rm -f "$init_copy"
	# mmdebstrap mounts /proc etc. inside its own chroot under $tmp while
	# it runs: --one-file-system keeps a cleanup after a crash off them.
	if [ -n "$tmp" ]; then rm -rf --one-file-system "$tmp"; fi
}
trap cleanup EXIT
cp "$init" "$init_copy"

# The user image's additions, one per line, copies by content (not mtime).
spec() {
	local p
	for p in "${extra_pkgs[@]}"; do echo "package $p"; done
	for p in "${pip_pkgs[@]}"; do echo "pip $p"; done
	for p in "${npm_pkgs[@]}"; do echo "npm $p"; done
	for ((i = 0; i < ${#copies[@]}; i += 2)); do
		printf 'copy %s %s\n' "${copies[i + 1]}" "$(tar -C "$(dirname "${copies[i]}")" --sort=name \
			--mtime=@0 --owner=0 --group=0 --numeric-owner -cf - "$(basename "${copies[i]}")" |
			sha256sum | cut -c1-64)"
	done
}
base_hash=$({
	cat "${BASH_SOURCE[0]}" "$sources"
	tar -C "$root/guest" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf - rootfs
	spec
} | sha256sum | cut -c1-16)
init_hash=$(sha256sum <"$init_copy" | cut -c1-16)
dir=$cache/rootfs-$base_hash
base_tar=$dir/base.tar
image=$dir/base-$init_hash.ext4

# The result: the cached image, or a sparse copy of it at --out (written
# next to it and renamed, so FILE is never half-written).
done_msg() {
	local result=$image
	if [ -n "$out" ]; then
		cp --sparse=always --reflink=auto "$image" "$out.tmp.$$"
		mv -f "$out.tmp.$$" "$out"
		result=$out
	fi
	log "image: $result"
	if ((print_path)); then echo "$result" >&3; fi
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
# renames.
tmp=$(mktemp -d "$dir/.tmp.XXXXXX")
chmod 755 "$tmp" # apt downloads as _apt into mmdebstrap's dir under it
stage=$tmp/stage
mkdir "$stage"
# No --xattrs: nothing installed carries xattrs or file capabilities, and
# they would double the extraction time.
tar_opts=(--numeric-owner)

# The user image's copies, pip and npm steps, as one script that
# mmdebstrap runs on its chroot ($1) with /proc, /dev and the host's
# resolv.conf in place.
# shellcheck disable=SC2016 # $r and $e are the script's own variables
write_customize() {
	local i src dst owner env_keep=() v
	# pip and npm get a clean environment (ours may carry a host's pip
	# settings), but the proxy settings they may need.
	for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
		if [ -n "${!v:-}" ]; then env_keep+=("$v=${!v}"); fi
	done
	echo 'set -eu; r=$1'
	printf 'e=(env -i HOME=/root LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'
	for v in "${env_keep[@]}"; do printf ' %q' "$v"; done
	printf ')\n'
	# A step that fails says which, for explain_failure.
	echo 'step() { local s=$1; shift; "$@" || { echo "build-rootfs-step-failed: $s" >&2; exit 1; }; }'
	# copy_in SRC DST OWNER: the tree may hold absolute symlinks (Debian's
	# /var/run, /etc/alternatives/*, earlier copies), so DST is resolved
	# only inside the chroot: SRC goes in as a tar stream, unpacked, copied
	# and chowned by the chroot's own tools. (A host-side cp to "$r"DST
	# would follow them onto the host's files.)
	echo 'copy_in() {'
	echo '	tar -C "$(dirname "$1")" -cf - -- "$(basename "$1")" | chroot "$r" /bin/sh -c '"'"'set -e'
	echo '		t=$(mktemp -d); tar -xf - -C "$t" --no-same-owner; mkdir -p "$(dirname "$1")"'
	echo '		cp -aT "$t/$2" "$1"; chown -R "$3" "$1"; rm -rf "$t"'"'"' copy-in "$2" "$(basename "$1")" "$3"'
	echo '}'
	for ((i = 0; i < ${#copies[@]}; i += 2)); do
		src=${copies[i]} dst=${copies[i + 1]}
		# GUEST is the copy's own path; a file into GUEST/ keeps its name.
		if [[ $dst == */ ]]; then dst=${dst%/}/$(basename "$src"); fi
		owner=0:0
		[[ $dst/ != /home/sandbox/* ]] || owner=1000:1000
		printf 'step copy copy_in %q %q %s\n' "$src" "$dst" "$owner"
	done
	if ((${#pip_pkgs[@]})); then
		printf 'echo %q >&2\n' "build-rootfs: pip install ${pip_pkgs[*]}"
		printf 'step pip chroot "$r" "${e[@]}" python3 -m pip install --no-cache-dir --break-system-packages'
		printf ' --root-user-action=ignore --disable-pip-version-check --no-warn-script-location --no-input --'
		printf ' %q' "${pip_pkgs[@]}"
		printf '\n'
	fi
	if ((${#npm_pkgs[@]})); then
		printf 'echo %q >&2\n' "build-rootfs: npm install -g ${npm_pkgs[*]}"
		printf 'step npm chroot "$r" "${e[@]}" npm install --global --prefix=/usr/local --no-fund --no-audit'
		printf ' --no-update-notifier --'
		printf ' %q' "${npm_pkgs[@]}"
		printf '\n'
		echo 'rm -rf "$r/root/.npm"'
	fi
}

# One line for what went wrong, from mmdebstrap's log: apt's words for
# names it does not know, pip's last error, npm's message; else the log's
# end.
explain_failure() {
	local logf=$1 bad step
	bad=$(sed -n "s/^E: Unable to locate package \(.*\)$/\1/p; s/^E: Package '\(.*\)' has no installation candidate$/\1/p" "$logf" | head -1)
	if [ -n "$bad" ]; then
		die "no Debian package named '$bad' in $suite (--packages)"
	fi
	step=$(sed -n 's/^build-rootfs-step-failed: //p' "$logf" | head -1)
	case $step in
	pip)
		bad=$(grep '^ERROR: ' "$logf" | tail -1)
		die "pip install failed: ${bad#ERROR: } (--pip; log: $logf)" ;;
	npm)
		bad=$(grep '^npm ERR! ' "$logf" | grep -v '^npm ERR! \(code\|syscall\|errno\|$\)' | head -1)
		die "npm install failed: ${bad#npm ERR! } (--npm; log: $logf)" ;;
	copy)
		die "copying failed: $(grep -m1 '^cp: ' "$logf") (--copy)" ;;
	esac
	tail -n 20 "$logf" >&2
	die "mmdebstrap failed (full log: $logf)"
}

if [ ! -f "$base_tar" ]; then
	log "bootstrapping Debian $suite with ${pkgs[*]} (needs the network; log: $dir/build.log)..."
	start=$SECONDS
	hooks=()
	if ((${#copies[@]} + ${#pip_pkgs[@]} + ${#npm_pkgs[@]})); then
		write_customize >"$tmp/customize.sh"
		hooks=(--customize-hook="bash $(printf %q "$tmp/customize.sh") \"\$1\"")
	fi
	# --variant=essential: dpkg's maintainer scripts need a real Essential
	# set; the merged-usr hook stands in for the usrmerge package, which
	# would drag in perl (~50 MB; git brings perl anyway now). No
	# Recommends (mmdebstrap's default), docs, man pages, translations, or
	# gconv modules (glibc iconv charsets: python has its own codecs).
	if ! TMPDIR=$tmp mmdebstrap --variant=essential \
		--include="$(IFS=,; echo "${pkgs[*]}")" \
		--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
		--dpkgopt='path-exclude=/usr/share/doc/*' \
		--dpkgopt='path-exclude=/usr/share/man/*' \
		--dpkgopt='path-exclude=/usr/share/info/*' \
		--dpkgopt='path-exclude=/usr/share/locale/*' \
		--dpkgopt='path-exclude=/usr/share/lintian/*' \
		--dpkgopt='path-exclude=/usr/lib/x86_64-linux-gnu/gconv/*' \
		"${hooks[@]}" \
		"$suite" "$tmp/root.tar" "$sources" >"$dir/build.log" 2>&1; then
		explain_failure "$dir/build.log"
	fi
	tar -C "$stage" -xpf "$tmp/root.tar" "${tar_opts[@]}"
	rm -f "$tmp/root.tar"
	log "bootstrapped in $((SECONDS - start)) s"

	# Nothing in the guest runs apt (not installed); the rest is leftovers
	# of the build. (mmdebstrap already emptied the apt lists and cache.)
	rm -rf "$stage"/etc/apt "$stage"/var/lib/apt "$stage"/var/cache/apt
	rm -f "$stage"/var/cache/debconf/*-old "$stage"/var/lib/dpkg/*-old
	find "$stage/var/log" -type f -delete

	# guest/rootfs/: hostname, hosts, an empty resolv.conf (mmdebstrap
	# copied the host's ones), the fstab test-init's `mount -a` reads,
	# pip.conf and npmrc (see the top of this file).
	cp -R --remove-destination "$root/guest/rootfs/." "$stage/"

	echo 'sandbox:*:1000:1000:sandbox:/home/sandbox:/bin/bash' >>"$stage/etc/passwd"
	echo 'sandbox:*:1000:' >>"$stage/etc/group"
	install -d -m 0755 -o 1000 -g 1000 "$stage/home/sandbox"
	chmod 1777 "$stage/tmp"

	# busybox fills in what the Essential set lacks (mount, reboot, ip,
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
	if ! out_py=$(chroot --userspec=1000:1000 "$stage" /usr/bin/python3 -v -c '
import json, csv, ssl
assert ssl.create_default_context().cert_store_stats()["x509_ca"], "no CAs"
print(6 * 7)' 2>"$tmp/pyv") || [ "$out_py" != 42 ]; then
		tail -5 "$tmp/pyv"
		die "python3 in the staging dir failed"
	fi
	if grep '^# code object from /.*\.py$' "$tmp/pyv" >&2; then
		die "python3 compiled the modules above from source: stale or missing .pyc"
	fi
	# The tools a sandbox user reaches for first, as that user.
	for t in "pip --version" "git --version" "curl --version" "node --version" "npm --version"; do
		# shellcheck disable=SC2086 # $t is a command and its argument
		chroot --userspec=1000:1000 "$stage" /usr/bin/env -i HOME=/home/sandbox \
			PATH=/usr/local/bin:/usr/bin $t >/dev/null 2>"$tmp/tool.err" ||
			{ cat "$tmp/tool.err"; die "'$t' failed in the staging dir"; }
	done

	tar -C "$stage" --sort=name "${tar_opts[@]}" -cf "$tmp/base.tar" .
	mv -f "$tmp/base.tar" "$base_tar"
	log "base layer: $(du -m "$base_tar" | cut -f1) MiB"
else
	tar -C "$stage" -xpf "$base_tar" "${tar_opts[@]}"
fi

install -m 0755 -o 0 -g 0 "$init_copy" "$stage/usr/sbin/init"

# Content plus headroom, in whole MiB (virtio-blk wants 512-byte sectors).
content_mib=$(du -sm "$stage" | cut -f1)
size_mib=$((content_mib + headroom_mib))
log "mke2fs: $content_mib MiB of files in a $size_mib MiB image..."
# -b 4096: for a file this small mke2fs would otherwise pick 1 KiB blocks.
# -i 8192: twice the default inode count, for jobs writing many small
# files. No journal: the VMs are thrown away, never recovered, and the
# slow guest saves the journal writes. resize_inode (mke2fs's default:
# reserved GDT blocks for 1024 times the size) and no sparse_super2: the
# kernel's online resize needs both.
truncate -s "${size_mib}M" "$tmp/image.ext4"
mke2fs -q -t ext4 -d "$stage" -L tinyvmm-root -E root_owner=0:0 \
	-b 4096 -i 8192 -m 0 -O ^has_journal,resize_inode,^sparse_super2 "$tmp/image.ext4"
if ! e2fsck -fn "$tmp/image.ext4" >"$tmp/fsck.log" 2>&1; then
	cat "$tmp/fsck.log"
	die "e2fsck found errors in the new image"
fi
debugfs -R 'cat /sbin/init' "$tmp/image.ext4" 2>/dev/null | cmp -s - "$init_copy" ||
	die "/sbin/init in the image differs from $init"

mv -f "$tmp/image.ext4" "$image"
rm -f "$dir/build.log"
# Each new init (agent rebuild) adds an image here: keep the newest four.
find "$dir" -maxdepth 1 -name 'base-*.ext4' -printf '%T@ %p\n' | sort -rn |
	tail -n +5 | cut -d' ' -f2- | xargs -r rm -f --
done_msg
