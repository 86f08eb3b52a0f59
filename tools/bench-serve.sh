#!/usr/bin/env bash
# Sandbox service benchmark (issue 14): what `tinyvmm serve` adds to a
# restore.
#   - N times (default 5): POST /v1/sandboxes then POST .../execs `true`,
#     create -> 201 and create -> first result, next to N of
#     `tinyvmm run -- true` (the same template snapshot, restored by the
#     CLI; process start -> result);
#   - C sandboxes (default 20) created at once: p50 and p99 of the create.
# As root (the daemon jails its VMMs); the default template is made first
# if missing. Prints a table and writes build/bench/serve.json
# (tools/bench-json.py: the raw samples, median and p99); asserts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-5} C=${C:-20}
make -s tinyvmm guest
work=$(mktemp -d)
sock=$work/api.sock
./tinyvmm serve --socket "$sock" --state-dir "$work/state" --max-sandboxes $((C + 2)) --max-per-owner $((C + 2)) \
	2>"$work/daemon.log" &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$work"' EXIT
N=$N C=$C SOCK=$sock OUT=$work/series python3 - <<'EOF'
import json, os, socket, subprocess, sys, threading, time
import http.client

sock, N, C = os.environ["SOCK"], int(os.environ["N"]), int(os.environ["C"])

class Conn(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("tinyvmm", timeout=1800)
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.settimeout(1800)
        self.sock.connect(sock)

def call(method, path, body=None):
    c = Conn()
    c.request(method, path, body=json.dumps(body) if body is not None else None)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, (json.loads(data) if data else None)

for _ in range(300):
    try:
        if call("GET", "/v1/health")[0] == 200:
            break
    except OSError:
        time.sleep(0.2)
# The template: made by the first create if missing (not timed).
st, sb = call("POST", "/v1/sandboxes", {})
assert st == 201, sb
call("DELETE", "/v1/sandboxes/" + sb["id"])

def pct(v, p):
    v = sorted(v)
    return v[max(0, min(len(v) - 1, int(len(v) * p + 0.999) - 1))]

create, first = [], []
for _ in range(N):
    t0 = time.monotonic()
    st, sb = call("POST", "/v1/sandboxes", {})
    t1 = time.monotonic()
    st2, res = call("POST", "/v1/sandboxes/%s/execs" % sb["id"], {"cmd": ["true"]})
    t2 = time.monotonic()
    call("DELETE", "/v1/sandboxes/" + sb["id"])
    create.append((t1 - t0) * 1000)
    first.append((t2 - t0) * 1000)
    time.sleep(1)
cli = []
for _ in range(N):
    t0 = time.monotonic()
    subprocess.run(["./tinyvmm", "run", "--", "true"], check=True, stderr=subprocess.DEVNULL)
    cli.append((time.monotonic() - t0) * 1000)

conc = [None] * C
def one(i):
    t0 = time.monotonic()
    st, sb = call("POST", "/v1/sandboxes", {})
    conc[i] = ((time.monotonic() - t0) * 1000, st, sb)
ts = [threading.Thread(target=one, args=(i,)) for i in range(C)]
t0 = time.monotonic()
for t in ts: t.start()
for t in ts: t.join()
wall = (time.monotonic() - t0) * 1000
ok = [x[0] for x in conc if x[1] == 201]
for x in conc:
    if x[1] == 201:
        call("DELETE", "/v1/sandboxes/" + x[2]["id"])

print("%-56s %10s %10s" % ("sandbox service, %d runs (kvm_pvm host: guest kernel emulated)" % N, "median", "p99"))
rows = [("API create -> 201 (ms)", create), ("API create -> result of `true` (ms)", first),
        ("tinyvmm run -- true: start -> result (ms)", cli),
        ("%d concurrent creates: create -> 201 (ms, %d ok)" % (C, len(ok)), ok)]
for name, v in rows:
    print("%-56s %10.1f %10.1f" % (name, pct(v, 0.5), pct(v, 0.99)) if v else "%-56s %10s" % (name, "none"))
print("%-56s %10.1f" % ("%d concurrent creates: all done (ms)" % C, wall))
# Series lines for tools/bench-json.py.
with open(os.environ["OUT"], "w") as f:
    for name, v in [("api_create_ms", create), ("api_first_result_ms", first), ("cli_run_true_ms", cli),
                    ("concurrent_create_ms", ok), ("concurrent_wall_ms", [wall])]:
        print("tinyvmm/" + name, *["%.1f" % x for x in v], file=f)
    print("tinyvmm/concurrent_ok_count", len(ok), file=f)
EOF
python3 tools/bench-json.py serve --kernel build/guest/vmlinux N="$N" C="$C" <"$work/series"
echo "written: build/bench/serve.json"
