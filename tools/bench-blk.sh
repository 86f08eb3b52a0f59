#!/usr/bin/env bash
# virtio-blk benchmark: guest/blkbench (in the test initramfs, O_DIRECT on
# /dev/vda) against a scratch image, under tinyvmm and under
# qemu-system-x86_64 -M microvm with a virtio-mmio blk device, same kernel,
# same image, same host page cache settings (buffered I/O on the host).
# Reports; asserts nothing. The figures also go to build/bench/blk.json
# (tools/bench-json.py).
set -euo pipefail
cd "$(dirname "$0")/.."

MB=${MB:-128}
make -s all
guest=$(bash tools/build-guest.sh --print-dir)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
img=$work/scratch.img
truncate -s "${MB}M" "$img"

cmdline="$({ ./tinyvmm host || true; } | sed -n 's/^cmdline: //p') tinyvmm.test=blkbench"
./tinyvmm run --kernel "$guest/vmlinux" --initrd "$guest/initramfs.cpio" --vsock-cid 0 \
	--cmdline "console=ttyS0 reboot=k panic=-1" --cmdline-append "tinyvmm.test=blkbench" \
	--drive "path=$img,rw" 2>/dev/null | tr -d '\r' | grep '^blkbench:' >"$work/t" || true
microvm_opts=microvm,x-option-roms=off,rtc=off,isa-serial=on,acpi=off
qemu-system-x86_64 -M "$microvm_opts" -enable-kvm -cpu "qemu64,-cx16" -m 256 -nodefaults \
	-no-user-config -nographic -serial stdio -kernel "$guest/vmlinux" -initrd "$guest/initramfs.cpio" \
	-append "$cmdline" -device i8042 -no-reboot \
	-drive "id=d0,file=$img,format=raw,if=none" -device virtio-blk-device,drive=d0 2>/dev/null |
	tr -d '\r' | grep '^blkbench:' >"$work/q" || true

printf '%-16s %22s %22s %8s\n' pattern tinyvmm "qemu microvm" ratio
for p in seq-write-1m seq-read-1m rand-read-4k rand-write-4k; do
	t=$(awk -v p="$p" '$2 == p {print $3 " MiB/s " $5 " IOPS"}' "$work/t")
	q=$(awk -v p="$p" '$2 == p {print $3 " MiB/s " $5 " IOPS"}' "$work/q")
	ratio=$(awk -v p="$p" 'FNR == 1 {f++} $2 == p {v[f] = $3} END {if (v[1] > 0 && v[2] > 0) printf "%.2f", v[1] / v[2]; else print "n/a"}' "$work/t" "$work/q")
	printf '%-16s %22s %22s %8s\n' "$p" "${t:-n/a}" "${q:-n/a}" "$ratio"
done

# One sample a pattern and system: blkbench's lines as series.
for s in tinyvmm:t qemu_microvm:q; do
	awk -v s="${s%:*}" '$1 == "blkbench:" && $4 == "MiB/s" { gsub("-", "_", $2)
		print s "/" $2 "_mib_s " $3; print s "/" $2 "_iops " $5 }' "$work/${s#*:}"
done | python3 tools/bench-json.py blk --qemu --kernel "$guest/vmlinux" MB="$MB"
