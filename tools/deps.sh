#!/usr/bin/env bash
# Install the Debian packages tinyvmm needs to build, test and build its
# guest (munge and the slurm ones: tests/slurm/run.sh runs a Slurm cluster
# on this machine). A no-op (no apt at all) when everything is already
# installed.
set -euo pipefail

pkgs=(build-essential clang pkg-config check libsubunit-dev
      linux-source-6.1 flex bison bc libelf-dev libssl-dev cpio
      busybox-static e2fsprogs qemu-system-x86 iproute2 strace help2man clang-format
      python3 nodejs curl gnuplot-nox
      munge slurmctld slurmd slurm-client)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
	echo "deps: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >&2
	apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
fi
