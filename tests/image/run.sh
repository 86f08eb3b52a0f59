#!/usr/bin/env bash
# `tinyvmm image build --packages jq` (issue 11): the user image is the
# base image plus jq, built like it (cached in $TINYVMM_CACHE after the
# first run, a few minutes with the network), and boots as --rootfs with
# jq working as the sandbox user and the disk grown by --disk-size. A
# package name Debian does not have is checked by hand only (the failed
# bootstrap is not cached: minutes each time).
# usage: tests/image/run.sh VMLINUX  (make integration passes it)
set -euo pipefail
cd "$(dirname "$0")/../.."
kernel=${1:?vmlinux}
tmp=$(mktemp -d /tmp/tinyvmm-image-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # STATUS NAME
	if [ "$1" = ok ]; then echo "image: ok: $2"; else fail=$((fail + 1)); echo "image: FAILED: $2"; fi
}

if ./tinyvmm image build --out "$tmp/jq.ext4" --packages jq 2>"$tmp/build.err"; then
	check ok "image build --packages jq: $(($(stat -c %s "$tmp/jq.ext4") >> 20)) MiB"
else
	sed 's/^/  /' "$tmp/build.err"
	check no "image build --packages jq"
fi
if [ -f "$tmp/jq.ext4" ]; then
	out=$(./tinyvmm run --kernel "$kernel" --rootfs "$tmp/jq.ext4" --disk-size 1G --no-snapshot -- \
		sh -c 'jq --version; echo "{\"a\":[1,2]}" | jq -c .a; id -u; df -kP / | awk "NR == 2 {print \$2}"' \
		2>"$tmp/run.err") || true
	mapfile -t line <<<"$out"
	[[ ${line[0]:-} == jq-* ]] && check ok "jq --version in the image: ${line[0]}" ||
		{ sed 's/^/  /' "$tmp/run.err"; check no "jq --version: '${line[0]:-}'"; }
	[ "${line[1]:-}" = "[1,2]" ] && check ok "jq filters" || check no "jq filters: '${line[1]:-}'"
	[ "${line[2]:-}" = 1000 ] && check ok "as the sandbox user" || check no "uid '${line[2]:-}'"
	kib=${line[3]:-0}
	[ "$kib" -gt 900000 ] && [ "$kib" -le 1048576 ] && check ok "/ grown to --disk-size 1G: $kib KiB" ||
		check no "/ is '$kib' KiB, want about 1 GiB"
fi
[ "$fail" -eq 0 ] || exit 1
