#!/usr/bin/env python3
"""Plots of the benchmark figures (`make bench-report`).

  python3 tools/bench-report.py [IN_DIR [OUT_DIR]]

IN_DIR (default build/bench) holds the <bench>.json files that the
tools/bench-*.sh scripts write (format: tools/bench-json.py); OUT_DIR
(default IN_DIR/plots) gets each figure as NAME.png and NAME.svg, and in
data/ the gnuplot data files and scripts that drew them (rerun one with
`gnuplot data/NAME.gp`). A missing JSON file or series skips its figure
with one line; that is not a failure. Needs gnuplot (Debian gnuplot-nox);
Python 3 standard library only.
"""
import json
import os
import subprocess
import sys

# How a system key of the JSON files is named in legends.
SYSTEMS = {
    "tinyvmm": "tinyvmm",
    "qemu_microvm": "qemu microvm",
    "tinyvmm_allow": "tinyvmm + allow-list",
    "tinyvmm_no_offload": "tinyvmm --net-no-offload",
    "tinyvmm_noseccomp": "tinyvmm --no-seccomp",
    "tinyvmm_nocg": "tinyvmm --no-cgroup",
    "tinyvmm_jailnocg": "tinyvmm --jail --no-cgroup",
    "tinyvmm_jail": "tinyvmm --jail",
}
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
SIZE = "960,560"


def load(indir, bench):
    path = os.path.join(indir, bench + ".json")
    try:
        with open(path) as f:
            doc = json.load(f)
    except FileNotFoundError:
        print("bench-report: no %s: %s figures skipped" % (path, bench))
        return None
    except (OSError, ValueError) as e:
        print("bench-report: %s unreadable (%s): %s figures skipped" % (path, e, bench))
        return None
    return doc


def samples(doc, system, series):
    return [v for v in doc.get("series", {}).get(system, {}).get(series, []) if isinstance(v, (int, float))]


def summary(doc, system, series):
    """n, median and p99 as tools/bench-json.py took them (the tables' way)."""
    return doc.get("summary", {}).get(system, {}).get(series, {})


def fmt(x):
    return "%.4g" % x if abs(x) < 1e4 else "%.0f" % x


def subtitle(doc):
    host = doc.get("host", {})
    params = ", ".join("%s=%s" % kv for kv in sorted(doc.get("params", {}).items()) if len(str(kv[1])) < 24)
    return ["host %s, %s, %s CPUs (%s); %s" % (
        host.get("hostname", "?"), host.get("kernel", "?"), host.get("nproc", "?"),
        (host.get("cpu_model") or "?")[:40], doc.get("versions", {}).get("tinyvmm", "?")),
        "%s; %s" % (doc.get("date", "?"), params)]


def quote(s):
    # Single quotes: in double quotes gnuplot would run `...` as a command.
    return "'%s'" % s.replace("'", "''")


def title(main, doc):
    """The title above the plot, and where the figures come from as a
    footnote in the lower left corner (too long for a centred title)."""
    foot = "".join("set label %s at screen 0.01,%.3f left font 'sans,8'\n" % (quote(l), y)
                   for l, y in zip(subtitle(doc), (0.04, 0.012)))
    return "set title %s\n%s" % (quote(main), foot)


class Report:
    def __init__(self, outdir):
        self.outdir = outdir
        self.datadir = os.path.join(outdir, "data")
        os.makedirs(self.datadir, exist_ok=True)
        self.written = []

    def data(self, name, rows):
        path = os.path.join(self.datadir, name)
        with open(path, "w") as f:
            for row in rows:
                f.write(" ".join(str(x) for x in row) + "\n")
        return path

    def draw(self, name, header, plot):
        """One gnuplot script, run once: the PNG, then the same plot as SVG."""
        gp = os.path.join(self.datadir, name + ".gp")
        png = os.path.join(self.outdir, name + ".png")
        svg = os.path.join(self.outdir, name + ".svg")
        with open(gp, "w") as f:
            f.write("set terminal pngcairo noenhanced size %s font 'sans,10'\n" % SIZE)
            f.write("set output %s\n" % quote(png))
            f.write("set datafile missing '?'\nset key outside top center horizontal\nset bmargin 6.5\nset grid ytics\n")
            f.write(header)
            f.write(plot + "\n")
            f.write("set terminal svg noenhanced size %s font 'sans,10' background '#ffffff'\n" % SIZE)
            f.write("set output %s\nreplot\nunset output\n" % quote(svg))
        r = subprocess.run(["gnuplot", gp], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("bench-report: gnuplot failed on %s:\n%s" % (gp, r.stderr))
        self.written += [png, svg]

    def strip(self, name, title_, xlabel, ylabel, doc, groups):
        """A distribution a group: every sample as a point (spread sideways
        so that equal values stay visible), the median as a bar across.
        groups: [(x tick, system key, series)]."""
        groups = [(tick, sys_, ser, samples(doc, sys_, ser)) for tick, sys_, ser in groups]
        groups = [g for g in groups if g[3]]
        if not groups:
            print("bench-report: %s: no samples, figure skipped" % name)
            return
        plots, tics = [], []
        for i, (tick, system, series, v) in enumerate(groups, 1):
            st = summary(doc, system, series)
            n = len(v)
            pts = [(i + (0.3 * (k / (n - 1) - 0.5) if n > 1 else 0), x) for k, x in enumerate(v)]
            d = self.data("%s.%d.dat" % (name, i), pts)
            m = self.data("%s.%d.median.dat" % (name, i), [(i - 0.25, st["median"], 0.5, 0)])
            color = COLORS[(i - 1) % len(COLORS)]
            unit = series.rsplit("_", 1)[-1] if "_" in series else ""
            label = "%s: n=%d, median %s %s, p99 %s" % (tick, n, fmt(st["median"]), unit, fmt(st["p99"]))
            plots.append("%s using 1:2 with points pt 7 ps 1.2 lc rgb '%s' title %s" % (quote(d), color, quote(label)))
            plots.append("%s using 1:2:3:4 with vectors nohead lw 3 lc rgb '%s' notitle" % (quote(m), color))
            tics.append("%s %d" % (quote(tick), i))
        header = ("%sset xlabel %s\nset ylabel %s\nset yrange [0:*]\nset xrange [0.4:%f]\n"
                  "set xtics (%s)\n" % (title(title_, doc), quote(xlabel), quote(ylabel),
                                        len(groups) + 0.6, ", ".join(tics)))
        self.draw(name, header, "plot " + ", \\\n  ".join(plots))

    def bars(self, name, title_, xlabel, ylabel, doc, categories, systems):
        """Clustered bars: one cluster a category, one bar a system, the
        median of its samples (most of these series have one sample),
        its value written above. categories: [(label, series)];
        systems: [system key]."""
        systems = [s for s in systems if any(samples(doc, s, ser) for _, ser in categories)]
        categories = [(l, ser) for l, ser in categories if any(samples(doc, s, ser) for s in systems)]
        if not systems or not categories:
            print("bench-report: %s: no samples, figure skipped" % name)
            return
        rows = []
        for label, ser in categories:
            meds = [summary(doc, s, ser).get("median") for s in systems]
            rows.append(['"%s"' % label.replace('"', "'")] + [fmt(m) if m is not None else "?" for m in meds])
        d = self.data(name + ".dat", rows)
        k = len(systems)
        plots, labels = [], []
        for i, s in enumerate(systems):
            col = i + 2
            plots.append("%s using %d:xtic(1) lc rgb '%s' title %s" % (
                quote(d) if i == 0 else "''", col, COLORS[i % len(COLORS)], quote(SYSTEMS.get(s, s))))
            # A cluster of k bars and a gap of one bar is one x unit wide.
            off = (i - (k - 1) / 2.0) / (k + 1)
            labels.append("%s using ($0+%f):%d:(stringcolumn(%d)) with labels offset 0,0.7 font 'sans,8' notitle"
                          % (quote(d), off, col, col))
        header = ("%sset xlabel %s\nset ylabel %s\nset yrange [0:*]\nset style data histogram\n"
                  "set style histogram cluster gap 1\nset style fill solid 0.85 border -1\nset boxwidth 0.9\n"
                  "set xtics nomirror\nset offsets 0,0,graph 0.08,0\n"
                  % (title(title_, doc), quote(xlabel), quote(ylabel)))
        self.draw(name, header, "plot " + ", \\\n  ".join(plots + labels))


def main(argv):
    indir = argv[0] if argv else os.path.join("build", "bench")
    outdir = argv[1] if len(argv) > 1 else os.path.join(indir, "plots")
    r = Report(outdir)

    doc = load(indir, "boot")
    if doc:
        r.strip("boot-latency", "Boot to the init's marker, tinyvmm vs qemu microvm (same kernel and initramfs)", "VMM",
                "process start -> init marker on the console (ms)", doc,
                [("tinyvmm", "tinyvmm", "boot_to_marker_ms"), ("qemu microvm", "qemu_microvm", "boot_to_marker_ms")])
        r.bars("boot-rss", "Peak RSS of a boot, guest RAM included", "VMM", "peak RSS (KiB)", doc,
               [("peak RSS incl. guest RAM", "peak_rss_kib")], ["tinyvmm", "qemu_microvm"])

    doc = load(indir, "restore")
    if doc:
        variants = [s for s in ("tinyvmm", "tinyvmm_noseccomp", "tinyvmm_nocg", "tinyvmm_jailnocg", "tinyvmm_jail")
                    if s in doc.get("series", {})]
        r.strip("restore-latency", "Snapshot restore: process start -> result of `true`", "tinyvmm flags",
                "latency (ms)", doc,
                [(SYSTEMS[s], s, "start_to_result_ms") for s in variants])
        r.strip("restore-first-kvm-run", "Snapshot restore: process start -> first KVM_RUN (vCPUs resumed)", "tinyvmm flags",
                "latency (us)", doc, [(SYSTEMS[s], s, "start_to_first_kvm_run_us") for s in variants])

    doc = load(indir, "job")
    if doc:
        r.strip("job-latency", "Job: `tinyvmm run` -> first output and -> result (a first run may make the template snapshot)", "job: milestone",
                "latency (ms)", doc,
                [("true: first output", "tinyvmm", "true_first_output_ms"),
                 ("true: result", "tinyvmm", "true_result_ms"),
                 ("python3 -c pass: first output", "tinyvmm", "python3_c_pass_first_output_ms"),
                 ("python3 -c pass: result", "tinyvmm", "python3_c_pass_result_ms")])
        r.bars("vsock-throughput", "vsock throughput through `tinyvmm exec` (tinyvmm only)", "direction",
               "throughput (MiB/s)",
               doc, [("host -> guest", "vsock_host_to_guest_mib_s"), ("guest -> host", "vsock_guest_to_host_mib_s")],
               ["tinyvmm"])

    doc = load(indir, "blk")
    if doc:
        patterns = ["seq_write_1m", "seq_read_1m", "rand_read_4k", "rand_write_4k"]
        r.bars("blk-throughput", "virtio-blk, in-guest O_DIRECT, tinyvmm vs qemu microvm", "I/O pattern",
               "throughput (MiB/s)",
               doc, [(p.replace("_", "-"), p + "_mib_s") for p in patterns], ["tinyvmm", "qemu_microvm"])
        r.bars("blk-iops", "virtio-blk, in-guest O_DIRECT, tinyvmm vs qemu microvm", "I/O pattern",
               "I/O operations per second (IOPS)",
               doc, [(p.replace("_", "-"), p + "_iops") for p in patterns], ["tinyvmm", "qemu_microvm"])

    doc = load(indir, "net")
    if doc:
        nets = ["tinyvmm", "tinyvmm_allow", "tinyvmm_no_offload", "qemu_microvm"]
        r.bars("net-throughput", "virtio-net TCP bulk transfer, tinyvmm vs qemu microvm", "direction",
               "throughput (KiB/s)", doc,
               [("guest -> host", "guest_to_host_kib_s"), ("host -> guest", "host_to_guest_kib_s")], nets)
        r.bars("net-rtt", "virtio-net one-byte TCP round trip, tinyvmm vs qemu microvm", "statistic",
               "round-trip time (us)",
               doc, [("median", "rtt_median_us"), ("p99", "rtt_p99_us")], nets)

    doc = load(indir, "serve")
    if doc:
        c = doc.get("params", {}).get("C", "?")
        r.strip("serve-latency", "Sandbox service (tinyvmm serve): create and first result vs `tinyvmm run`", "measure",
                "latency (ms)", doc,
                [("API create -> 201", "tinyvmm", "api_create_ms"),
                 ("API create -> result of true", "tinyvmm", "api_first_result_ms"),
                 ("tinyvmm run -- true", "tinyvmm", "cli_run_true_ms"),
                 ("exec true through the API", "tinyvmm", "api_exec_ms"),
                 ("tinyvmm exec, same sandbox", "tinyvmm", "cli_exec_ms"),
                 ("%s concurrent creates -> 201" % c, "tinyvmm", "concurrent_create_ms")])

    for p in r.written:
        print("bench-report: wrote " + p)


if __name__ == "__main__":
    main(sys.argv[1:])
