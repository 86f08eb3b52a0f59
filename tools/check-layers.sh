#!/usr/bin/env bash
# Check the layering of the sources (make check-layers; make test runs it).
#
# Every #include "..." in vmm/ boot/ devices/ guest/ is resolved (relative
# to the including file's folder first, then to the repository root) and
# must point to the including file's own layer, to a layer of lower rank, or
# be listed in EXCEPTIONS. An include that points upward, or sideways to
# another folder of the same rank, fails with file:line and both layers.
# A file's layer is the longest folder of LAYERS that holds it.
#
# Usage: tools/check-layers.sh   (from anywhere; exit 1 on a violation)
set -euo pipefail

# The layer table, lowest first. This is the only place the allowed
# directions are written (ARCHITECTURE.md describes them).
#   folder          rank  note
LAYERS='
guest             0     sealed
vmm/core          0
boot              1
vmm/kvm           1
devices/virtio    2
devices/legacy    3
devices/blk       3
devices/vsock     3
devices/net       3
vmm/snapshot      4
vmm/sandbox       4
vmm               5
vmm/serve         6
vmm/cli           7
'
# "sealed": the guest agent is its own program; the host side may include
# from it only what EXCEPTIONS lists (whatever the ranks say).

# Includes allowed whatever the ranks: including layer, included file.
EXCEPTIONS='
vmm               guest/protocol.h
'

# What a user of the library installs: these may include only each other.
PUBLIC_HEADERS='vmm/tinyvmm.h vmm/core/tvm_types.h'

SCAN_DIRS=(vmm boot devices guest)

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

declare -A rank sealed allowed public
while read -r folder r note; do
	[ -n "$folder" ] || continue
	rank[$folder]=$r
	[ "${note:-}" = sealed ] && sealed[$folder]=1
done <<<"$LAYERS"
while read -r layer file; do
	[ -n "$layer" ] && allowed["$layer $file"]=1
done <<<"$EXCEPTIONS"
for h in $PUBLIC_HEADERS; do
	public[$h]=1
done

# The layer holding path (longest listed folder prefix), or "" if none.
layer_of() {
	local d=${1%/*}

	[ "$d" = "$1" ] && d=.
	while :; do
		if [ -n "${rank[$d]+x}" ]; then
			echo "$d"
			return
		fi
		case $d in
		*/*) d=${d%/*} ;;
		*) echo ""; return ;;
		esac
	done
}

# path with "." and ".." folded (no symlinks resolved), relative to the root.
normalize() {
	local IFS=/ part out=()

	for part in $1; do
		case $part in
		"" | .) ;;
		..) [ ${#out[@]} -gt 0 ] && unset 'out[${#out[@]}-1]' ;;
		*) out+=("$part") ;;
		esac
	done
	echo "${out[*]}"
}

mapfile -t files < <(find "${SCAN_DIRS[@]}" -type f \( -name '*.c' -o -name '*.h' \) | sort)

violations=0
checked=0
report() {
	echo "$1" >&2
	violations=$((violations + 1))
}

declare -A layer_cache
while IFS=$'\t' read -r file line inc; do
	checked=$((checked + 1))
	dir=${file%/*}
	target=$(normalize "$dir/$inc")
	[ -f "$target" ] || target=$(normalize "$inc")
	where="$file:$line: #include \"$inc\""
	if [ ! -f "$target" ]; then
		report "$where: no such file (relative to $dir/ or the repository root)"
		continue
	fi
	if [ -n "${public[$file]+x}" ] && [ -z "${public[$target]+x}" ]; then
		report "$where: public header includes $target, which is not a public header ($PUBLIC_HEADERS)"
		continue
	fi
	[ -n "${layer_cache[$file]+x}" ] || layer_cache[$file]=$(layer_of "$file")
	[ -n "${layer_cache[$target]+x}" ] || layer_cache[$target]=$(layer_of "$target")
	from=${layer_cache[$file]}
	to=${layer_cache[$target]}
	if [ -z "$from" ]; then
		report "$file: its folder is in no layer of the table in tools/check-layers.sh"
		continue
	fi
	if [ -z "$to" ]; then
		report "$where: $target is in no layer of the table in tools/check-layers.sh"
		continue
	fi
	[ "$from" = "$to" ] && continue
	[ -n "${allowed["$from $target"]+x}" ] && continue
	rf=${rank[$from]} rt=${rank[$to]}
	if [ -n "${sealed[$to]+x}" ]; then
		report "$where: layer $from (rank $rf) includes $to (rank $rt), which others may include only as listed in EXCEPTIONS"
	elif [ "$rt" -gt "$rf" ]; then
		report "$where: upward include: layer $from (rank $rf) -> $to (rank $rt)"
	elif [ "$rt" -eq "$rf" ]; then
		report "$where: sideways include: layer $from -> $to (both rank $rf)"
	fi
done < <(awk '
	match($0, /^[ \t]*#[ \t]*include[ \t]*"[^"]+"/) {
		s = substr($0, RSTART, RLENGTH)
		sub(/^[^"]*"/, "", s)
		sub(/"$/, "", s)
		print FILENAME "\t" FNR "\t" s
	}' "${files[@]}")

if [ "$violations" -gt 0 ]; then
	echo "check-layers: $violations violation(s) of the layer table in tools/check-layers.sh" >&2
	exit 1
fi
echo "check-layers: $checked includes in ${#files[@]} files follow the layer table"
