#!/usr/bin/env bash
# Benchmarks as data (issue 16), without a VM: tools/bench-json.py writes
# the format (raw samples, median and p99 as the scripts print them), and
# tools/bench-report.py draws every figure from the fixtures in
# tests/bench/fixtures (made-up figures in the real format) as a non-empty
# PNG and SVG whose SVG names the axes and the systems compared; a missing
# JSON file skips its figures without failing. A few seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v gnuplot >/dev/null || { echo "bench: FAILED: no gnuplot (tools/deps.sh installs gnuplot-nox)"; exit 1; }
tmp=$(mktemp -d /tmp/tinyvmm-bench-XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# The writer: keys, continuation lines, n/a left out, params, summary.
printf '%s\n' "tinyvmm/a_ms 5 1 n/a" 4 "3 2" "qemu_microvm/a_ms" "tinyvmm/b_kib 7" |
	python3 tools/bench-json.py unit --out "$tmp/unit.json" RUNS=5 NAME=x 2>/dev/null
python3 - "$tmp/unit.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["bench"] == "unit" and d["format"] == 1, d
assert d["params"] == {"RUNS": 5, "NAME": "x"}, d["params"]
assert d["series"] == {"tinyvmm": {"a_ms": [5, 1, 4, 3, 2], "b_kib": [7]}, "qemu_microvm": {"a_ms": []}}, d["series"]
assert d["summary"]["tinyvmm"]["a_ms"] == {"n": 5, "median": 3, "p99": 5, "min": 1, "max": 5}, d["summary"]
assert d["summary"]["qemu_microvm"]["a_ms"] == {"n": 0}
assert set(d["host"]) == {"hostname", "kernel", "cpu_model", "nproc", "mem_total_kib"}, d["host"]
assert d["date"].endswith("Z") and "tinyvmm" in d["versions"], d
print("bench: ok: bench-json.py writes series, params, summary, host")
EOF

out=$(python3 tools/bench-report.py tests/bench/fixtures "$tmp/plots")
python3 - "$tmp/plots" <<'EOF'
import os, sys
import xml.etree.ElementTree as ET
BOTH = ["tinyvmm", "qemu microvm"]
# figure: (axis labels, system names as tick or legend entry) its SVG must
# show; every one names tinyvmm somewhere.
want = {
    "boot-latency": (["VMM", "process start -> init marker on the console (ms)"], BOTH),
    "boot-rss": (["VMM", "peak RSS (KiB)"], BOTH),
    "restore-latency": (["tinyvmm flags", "latency (ms)"], ["tinyvmm", "tinyvmm --jail", "tinyvmm --no-seccomp"]),
    "restore-first-kvm-run": (["tinyvmm flags", "latency (us)"], ["tinyvmm", "tinyvmm --jail"]),
    "job-latency": (["job: milestone", "latency (ms)"], []),
    "vsock-throughput": (["direction", "throughput (MiB/s)"], ["tinyvmm"]),
    "blk-throughput": (["I/O pattern", "throughput (MiB/s)"], BOTH),
    "blk-iops": (["I/O pattern", "I/O operations per second (IOPS)"], BOTH),
    "net-throughput": (["direction", "throughput (KiB/s)"], BOTH + ["tinyvmm + allow-list"]),
    "net-rtt": (["statistic", "round-trip time (us)"], BOTH),
    "serve-latency": (["measure", "latency (ms)"], []),
}
fail = 0
for name, (axes, systems) in want.items():
    png, svg = (os.path.join(sys.argv[1], name + ext) for ext in (".png", ".svg"))
    try:
        with open(png, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG"
        assert os.path.getsize(png) > 1000, "PNG too small"
        texts = ["".join(t.itertext()) for t in ET.parse(svg).iter("{http://www.w3.org/2000/svg}text")]
        for s in axes:
            assert s in texts, "no axis label %r" % s
        for s in systems:
            assert any(t == s or t.startswith(s + ":") for t in texts), "no system %r" % s
        assert any("tinyvmm" in t for t in texts), "tinyvmm named nowhere"
        print("bench: ok: %s.png and .svg" % name)
    except (AssertionError, OSError, ET.ParseError) as e:
        print("bench: FAILED: %s: %s" % (name, e))
        fail += 1
sys.exit(fail)
EOF
[ "$(grep -c 'wrote ' <<<"$out")" = 22 ] || { echo "bench: FAILED: not 22 files written:"; echo "$out"; exit 1; }

# Only boot.json: the other figures are skipped, one line each, exit 0.
mkdir "$tmp/some"
cp tests/bench/fixtures/boot.json "$tmp/some/"
out=$(python3 tools/bench-report.py "$tmp/some" "$tmp/some/plots")
if [ "$(grep -c 'figures skipped' <<<"$out")" = 5 ] && [ -s "$tmp/some/plots/boot-latency.svg" ]; then
	echo "bench: ok: missing JSON files skip their figures"
else
	echo "bench: FAILED: missing JSON files:"
	echo "$out"
	exit 1
fi
