#!/usr/bin/env bash
# The sandbox service's tests (make integration runs this; root and
# /dev/kvm, else the suites skip):
#   1. tests/serve: `tinyvmm serve` against vmm/serve/openapi.json, the
#      acceptance list of issue 14 (it starts and stops its own daemon);
#   2. the SDKs (issue 15): Python unittest and `node --test`, their
#      fake-daemon tests and their live tests against one real daemon
#      started here, whose sandboxes are all deleted before it stops.
# Usage: tests/serve/run.sh VMLINUX ROOTFS (the guest the sandboxes run;
# their template snapshot is made once, in a cache removed at the end).
set -euo pipefail
cd "$(dirname "$0")/../.."
data=$(mktemp -d /tmp/tinyvmm-serve-data-XXXXXX)
trap 'rm -rf "$data"' EXIT
ln -s "$(readlink -f "$1")" "$data/vmlinux"
ln -s "$(readlink -f "$2")" "$data/rootfs.ext4"
mkdir "$data/cache"
export TINYVMM_DATA_DIR=$data TINYVMM_CACHE=$data/cache

echo "-- tests/serve (daemon API)"
python3 -m unittest discover -s tests/serve

work=$(mktemp -d /tmp/tinyvmm-sdk-XXXXXX)
sock=$work/api.sock
daemon=
cleanup() {
	if [ -n "$daemon" ]; then
		# Every sandbox of this daemon ends with it (SIGTERM alone would
		# leave them running for the next daemon to re-adopt).
		SOCK=$sock python3 - <<'PY' || true
import http.client, json, os, socket
class C(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(os.environ["SOCK"])
def call(m, p):
    c = C("tinyvmm", timeout=60); c.request(m, p); r = c.getresponse(); b = r.read(); c.close(); return b
for sb in json.loads(call("GET", "/v1/sandboxes?state=running"))["sandboxes"]:
    call("DELETE", "/v1/sandboxes/" + sb["id"])
PY
		sleep 6
		kill -TERM "$daemon" 2>/dev/null || true
		wait "$daemon" 2>/dev/null || true
	fi
	rm -rf "$work" "$data"
}
trap cleanup EXIT
if [ "$(id -u)" = 0 ] && [ -w /dev/kvm ]; then
	./tinyvmm serve --socket "$sock" --state-dir "$work/state" --socket-mode 0666 2>"$work/daemon.log" &
	daemon=$!
	for _ in $(seq 100); do [ -S "$sock" ] && break; sleep 0.1; done
	export TINYVMM_SERVE_SOCKET=$sock
fi
echo "-- sdk/python (fake daemon${daemon:+, then live})"
python3 -m unittest discover -s sdk/python/tests
if command -v node >/dev/null; then
	echo "-- sdk/js (fake daemon${daemon:+, then live})"
	node --test sdk/js/test
else
	echo "-- sdk/js: SKIP (no node)"
fi
