#!/usr/bin/env bash
# Check what the library exports (make check-symbols): every global symbol
# defined in the archive must start with tvm_ (internals are hidden and
# localized, see the Makefile), and every function declared TVM_API in the
# public headers must be among them.
#
# Usage: tools/check-symbols.sh LIBRARY.a
set -euo pipefail

lib=${1:?usage: $0 LIBRARY.a}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
public_headers=("$root/vmm/tinyvmm.h" "$root/vmm/core/tvm_types.h")

exported=$(nm -g --defined-only "$lib" | awk 'NF == 3 { print $3 }' | sort -u)
stray=$(grep -v '^tvm_' <<<"$exported" || true)
# A TVM_API declaration: the name right before the first "(" on its line.
declared=$(sed -n 's/^TVM_API[^(]*[ *]\([A-Za-z_][A-Za-z0-9_]*\)(.*/\1/p' "${public_headers[@]}" | sort -u)
missing=$(comm -23 <(printf '%s\n' "$declared") <(printf '%s\n' "$exported"))

status=0
if [ -n "$stray" ]; then
	echo "check-symbols: $lib exports names outside the tvm_ API:" >&2
	sed 's/^/  /' <<<"$stray" >&2
	status=1
fi
if [ -n "$missing" ]; then
	echo "check-symbols: $lib does not export these TVM_API functions of the public headers:" >&2
	sed 's/^/  /' <<<"$missing" >&2
	status=1
fi
if [ -z "$declared" ]; then
	echo "check-symbols: no TVM_API declaration found in ${public_headers[*]}" >&2
	status=1
fi
if [ "$status" -eq 0 ]; then
	echo "check-symbols: $lib exports $(wc -l <<<"$exported") symbols, all tvm_*, every TVM_API function among them"
fi
exit "$status"
