#!/usr/bin/env python3
"""Merge the per-task results of tinyvmm Slurm arrays into one table.

tools/slurm/tinyvmm-array.sbatch leaves, per array task, in RESULTS_DIR:
  JOB-TASK.json        what `tinyvmm run --json` printed
  JOB-TASK.slurm.json  node, task, tinyvmm's exit status, the array's range
This prints one row per task (task, node, exit status, the job's exit code,
wall ms, ...), a summary per job, and writes the rows as CSV. Tasks with no
result (never ran, killed, still running), results that are not one JSON
object with an exit code, and failed tasks are flagged.

Fields of the result that older tinyvmm versions do not print are used when
present: `id` and `host` (else JOB-TASK and the node Slurm recorded), `error`
({stage, message}: the task is "error", with the stage, even when exit_code
is null), `ok` (false makes an exit-0 task "failed"), `status` (tinyvmm's
exit status, when the task left no .slurm.json), `timings.total_ms` (when
there is no host_total_ms). See vmm/cli/run-result.schema.json.

usage: aggregate.py [--job ID] [--tasks SPEC] [--csv FILE|-] [RESULTS_DIR]

  RESULTS_DIR   default ./results
  --job ID      only this array job (default: every job found)
  --tasks SPEC  the expected task ids, in sbatch --array syntax (0-99,120,200-300:2);
                default: the range each task recorded (SLURM_ARRAY_TASK_MIN/MAX/STEP)
  --csv FILE    CSV output (default RESULTS_DIR/JOB.csv, or summary.csv for
                several jobs; "-" for stdout, then the table is not printed)

Exit status: 0 when every expected task has a valid result and exit status
0; 1 when a task is missing, invalid or failed; 2 on bad usage or when there
are no results at all.
"""

import argparse
import csv
import json
import os
import re
import statistics
import sys

COLUMNS = ["job", "task", "id", "node", "host", "status", "error_stage", "exit_status", "exit_code", "signal",
           "timed_out", "started", "wall_ms", "cpu_ms", "max_rss_kib", "host_total_ms", "slurm_ms", "version",
           "problem"]
RESULT_RE = re.compile(r"^(\d+)-(\d+)\.json$")
SIDECAR_RE = re.compile(r"^(\d+)-(\d+)\.slurm\.json$")
PARTIAL_RE = re.compile(r"^(\d+)-(\d+)\.json\.tmp$")


def parse_tasks(spec):
    """Task ids of an sbatch --array spec ("0-9,12,20-30:2%4"); ValueError if malformed."""
    spec = spec.split("%", 1)[0]
    ids = set()
    for part in spec.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", part.strip())
        if not m:
            raise ValueError(f"bad task range {part!r}")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) else lo
        step = int(m.group(3)) if m.group(3) else 1
        if hi < lo or step < 1:
            raise ValueError(f"bad task range {part!r}")
        ids.update(range(lo, hi + 1, step))
    return ids


def pick(obj, *paths):
    """The first present value among dotted paths (the field layout of future
    tinyvmm versions may nest the job result; today it is flat)."""
    for path in paths:
        cur = obj
        for key in path.split("."):
            if not isinstance(cur, dict) or key not in cur:
                break
            cur = cur[key]
        else:
            return cur
    return None


def load_json(path):
    """(object, None) or (None, why it is not a result object)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return None, f"unreadable: {e.strerror}"
    if not data.strip():
        return None, "empty"
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        return None, f"not JSON ({e})"
    if not isinstance(obj, dict):
        return None, "not a JSON object"
    return obj, None


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def scalar(v):
    """A cell value from a JSON value: objects, lists and null are blank."""
    return "" if v is None or isinstance(v, (dict, list)) else v


def row_for(job, task, results_dir, names):
    row = dict.fromkeys(COLUMNS, "")
    row.update(job=job, task=task, id=f"{job}-{task}")
    problems = []
    side, side_err = None, None
    side_name = f"{job}-{task}.slurm.json"
    if side_name in names:
        side, side_err = load_json(os.path.join(results_dir, side_name))
        if side_err:
            problems.append(f"{side_name}: {side_err}")
    if side:
        row["node"] = side.get("node", "")
        row["exit_status"] = side.get("exit_status", "")
        if is_int(side.get("started_ms")) and is_int(side.get("ended_ms")):
            row["slurm_ms"] = side["ended_ms"] - side["started_ms"]

    name = f"{job}-{task}.json"
    if name not in names:
        row["status"] = "missing"
        if f"{name}.tmp" in names:
            problems.append("no result yet (task still running, or killed while running)")
        elif side:
            problems.append("tinyvmm ran but left no result file")
        else:
            problems.append("no result (task did not run or results went elsewhere)")
        row["problem"] = "; ".join(problems)
        return row

    res, err = load_json(os.path.join(results_dir, name))
    if err:
        row["status"] = "invalid"
        problems.append(f"{name}: {err}")
        if is_int(row["exit_status"]):
            problems.append(f"tinyvmm exited {row['exit_status']}")
        row["problem"] = "; ".join(problems)
        return row
    # Newer tinyvmm: the batch id and the host it ran on. The node column
    # stays Slurm's name when the task recorded one.
    row["id"] = scalar(pick(res, "id")) or row["id"]
    row["host"] = scalar(pick(res, "host", "hostname"))
    row["node"] = row["node"] or row["host"]
    row["version"] = scalar(pick(res, "version"))
    # tinyvmm's own exit status, when the task left no Slurm-side record.
    if not is_int(row["exit_status"]) and is_int(res.get("status")):
        row["exit_status"] = res["status"]
    code = pick(res, "exit_code", "result.exit_code", "job.exit_code")
    error = pick(res, "error")
    for col, paths in (("signal", ("signal", "result.signal")),
                       ("timed_out", ("timed_out", "result.timed_out")),
                       ("started", ("started", "vm.started")),
                       ("wall_ms", ("wall_ms", "result.wall_ms")),
                       ("cpu_ms", ("cpu_ms", "result.cpu_ms")),
                       ("max_rss_kib", ("max_rss_kib", "result.max_rss_kib")),
                       ("host_total_ms", ("host_total_ms", "timings.host_total_ms", "timings.total_ms"))):
        row[col] = scalar(pick(res, *paths))
    row["exit_code"] = code if is_int(code) else ""
    if error:
        # {stage, message} (a failure before or around the job, when
        # exit_code may be null); a plain string is taken as the message.
        row["status"] = "error"
        msg = error.get("message", "") if isinstance(error, dict) else error
        stage = scalar(error.get("stage")) if isinstance(error, dict) else ""
        row["error_stage"] = stage
        problems.append(f"tinyvmm error{' in ' + str(stage) if stage != '' else ''}"
                        f"{': ' + str(msg) if msg not in ('', None) else ''}")
        if is_int(row["exit_status"]):
            problems.append(f"tinyvmm exited {row['exit_status']}")
    elif not is_int(code):
        row["status"] = "invalid"
        problems.append(f"{name}: no integer exit_code")
    status = row["exit_status"] if is_int(row["exit_status"]) else code
    if not row["status"]:
        row["status"] = "ok" if status == 0 else "failed"
    if not error and is_int(row["exit_status"]) and is_int(code) and row["exit_status"] != code and not row["timed_out"]:
        problems.append(f"tinyvmm exited {row['exit_status']} but the job's exit_code is {code}")
        if row["status"] == "ok":
            row["status"] = "failed"
    if res.get("ok") is False and row["status"] == "ok":
        row["status"] = "failed"
        problems.append("tinyvmm says ok: false")
    if row["timed_out"] is True:
        problems.append("timed out")
    row["problem"] = "; ".join(problems)
    return row


def cell(v):
    """A CSV/table cell: JSON spelling for booleans."""
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def expected_tasks(job, found, sidecars, override):
    """(task ids to report, note) for one job."""
    if override is not None:
        return override | found, ""
    for side in sidecars:
        try:
            lo, hi, step, count = (int(side[k]) for k in ("task_min", "task_max", "task_step", "task_count"))
        except (KeyError, TypeError, ValueError):
            continue
        ids = set(range(lo, hi + 1, max(step, 1)))
        if len(ids) == count:
            return ids | found, ""
        # An irregular --array list (0,5,17): only the count is known.
        if count > len(found):
            return found, f"{count - len(found)} of {count} tasks have no result (irregular --array; give --tasks)"
        return found, ""
    return found, ""


def write_csv(f, rows):
    w = csv.DictWriter(f, COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows({k: cell(v) for k, v in r.items()} for r in rows)


def print_table(rows, out):
    cols = ["job", "task", "node", "status", "exit_status", "exit_code", "started", "wall_ms", "host_total_ms",
            "problem"]
    # The tinyvmm id, when one differs from JOB-TASK (--id in the run args).
    if any(r["id"] != f"{r['job']}-{r['task']}" for r in rows):
        cols.insert(2, "id")
    # The host tinyvmm ran on, when one differs from Slurm's node name.
    if any(r["host"] != "" and r["host"] != r["node"] for r in rows):
        cols.insert(cols.index("node") + 1, "host")
    head = {"exit_status": "exit", "exit_code": "job_exit", "host_total_ms": "total_ms"}
    cells = [[head.get(c, c) for c in cols]] + [[cell(r[c]) for c in cols] for r in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(cols))]
    for line in cells:
        print("  ".join(v.ljust(w) for v, w in zip(line, widths)).rstrip(), file=out)


def summary(job, rows, note):
    count = {s: sum(1 for r in rows if r["status"] == s) for s in ("ok", "failed", "error", "invalid", "missing")}
    nodes = {}
    for r in rows:
        if r["node"]:
            nodes[r["node"]] = nodes.get(r["node"], 0) + 1
    line = (f"job {job}: {len(rows)} tasks, {count['ok']} ok, {count['failed']} failed, "
            f"{count['error']} error, {count['invalid']} invalid, {count['missing']} missing")
    line += "; nodes: " + (", ".join(f"{n} ({k})" for n, k in sorted(nodes.items())) or "none")
    stages = {}
    for r in rows:
        if r["status"] == "error" and r["error_stage"] != "":
            stages[str(r["error_stage"])] = stages.get(str(r["error_stage"]), 0) + 1
    if stages:
        line += "; errors in: " + ", ".join(f"{s} ({k})" for s, k in sorted(stages.items()))
    walls = [r["host_total_ms"] for r in rows if is_int(r["host_total_ms"])]
    if walls:
        line += f"; total ms median {statistics.median(walls):.0f}, max {max(walls)}"
    if note:
        line += f"; {note}"
    return line, any(count[s] for s in ("failed", "error", "invalid", "missing")) or bool(note)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("results_dir", nargs="?", default="results")
    ap.add_argument("--job")
    ap.add_argument("--tasks")
    ap.add_argument("--csv")
    args = ap.parse_args(argv)
    try:
        override = parse_tasks(args.tasks) if args.tasks else None
    except ValueError as e:
        ap.error(str(e))
    try:
        names = set(os.listdir(args.results_dir))
    except OSError as e:
        print(f"aggregate: {args.results_dir}: {e.strerror}", file=sys.stderr)
        return 2

    jobs = {}
    for n in names:
        m = RESULT_RE.match(n) or SIDECAR_RE.match(n) or PARTIAL_RE.match(n)
        if m and (args.job is None or m.group(1) == args.job):
            jobs.setdefault(m.group(1), set()).add(int(m.group(2)))
    if args.job and args.job not in jobs:
        jobs[args.job] = set()
    if not jobs or (override is None and not any(jobs.values())):
        print(f"aggregate: no results in {args.results_dir}", file=sys.stderr)
        return 2

    rows, lines, bad = [], [], False
    for job in sorted(jobs, key=int):
        sidecars = []
        for t in sorted(jobs[job]):
            n = f"{job}-{t}.slurm.json"
            if n in names:
                obj, _ = load_json(os.path.join(args.results_dir, n))
                if obj:
                    sidecars.append(obj)
        ids, note = expected_tasks(job, jobs[job], sidecars, override)
        job_rows = [row_for(job, t, args.results_dir, names) for t in sorted(ids)]
        line, job_bad = summary(job, job_rows, note)
        rows += job_rows
        lines.append(line)
        bad |= job_bad

    csv_path = args.csv or os.path.join(args.results_dir, f"{next(iter(jobs))}.csv" if len(jobs) == 1 else "summary.csv")
    if csv_path == "-":
        write_csv(sys.stdout, rows)
        for line in lines:
            print(line, file=sys.stderr)
    else:
        tmp = f"{csv_path}.tmp"
        with open(tmp, "w", newline="") as f:
            write_csv(f, rows)
        os.replace(tmp, csv_path)
        print_table(rows, sys.stdout)
        for line in lines:
            print(line)
        print(f"csv: {csv_path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
