#!/usr/bin/env bash
# Build the tinyvmm guest kernel (vmlinux and bzImage) from Debian's
# linux-source-6.1 with guest/kernel.config (merged on top of tinyconfig) and
# guest/patches/*.patch.
#
# The result is cached in $TINYVMM_CACHE/kernel-<hash>/ (default cache
# /var/tmp/tinyvmm-cache), keyed by the source package version, the config
# fragment, the patches and this script, so a warm run does no apt, no
# extraction and no compile. Prints that directory on stdout; progress goes
# to stderr.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${TINYVMM_CACHE:-/var/tmp/tinyvmm-cache}
fragment=$root/guest/kernel.config
patches=("$root"/guest/patches/*.patch)
packages=(linux-source-6.1 flex bison bc libelf-dev libssl-dev build-essential cpio)

log() { echo "build-kernel: $*" >&2; }

installed() {
	[ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

# Install the build dependencies only if one is missing, so a warm run
# never touches apt.
missing=()
for p in "${packages[@]}"; do
	installed "$p" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	log "installing ${missing[*]}"
	apt-get update >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}" >&2
fi

version=$(dpkg-query -W -f='${Version}' linux-source-6.1)
hash=$(cat <(echo "$version") "$fragment" "${patches[@]}" "${BASH_SOURCE[0]}" |
	sha256sum | cut -c1-16)
out=$cache/kernel-$hash

mkdir -p "$cache"
# One builder per hash; others wait and then find the finished result.
exec 9>"$cache/.kernel-$hash.lock"
flock 9
if [ -f "$out/vmlinux" ]; then
	echo "$out"
	exit 0
fi

# Leftovers of a build that was killed outright (the lock says none runs).
rm -rf "$cache/.kernel-$hash".tmp.*
# Build next to the final place so the closing mv is an atomic rename:
# an interrupted build never looks finished.
tmp=$(mktemp -d "$cache/.kernel-$hash.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
src=$tmp/src
buildlog=$tmp/build.log

log "extracting linux-source $version..."
mkdir "$src"
tar -xf /usr/src/linux-source-6.1.tar.xz -C "$src" --strip-components=1

for p in "${patches[@]}"; do
	log "applying $(basename "$p")"
	patch -d "$src" -p1 --batch --forward --quiet <"$p" >&2
done

log "configuring..."
(
	cd "$src"
	make tinyconfig
	scripts/kconfig/merge_config.sh -m .config "$fragment"
	make olddefconfig
) >"$buildlog" 2>&1

# Kconfig silently drops options whose dependencies are unmet: check that
# every line of the fragment made it into the final .config.
bad=0
while IFS= read -r line; do
	case $line in
	CONFIG_*=*)
		grep -qxF "$line" "$src/.config" || { log "config: wanted $line"; bad=1; } ;;
	"# CONFIG_"*" is not set")
		opt=${line#\# }
		opt=${opt%% *}
		if grep -q "^$opt=" "$src/.config"; then
			log "config: wanted $opt unset"
			bad=1
		fi ;;
	esac
done <"$fragment"
if [ "$bad" -ne 0 ]; then
	log "guest/kernel.config does not apply cleanly (see messages above)"
	exit 1
fi

log "compiling with $(nproc) jobs (takes ~10 min on 2 cores; log: $buildlog)..."
start=$SECONDS
if ! nice -n 10 make -C "$src" -j"$(nproc)" bzImage >>"$buildlog" 2>&1; then
	cp "$buildlog" "$cache/kernel-$hash.failed.log"
	tail -n 40 "$buildlog" >&2
	log "FAILED; full log kept in $cache/kernel-$hash.failed.log"
	exit 1
fi
log "compiled in $((SECONDS - start)) s"

# Keep only what the VMM and debugging need; the tree is ~1.5 GB.
cp "$src/vmlinux" "$src/arch/x86/boot/bzImage" "$tmp/"
cp "$src/.config" "$tmp/.config"
rm -rf "$src"
chmod 755 "$tmp"
mv -T "$tmp" "$out"
trap - EXIT
rm -f "$cache/kernel-$hash.failed.log"
log "done: $out"
echo "$out"
