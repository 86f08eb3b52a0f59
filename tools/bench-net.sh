#!/usr/bin/env bash
# virtio-net benchmark: TCP throughput guest->host and host->guest and
# one-byte round-trip latency, under tinyvmm (as is, with an egress
# allow-list to show the filter's cost, and with --net-no-offload) and
# under qemu-system-x86_64 -M microvm with a virtio-mmio net device (its
# default offloads; QEMU_NET_OPTS=",csum=off,..." appends device
# properties), same kernel, same test initramfs, same TAP.
#
# Runs in a network namespace of its own (unshare -n): one TAP, the host end
# at 10.0.2.1/24, build/tools/netbench as the server; the guest's test-init
# (tinyvmm.test=netbench) gives eth0 10.0.2.2/24 and runs guest/netbench.c
# as the client. The server does all the timing with the host's clock.
# KIB (default 256) per bulk transfer, ROUNDS (default 100) round trips.
# Reports; asserts nothing. The figures also go to build/bench/net.json
# (tools/bench-json.py; netbench gives the RTT median and p99, not each
# round trip).
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${TINYVMM_BENCH_NETNS:-}" != 1 ]; then
	exec unshare --net env TINYVMM_BENCH_NETNS=1 bash "$0" "$@"
fi

KIB=${KIB:-256}
ROUNDS=${ROUNDS:-100}
TAP=tvnb0
HOST=10.0.2.1
PORT=7100
make -s all
guest=$(bash tools/build-guest.sh --print-dir)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

ip link set lo up
ip tuntap add dev "$TAP" mode tap
ip addr add "$HOST/24" dev "$TAP"
ip link set "$TAP" up
words="tinyvmm.test=netbench tinyvmm.netbench=10.0.2.2/24,$HOST,$PORT"

# measure NAME VMM-COMMAND...: one VM, one server; the server's lines go
# to $work/NAME. A VM that never connects leaves the file empty.
measure() {
	local name=$1 srv
	shift
	echo "bench-net: $name (boots a VM, ~30 s here) ..." >&2
	build/tools/netbench server "$PORT" $((KIB * 1024)) "$ROUNDS" >"$work/$name" 2>"$work/$name.err" &
	srv=$!
	timeout 900 "$@" >"$work/$name.console" 2>&1 || true
	kill "$srv" 2>/dev/null || true
	if ! wait "$srv" 2>/dev/null; then
		echo "bench-net: $name: no complete run; the VM's last lines:" >&2
		tail -5 "$work/$name.console" >&2
	fi
}

tinyvmm=(./tinyvmm run --kernel "$guest/vmlinux" --initrd "$guest/initramfs.cpio" --vsock-cid 0
	--cmdline "console=ttyS0 reboot=k panic=-1 quiet" --cmdline-append "$words" --net "$TAP")
measure tinyvmm "${tinyvmm[@]}"
measure "tinyvmm+allow" "${tinyvmm[@]}" --net-allow "$HOST/32:$PORT/tcp"
measure no-offload "${tinyvmm[@]}" --net-no-offload

cmdline="$({ ./tinyvmm host || true; } | sed -n 's/^cmdline: //p') quiet $words"
measure qemu qemu-system-x86_64 -M microvm,x-option-roms=off,rtc=off,isa-serial=on,acpi=off -enable-kvm \
	-cpu "qemu64,-cx16" -m 256 -nodefaults -no-user-config -nographic -serial stdio \
	-kernel "$guest/vmlinux" -initrd "$guest/initramfs.cpio" -append "$cmdline" -device i8042 -no-reboot \
	-netdev "tap,id=n0,ifname=$TAP,script=no,downscript=no" -device "virtio-net-device,netdev=n0${QEMU_NET_OPTS:-}"

# value FILE KEY FIELD: the FIELD-th word after "netbench: KEY"
value() { awk -v k="$1" -v f="$3" '$2 == k {print $(f + 2)}' "$2" 2>/dev/null || true; }
printf '%-20s %10s %14s %12s %13s %8s\n' measure tinyvmm "tinyvmm+allow" "no-offload" "qemu microvm" ratio
row() { # LABEL KEY FIELD: ratio tinyvmm/qemu
	local t f n q
	t=$(value "$2" "$work/tinyvmm" "$3")
	f=$(value "$2" "$work/tinyvmm+allow" "$3")
	n=$(value "$2" "$work/no-offload" "$3")
	q=$(value "$2" "$work/qemu" "$3")
	printf '%-20s %10s %14s %12s %13s %8s\n' "$1" "${t:-n/a}" "${f:-n/a}" "${n:-n/a}" "${q:-n/a}" \
		"$(awk -v a="$t" -v b="$q" 'BEGIN { if (a > 0 && b > 0) printf "%.2f", a / b; else print "n/a" }')"
}
row "guest->host KiB/s" guest-to-host 5
row "host->guest KiB/s" host-to-guest 5
row "rtt median us" rtt 4
row "rtt p99 us" rtt 7
echo "($KIB KiB per transfer, $ROUNDS one-byte round trips; ratio = tinyvmm / qemu: above 1 is"
echo " better for KiB/s, worse for us)"

# One sample a measure and VM: the server's lines as series.
for s in tinyvmm:tinyvmm tinyvmm_allow:tinyvmm+allow tinyvmm_no_offload:no-offload qemu_microvm:qemu; do
	awk -v s="${s%:*}" '$1 == "netbench:" && $NF == "KiB/s" { gsub("-", "_", $2); print s "/" $2 "_kib_s " $7 }
		$1 == "netbench:" && $2 == "rtt" { print s "/rtt_median_us " $6; print s "/rtt_p99_us " $9 }' "$work/${s#*:}"
done | python3 tools/bench-json.py net --qemu --kernel "$guest/vmlinux" KIB="$KIB" ROUNDS="$ROUNDS" \
	QEMU_NET_OPTS="${QEMU_NET_OPTS:-}"
