#!/usr/bin/env python3
"""Write one benchmark's figures as JSON: build/bench/<NAME>.json.

The one writer behind every tools/bench-*.sh (so the format is defined
once, here, and `make bench-report` reads it):

  python3 tools/bench-json.py NAME [--kernel PATH] [--qemu] [--out FILE]
                              [PARAM=VALUE ...] < SERIES

SERIES holds lines `SYSTEM/SERIES VALUE...`: the raw samples of one
series, unit in its name (`tinyvmm/boot_to_marker_ms 20123.4 19876.1`).
A line of numbers only continues the line before it, so that a script can
write `echo "key $(cmd)"` with cmd printing one number a line. Words that
are not numbers (`n/a`: a run that measured nothing) are left out; a key
given no number still appears, with an empty list.

The file: {"format": 1, "bench", "date" (UTC, ISO 8601), "host"
(hostname, kernel, cpu_model, nproc, mem_total_kib), "versions"
(tinyvmm, qemu when --qemu, guest_kernel {path, name, sha256} when
--kernel), "params" {PARAM: VALUE}, "series" {SYSTEM: {SERIES: [samples]}},
"summary" {SYSTEM: {SERIES: {n, median, p99, min, max}}}}. median and p99
are taken as the scripts print them: the lower median, the nearest-rank
p99. Python 3 standard library only.
"""
import datetime
import hashlib
import json
import os
import platform
import re
import subprocess
import sys

FORMAT = 1


def number(word):
    try:
        v = float(word)
    except ValueError:
        return None
    if v != v or v in (float("inf"), float("-inf")):
        return None
    return int(v) if v.is_integer() and re.fullmatch(r"-?[0-9]+", word) else v


def parse_series(lines):
    series, key = {}, None
    for line in lines:
        words = line.split()
        if not words:
            continue
        if number(words[0]) is None and words[0] != "n/a":
            key, words = words[0], words[1:]
            if "/" not in key:
                sys.exit("bench-json: %r: want SYSTEM/SERIES" % key)
            system, name = key.split("/", 1)
            series.setdefault(system, {}).setdefault(name, [])
        elif key is None:
            sys.exit("bench-json: numbers before any key: %r" % line)
        system, name = key.split("/", 1)
        series[system][name] += [v for v in map(number, words) if v is not None]
    return series


def summarize(values):
    if not values:
        return {"n": 0}
    v = sorted(values)
    n = len(v)
    p99 = max(1, int(n * 0.99 + 0.999))
    return {"n": n, "median": v[(n + 1) // 2 - 1], "p99": v[p99 - 1], "min": v[0], "max": v[-1]}


def first_line(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out.strip() else None


def proc_field(path, key):
    try:
        with open(path) as f:
            for line in f:
                if line.split(":")[0].strip() == key:
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def host():
    mem = proc_field("/proc/meminfo", "MemTotal")
    return {
        "hostname": platform.node(),
        "kernel": platform.release(),
        "cpu_model": proc_field("/proc/cpuinfo", "model name"),
        "nproc": os.cpu_count(),
        "mem_total_kib": int(mem.split()[0]) if mem else None,
    }


def guest_kernel(path):
    real = os.path.realpath(path)
    h = hashlib.sha256()
    try:
        with open(real, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return {"path": real, "name": os.path.basename(real), "sha256": None}
    return {"path": real, "name": os.path.basename(real), "sha256": h.hexdigest()}


def main(argv):
    if not argv or argv[0].startswith("-"):
        sys.exit(__doc__.split("\n\n")[1])
    name, argv = argv[0], argv[1:]
    out = os.path.join("build", "bench", name + ".json")
    versions = {"tinyvmm": first_line(["./tinyvmm", "--version"])}
    params = {}
    while argv:
        a = argv.pop(0)
        if a == "--qemu":
            versions["qemu"] = first_line(["qemu-system-x86_64", "--version"])
        elif a == "--kernel" and argv:
            versions["guest_kernel"] = guest_kernel(argv.pop(0))
        elif a == "--out" and argv:
            out = argv.pop(0)
        elif "=" in a and not a.startswith("-"):
            k, v = a.split("=", 1)
            params[k] = number(v) if number(v) is not None else v
        else:
            sys.exit("bench-json: unknown argument %r" % a)
    series = parse_series(sys.stdin)
    doc = {
        "format": FORMAT,
        "bench": name,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": host(),
        "versions": versions,
        "params": params,
        "series": series,
        "summary": {s: {k: summarize(v) for k, v in d.items()} for s, d in series.items()},
    }
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    # Written whole then renamed: a reader never sees half a file.
    with open(out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(out + ".tmp", out)
    print("bench-json: wrote " + out, file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1:])
