#!/usr/bin/env bash
# `make install` into a temporary prefix, then build tests/examples/embed.c
# the way a library user does (pkg-config, the shared library) and run it:
# it boots the base image and runs a Python job. The installed binary must
# answer --version and find the installed guest with no flag.
# usage: tests/install/run.sh VMLINUX ROOTFS  (make integration passes them)
set -euo pipefail
cd "$(dirname "$0")/../.."
kernel=${1:?vmlinux}
rootfs=${2:?rootfs image}
prefix=$(mktemp -d /tmp/tinyvmm-prefix-XXXXXX)
trap 'rm -rf "$prefix"' EXIT
pass=0 fail=0
check() { # NAME: the last command's status decides
	if [ "$1" = ok ]; then pass=$((pass + 1)); echo "install: ok: $2"; else fail=$((fail + 1)); echo "install: FAILED: $2"; fi
}

make -s install PREFIX="$prefix" >/dev/null 2>"$prefix.log" || { cat "$prefix.log"; rm -f "$prefix.log"; exit 1; }
rm -f "$prefix.log"
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
cflags=$(pkg-config --cflags tinyvmm | xargs) libs=$(pkg-config --libs tinyvmm)
[ "$cflags" = "-I$prefix/include/tinyvmm" ] && check ok "pkg-config --cflags: $cflags" || check no "pkg-config --cflags: $cflags"
cc -std=c11 -Wall -Wextra -Werror tests/examples/embed.c $cflags $libs -Wl,-rpath,"$prefix/lib" -o "$prefix/embed"
# (Output taken whole before grep -q: under pipefail, grep quitting at its
# match could end the writer with SIGPIPE and fail the check at random.)
deps=$(ldd "$prefix/embed")
grep -q "libtinyvmm.so.0 => $prefix/lib/" <<<"$deps" && check ok "embed links the shared library" ||
	check no "embed links the shared library"
out=$("$prefix/embed" "$kernel" "$rootfs" 2>"$prefix/embed.err") && [ "$out" = 42 ] &&
	check ok "embed ran a job in the guest: $out" || { cat "$prefix/embed.err"; check no "embed: '$out'"; }
[ "$("$prefix/bin/tinyvmm" --version)" = "tinyvmm $(sed -n 's/^#define TVM_VERSION "\(.*\)"/\1/p' vmm/core/version.h)" ] &&
	check ok "installed tinyvmm --version" || check no "installed tinyvmm --version"
man_text=$(man -l "$prefix/share/man/man1/tinyvmm.1" 2>/dev/null || true)
grep -q -- "--no-snapshot" <<<"$man_text" || grep -q -- "no-snapshot" "$prefix/share/man/man1/tinyvmm.1" &&
	check ok "man page tinyvmm(1) lists the options" || check no "man page"
make -s uninstall PREFIX="$prefix" >/dev/null
left=$(find "$prefix" -type f ! -name embed ! -name embed.err | wc -l)
[ "$left" = 0 ] && check ok "make uninstall leaves no file" || check no "make uninstall left $left files"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
