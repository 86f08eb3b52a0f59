#!/usr/bin/env bash
# One command from a fresh Debian 12 machine (as root) to the main job:
# install packages, build the guest kernel and images (cached outside the
# clone), build tinyvmm, then run the main job in a fresh microVM.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== setup: %s\n' "$*" >&2; }

step "installing Debian packages (apt-get, skipped when present)"
bash tools/deps.sh
step "building tinyvmm"
make -s -j"$(nproc)" all
step "building the guest kernel and initramfs (first time: several minutes; then cached)"
guest=$(bash tools/build-guest.sh --print-dir)
step "main job: boot the guest kernel to its init in a fresh microVM"
./tinyvmm run --kernel "$guest/vmlinux" --initrd "$guest/initramfs.cpio.gz"
