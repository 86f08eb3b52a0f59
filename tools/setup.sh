#!/usr/bin/env bash
# One command from a fresh Debian 12 machine (as root) to the main job:
# install packages, build tinyvmm, the guest kernel and the base image
# (cached outside the clone), then run a Python job in a fresh microVM.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== setup: %s\n' "$*" >&2; }

step "installing Debian packages (apt-get, skipped when present)"
bash tools/deps.sh
step "building tinyvmm and the guest agent"
make -s -j"$(nproc)" all
step "building the guest kernel (first time: several minutes; then cached)"
guest=$(bash tools/build-guest.sh --print-dir)
step "building the base image: Debian python3 + pip, node + npm, git, curl; our agent as init (first time: a few minutes)"
rootfs=$(bash tools/build-rootfs.sh --init build/guest/tinyvmm-agent --print-path)
# The build tree's defaults: `./tinyvmm run -- CMD` finds these.
ln -sfn "$guest/vmlinux" build/guest/vmlinux
ln -sfn "$rootfs" build/guest/rootfs.ext4
step "installing tinyvmm (PREFIX=${PREFIX:-/usr/local}: binary, library, header, pkg-config, man page, guest kernel and image)"
make -s install PREFIX="${PREFIX:-/usr/local}"
step "main job: a Python program summarises a CSV in a fresh microVM (the first run boots once to make a template snapshot: slow on nested KVM; later runs restore it)"
# Everything is in place at this point: a host without a usable /dev/kvm
# can only fail the job, which says why; this line says what did work.
if [ ! -r /dev/kvm ] || [ ! -w /dev/kvm ]; then
	printf '== setup: installed (tinyvmm, its library, guest kernel and base image); the job below needs a usable /dev/kvm, which this host has not: it fails with status 125\n' >&2
fi
set -x
tinyvmm run --put tools/demo/sales.csv:/tmp/sales.csv --put tools/demo/summary.py:/tmp/summary.py \
	--timeout 600 -- python3 /tmp/summary.py /tmp/sales.csv
