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
# As root, the restores again under --jail, and what the jail adds.
# The restores again with --no-seccomp (SECCOMP=0: not), and what the
# seccomp filters (on by default) add.
# Reports; asserts nothing. The raw samples also go to
# build/bench/restore.json (tools/bench-json.py), one series set a variant:
# tinyvmm, tinyvmm_noseccomp, tinyvmm_nocg, tinyvmm_jailnocg, tinyvmm_jail.
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
series=$work/series

json() { sed -n "s/.*\"$1\":\([0-9-]*\).*/\1/p" "$2"; }
field() { sed -n "s/.*$1=\([-0-9.]*\).*/\1/p"; }
# median and p99 (nearest rank) of the numbers on stdin
stats() { sort -n | awk '{ v[NR] = $1 } END { p = int(NR * 0.99 + 0.999); if (p < 1) p = 1;
	printf "%10s %10s\n", v[int((NR + 1) / 2)], v[p] }'; }

line=$(./tinyvmm snapshot create --out "$snap" --kernel "$guest/vmlinux" --rootfs "$rootfs" -- ${WARMUP-sh -c true} 2>&1 >/dev/null |
	grep 'agent ready')
echo "cold boot: ${line#tinyvmm: }"
echo "tinyvmm/cold_boot_agent_ready_s $(sed -n 's/.*agent ready \([0-9.]*\) s.*/\1/p' <<<"$line")" >>"$series"
echo "snapshot: state $(stat -c %s "$snap/state") bytes, memory $(du -k "$snap/mem" | cut -f1) KiB on disk" \
	"of $(($(stat -c %s "$snap/mem") >> 10)) KiB"

# N restores with the extra tinyvmm flags given; the figures go to
# $work/{vmm,lib,first,result}$tag.
restores() {
	local tag=$1 i m out
	shift
	: >"$work/vmm$tag" >"$work/lib$tag" >"$work/first$tag" >"$work/result$tag"
	for i in $(seq "$N"); do
		m=$work/m$tag$i.json
		out=$("$timeto" --marker tinyvmm-bench-mark -- ./tinyvmm run "$@" --snapshot "$snap" --rootfs "$rootfs" \
			--metrics "$m" -- sh -c 'echo tinyvmm-bench-mark; exec true')
		echo $(( $(json first_kvm_run_us "$m") ))                                  >>"$work/vmm$tag"
		echo $(( $(json first_kvm_run_us "$m") - $(json restore_called_us "$m") )) >>"$work/lib$tag"
		field marker_ms <<<"$out" >>"$work/first$tag"
		field exit_ms <<<"$out" >>"$work/result$tag"
	done
}
median() { sort -n "$1" | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
report() {
	local tag=$1 what=$2
	printf '%-52s %10s %10s\n' "restores$what: $N (kvm_pvm host: guest kernel emulated)" median p99
	printf '%-52s ' "process start -> first KVM_RUN (us)"; stats <"$work/vmm$tag"
	printf '%-52s ' "tvm_vm_restore() call -> first KVM_RUN (us)"; stats <"$work/lib$tag"
	printf '%-52s ' "process start -> first job output (ms)"; stats <"$work/first$tag"
	printf '%-52s ' "process start -> job result, true (ms)"; stats <"$work/result$tag"
	for f in vmm:start_to_first_kvm_run_us lib:restore_call_to_first_kvm_run_us first:start_to_first_output_ms \
		result:start_to_result_ms; do
		echo "tinyvmm${tag//-/_}/${f#*:} $(cat "$work/${f%:*}$tag")"
	done >>"$series"
}

restores ""
report "" ""
if [ "${SECCOMP:-1}" != 0 ]; then
	restores -noseccomp --no-seccomp
	report -noseccomp " without seccomp"
	# (timeto's milliseconds have a decimal: awk, not $(( )))
	awk -v a="$(median "$work/vmm")" -v b="$(median "$work/vmm-noseccomp")" \
		-v c="$(median "$work/result")" -v d="$(median "$work/result-noseccomp")" \
		'BEGIN { printf "seccomp adds (medians): process start -> first KVM_RUN %d us, -> job result %.1f ms\n", a - b, c - d }'
fi
# The same under --jail (root only): fork, namespaces, mounts, pivot_root
# and the lockdown come before the restore. What the jail adds is the
# difference of the medians with and without it, both --no-cgroup; a
# jailed VM gets its host cgroup as the default run does, but its parent
# moves the just-forked child into it, which costs what the kernel's
# cgroup attach costs (on cgroup v1 it waits for an RCU grace period):
# shown as what the cgroup adds, jailed and not.
if [ "$(id -u)" = 0 ]; then
	restores -nocg --no-cgroup
	report -nocg " --no-cgroup"
	restores -jailnocg --jail --no-cgroup
	report -jailnocg " --jail --no-cgroup"
	restores -jail --jail
	report -jail " --jail"
	awk -v a="$(median "$work/vmm-jailnocg")" -v b="$(median "$work/vmm-nocg")" \
		-v c="$(median "$work/result-jailnocg")" -v d="$(median "$work/result-nocg")" \
		-v j="$(median "$work/vmm-jail")" -v v="$(median "$work/vmm")" \
		'BEGIN { printf "--jail adds (medians, both --no-cgroup): process start -> first KVM_RUN %d us, -> job result %.1f ms\n", a - b, c - d;
			printf "the cgroup adds (medians, vs --no-cgroup): process start -> first KVM_RUN %d us, jailed %d us\n", v - b, j - a }'
fi

# An idle restored VM (no job), ended by its TTL.
./tinyvmm run --snapshot "$snap" --rootfs "$rootfs" --serial-out /dev/null --ttl 3 --metrics "$work/idle.json" \
	</dev/null >/dev/null 2>&1 || true
echo "idle restored VM: VMM RSS without guest RAM $(json vmm_rss_kib "$work/idle.json") KiB"
echo "tinyvmm/idle_vmm_rss_kib $(json vmm_rss_kib "$work/idle.json")" >>"$series"
python3 tools/bench-json.py restore --kernel "$guest/vmlinux" N="$N" WARMUP="${WARMUP-sh -c true}" SECCOMP="${SECCOMP:-1}" \
	SNAPSHOT_STATE_BYTES="$(stat -c %s "$snap/state")" SNAPSHOT_MEM_KIB="$(($(stat -c %s "$snap/mem") >> 10))" \
	SNAPSHOT_MEM_DISK_KIB="$(du -k "$snap/mem" | cut -f1)" <"$series"
