#!/usr/bin/env bash
# Job benchmark: from `tinyvmm run` to a job's first output byte and to its
# result (for `true` and `python3 -c pass`), then vsock throughput both ways
# on one running VM. Reports; asserts nothing. Each run is what a user's
# `tinyvmm run` does: the first one of a new binary boots and makes the
# template snapshot, the others restore it (bench-restore.sh separates the
# VMM's share); RUNS (default 1) of each job, a row each. The raw figures also go to build/bench/job.json
# (tools/bench-json.py).
set -euo pipefail
cd "$(dirname "$0")/.."

MIB=${MIB:-8}
RUNS=${RUNS:-1}
make -s all
guest=$(bash tools/build-guest.sh --print-dir)
rootfs=$(bash tools/build-rootfs.sh --init build/guest/tinyvmm-agent --print-path)
timeto=build/tools/timeto
work=$(mktemp -d)
vm_pid=
cleanup() { [ -n "$vm_pid" ] && kill "$vm_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
series=$work/series

run=(./tinyvmm run --kernel "$guest/vmlinux" --rootfs "$rootfs")
field() { sed -n "s/.*$1=\([-0-9.]*\).*/\1/p"; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

printf '%-44s %12s %12s\n' "job (fresh VM each)" "first out ms" "result ms"
for name in "true" "python3 -c pass"; do
	# shellcheck disable=SC2206 # word splitting of the job is intended
	job=($name)
	key=tinyvmm/$(printf %s "$name" | tr -cs a-z0-9 _)
	for _ in $(seq "$RUNS"); do
		line=$("$timeto" --marker "tinyvmm-bench-mark" -- "${run[@]}" -- sh -c "echo tinyvmm-bench-mark; exec \"\$@\"" sh "${job[@]}")
		printf '%-44s %12s %12s\n' "$name" "$(field marker_ms <<<"$line")" "$(field exit_ms <<<"$line")"
		echo "${key}_first_output_ms $(field marker_ms <<<"$line")" >>"$series"
		echo "${key}_result_ms $(field exit_ms <<<"$line")" >>"$series"
	done
done

# Throughput on one VM reached through its hybrid vsock socket.
uds=$work/vm.sock
"${run[@]}" --vsock-uds "$uds" --ttl 900 -- sleep 900 >/dev/null 2>&1 &
vm_pid=$!
for _ in $(seq 600); do
	./tinyvmm exec --vsock-uds "$uds" -- true 2>/dev/null && break
	sleep 1
done
head -c "${MIB}M" /dev/urandom >"$work/blob"
t=$(date +%s%N)
./tinyvmm exec --vsock-uds "$uds" --stdin -- sh -c 'cat >/dev/null' <"$work/blob"
up=$(ms "$t")
t=$(date +%s%N)
./tinyvmm exec --vsock-uds "$uds" --output-cap $((MIB << 20)) -- head -c "${MIB}M" /dev/zero | wc -c >/dev/null
down=$(ms "$t")
awk -v m="$MIB" -v u="$up" -v d="$down" 'BEGIN {
	printf "vsock host->guest: %d MiB in %d ms = %.2f MiB/s\n", m, u, m * 1000 / u
	printf "vsock guest->host: %d MiB in %d ms = %.2f MiB/s\n", m, d, m * 1000 / d }'
{
	echo "tinyvmm/vsock_host_to_guest_ms $up"
	echo "tinyvmm/vsock_guest_to_host_ms $down"
	awk -v m="$MIB" -v u="$up" -v d="$down" 'BEGIN {
		printf "tinyvmm/vsock_host_to_guest_mib_s %.2f\n", m * 1000 / u
		printf "tinyvmm/vsock_guest_to_host_mib_s %.2f\n", m * 1000 / d }'
} >>"$series"
python3 tools/bench-json.py job --kernel "$guest/vmlinux" RUNS="$RUNS" MIB="$MIB" ROOTFS="$rootfs" <"$series"
