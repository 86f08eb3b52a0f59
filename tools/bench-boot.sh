#!/usr/bin/env bash
# Boot benchmark: the same kernel and initramfs under tinyvmm and under
# qemu-system-x86_64 -M microvm, side by side. Prints, per VMM, the median
# of RUNS boots: time to the init's marker, time to exit, peak RSS; for
# tinyvmm also its own milestones (--metrics) and its RSS without guest RAM;
# for both, process start to first KVM_RUN measured with strace.
# Not a test: it asserts nothing, it reports. The raw samples also go to
# build/bench/boot.json (tools/bench-json.py).
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
MEM=${MEM:-256}
KERNEL_NAME=${KERNEL_NAME:-vmlinux}
MARKER="TINYVMM-TEST-INIT: ok"
guest=$(bash tools/build-guest.sh --print-dir)
kernel=$guest/$KERNEL_NAME
initrd=$guest/initramfs.cpio
timeto=build/tools/timeto
make -s all
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# qemu gets exactly the command line tinyvmm gives its guest, and an i8042
# so that reboot=k resets it at once as with tinyvmm (microvm has none).
cmdline=$({ ./tinyvmm host || true; } | sed -n 's/^cmdline: //p')
tinyvmm_cmd=(./tinyvmm run --kernel "$kernel" --initrd "$initrd" --mem "$MEM")
microvm_opts=microvm,x-option-roms=off,rtc=off,isa-serial=on,acpi=off
qemu_cmd=(qemu-system-x86_64 -M "$microvm_opts" -enable-kvm
	-cpu "qemu64,-cx16" -m "$MEM" -nodefaults -no-user-config -nographic -serial stdio
	-kernel "$kernel" -initrd "$initrd" -append "$cmdline" -device i8042 -no-reboot)

median() { sort -n | awk '{a[NR]=$1} END {if (NR) print a[int((NR+1)/2)]; else print "n/a"}'; }
field() { sed -n "s/.*$1=\([-0-9.]*\).*/\1/p"; }
json() { sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" "$2"; }

# Process start (execve) to the first KVM_RUN ioctl, in ms, from strace -ttt.
first_run_ms() {
	strace -f -ttt -e trace=execve,ioctl -o "$work/strace" "$@" >/dev/null 2>&1 </dev/null || true
	awk '/execve\(/ && !t0 {t0=$2} /KVM_RUN/ {printf "%.1f\n", ($2-t0)*1000; exit}' "$work/strace"
}

bench() { # name cmd...
	local name=$1; shift
	: >"$work/$name.lines"
	for i in $(seq "$RUNS"); do
		"$timeto" --marker "$MARKER" --log "$work/$name.$i.log" -- "$@" >>"$work/$name.lines"
		grep -q "$MARKER" "$work/$name.$i.log" || echo "bench: $name run $i did not reach the marker (log: see below)" >&2
	done
}

echo "bench-boot: $RUNS boots each, $MEM MiB, kernel $KERNEL_NAME, host quirks: $({ ./tinyvmm host || true; } | sed -n 's/^quirks: //p')"
for i in $(seq "$RUNS"); do
	"$timeto" --marker "$MARKER" --log "$work/t.$i.log" -- "${tinyvmm_cmd[@]}" --metrics "$work/m.$i.json" >>"$work/tinyvmm.lines"
done
bench qemu "${qemu_cmd[@]}"

t_marker=$(field marker_ms <"$work/tinyvmm.lines" | median)
q_marker=$(field marker_ms <"$work/qemu.lines" | median)
t_rss=$(field maxrss_kib <"$work/tinyvmm.lines" | median)
q_rss=$(field maxrss_kib <"$work/qemu.lines" | median)
t_exit=$(field exit_ms <"$work/tinyvmm.lines" | median)
q_exit=$(field exit_ms <"$work/qemu.lines" | median)
t_run=$(for f in "$work"/m.*.json; do json first_kvm_run_us "$f"; done | median)
t_vmm_rss=$(for f in "$work"/m.*.json; do json vmm_rss_kib "$f"; done | median)
t_strace=$(first_run_ms "${tinyvmm_cmd[@]}")
q_strace=$(first_run_ms "${qemu_cmd[@]}")

printf '%-34s %14s %14s\n' "" tinyvmm "qemu microvm"
printf '%-34s %14s %14s\n' "boot to marker (ms, median)" "$t_marker" "$q_marker"
printf '%-34s %14s %14s\n' "boot to exit (ms, median)" "$t_exit" "$q_exit"
printf '%-34s %14s %14s\n' "peak RSS incl. guest RAM (KiB)" "$t_rss" "$q_rss"
printf '%-34s %14s %14s\n' "start to first KVM_RUN, strace (ms)" "$t_strace" "$q_strace"
printf '%-34s %14s %14s\n' "start to first KVM_RUN, own (ms)" "$(awk -v u="$t_run" 'BEGIN{printf "%.2f", u/1000}')" "n/a"
printf '%-34s %14s %14s\n' "VMM RSS without guest RAM (KiB)" "$t_vmm_rss" "n/a"
awk -v t="$t_marker" -v q="$q_marker" 'BEGIN { if (t > 0 && q > 0) printf "ratio tinyvmm/qemu, boot to marker: %.3f\n", t / q }'

# The raw samples (one a boot) behind the medians above, both systems.
{
	for s in tinyvmm:tinyvmm qemu_microvm:qemu; do
		echo "${s%:*}/boot_to_marker_ms $(field marker_ms <"$work/${s#*:}.lines")"
		echo "${s%:*}/boot_to_exit_ms $(field exit_ms <"$work/${s#*:}.lines")"
		echo "${s%:*}/peak_rss_kib $(field maxrss_kib <"$work/${s#*:}.lines")"
	done
	echo "tinyvmm/first_kvm_run_strace_ms $t_strace"
	echo "qemu_microvm/first_kvm_run_strace_ms $q_strace"
	echo "tinyvmm/first_kvm_run_own_us $(for f in "$work"/m.*.json; do json first_kvm_run_us "$f"; done)"
	echo "tinyvmm/vmm_rss_kib $(for f in "$work"/m.*.json; do json vmm_rss_kib "$f"; done)"
} | python3 tools/bench-json.py boot --qemu --kernel "$kernel" RUNS="$RUNS" MEM="$MEM" KERNEL_NAME="$KERNEL_NAME"
