#!/usr/bin/env bash
# Restore benchmark: boot once and snapshot when the agent is ready and the
# warm-up command ran (WARMUP, default `sh -c true`; WARMUP= for none; the
# cold boot-to-agent-ready time is printed for comparison), then N restores
# (default 10) through `tinyvmm run --snapshot`, each running `true`:
#   - VMM side: process start -> first KVM_RUN, and tvm_vm_restore() call ->
#     first KVM_RUN (the vCPUs resumed), from --metrics;
#   - restore -> first job output (`echo`, then `true`) and -> job result;
#   - median and p99 (nearest rank) of each;
# and the RSS of an idle restored VM without its guest pages (vmm_rss_kib).
# Reports; asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-10}
make -s all
guest=$(bash tools/build-guest.sh --print-dir)
rootfs=$(bash tools/build-rootfs.sh --init build/guest/tinyvmm-agent --print-path)
timeto=build/tools/timeto
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
snap=$work/snap

json() { sed -n "s/.*\"$1\":\([0-9-]*\).*/\1/p" "$2"; }
field() { sed -n "s/.*$1=\([-0-9.]*\).*/\1/p"; }
# median and p99 (nearest rank) of the numbers on stdin
stats() { sort -n | awk '{ v[NR] = $1 } END { p = int(NR * 0.99 + 0.999); if (p < 1) p = 1;
	printf "%10s %10s\n", v[int((NR + 1) / 2)], v[p] }'; }

line=$(./tinyvmm snapshot create --out "$snap" --kernel "$guest/vmlinux" --rootfs "$rootfs" -- ${WARMUP-sh -c true} 2>&1 >/dev/null |
	grep 'agent ready')
echo "cold boot: ${line#tinyvmm: }"
echo "snapshot: state $(stat -c %s "$snap/state") bytes, memory $(du -k "$snap/mem" | cut -f1) KiB on disk" \
	"of $(($(stat -c %s "$snap/mem") >> 10)) KiB"

: >"$work/vmm" >"$work/lib" >"$work/first" >"$work/result"
for i in $(seq "$N"); do
	m=$work/m$i.json
	out=$("$timeto" --marker tinyvmm-bench-mark -- ./tinyvmm run --snapshot "$snap" --rootfs "$rootfs" \
		--metrics "$m" -- sh -c 'echo tinyvmm-bench-mark; exec true')
	echo $(( $(json first_kvm_run_us "$m") ))                                  >>"$work/vmm"
	echo $(( $(json first_kvm_run_us "$m") - $(json restore_called_us "$m") )) >>"$work/lib"
	field marker_ms <<<"$out" >>"$work/first"
	field exit_ms <<<"$out" >>"$work/result"
done

printf '%-52s %10s %10s\n' "restores: $N (kvm_pvm host: guest kernel emulated)" median p99
printf '%-52s ' "process start -> first KVM_RUN (us)"; stats <"$work/vmm"
printf '%-52s ' "tvm_vm_restore() call -> first KVM_RUN (us)"; stats <"$work/lib"
printf '%-52s ' "process start -> first job output (ms)"; stats <"$work/first"
printf '%-52s ' "process start -> job result, true (ms)"; stats <"$work/result"

# An idle restored VM (no job), ended by its TTL.
./tinyvmm run --snapshot "$snap" --rootfs "$rootfs" --serial-out /dev/null --ttl 3 --metrics "$work/idle.json" \
	</dev/null >/dev/null 2>&1 || true
echo "idle restored VM: VMM RSS without guest RAM $(json vmm_rss_kib "$work/idle.json") KiB"
