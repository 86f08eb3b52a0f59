"""Integration tests of `tinyvmm serve` (vmm/serve/API.md), the acceptance
list of issue 14. Standard library only; run as root (else every test is
skipped). Without a usable /dev/kvm the daemon still runs, and a test is
skipped at its first request that needed a VM (the daemon's answer said
that its VMM could not open /dev/kvm): what needs no VM is still tested
(the HTTP and JSON layers, hostile input, validation):

    python3 -m unittest discover -s tests/serve -v

The module starts one daemon of <repo>/tinyvmm on a socket in a temporary
directory DIR and stops it at the end (after deleting every sandbox), then
checks that nothing was left behind: no process whose command line holds
DIR or a sandbox id, no DIR/state/sandboxes/*/vsock.sock, no jail directory
or cgroup named after a sandbox id.

Owners: uid 0 (this process, owner A), uid 1001 (owner B, through a forked
child that setuid()s), uid 1002 (a third party that has only a token).
VMs are few: one long-lived sandbox per owner (A1, B1) serves most tests;
the lifetime, crash and capacity tests make their own. Every request and
answer goes through apicheck (vmm/serve/openapi.json); a mismatch fails the
test that made it. Nothing asserts a wall-clock duration: waits are polls
with generous limits (the guest kernel may be emulated here).

Tests are ordered (unittest sorts classes and methods by name): the
restart test is last.
"""
import base64
import datetime
import glob
import hashlib
import ipaddress
import json
import os
import re
import resource
import secrets
import shutil
import struct
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import apicheck  # noqa: E402
import client  # noqa: E402
from client import Client, as_uid  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
BIN = os.path.join(ROOT, "tinyvmm")
DOC = os.path.join(ROOT, "vmm", "serve", "openapi.json")

UID_A, UID_B, UID_C = 0, 1001, 1002
WAIT = 120          # seconds: any poll for a state change
CREATE_WAIT = 900   # seconds: a create (the first may build the default template)
EXEC_WAIT = 900     # seconds: an HTTP exchange that runs a guest command
MIB = 1 << 20

API = apicheck.load(DOC)
DIR = SOCK = STATE = LOG = None
DAEMON = None
SANDBOXES = {}      # "A"/"B" -> dict of the module sandboxes
CREATED = {}        # every sandbox id made here -> (owner uid, token)
FAILED_CREATES = {}  # "A"/"B" -> why the module sandbox could not be made
START_RSS = None
# No VM can start here: a request that would need one makes its test skip.
NO_VM = not os.access("/dev/kvm", os.R_OK | os.W_OK)


# --- the daemon ---------------------------------------------------------

EXTRA_ARGS = []     # what a test adds to the daemon's flags for a while


def daemon_args():
    return [BIN, "serve", "--socket", SOCK, "--state-dir", STATE, "--socket-mode", "0666",
            "--max-sandboxes", "6", "--max-per-owner", "4"] + EXTRA_ARGS


def read_text(path):
    with open(path, errors="replace") as f:
        return f.read()


def log_tail(n=40):
    try:
        with open(LOG, "rb") as f:
            return b"\n".join(f.read().splitlines()[-n:]).decode("utf-8", "replace")
    except OSError:
        return "(no log)"


def start_daemon():
    global DAEMON
    logf = open(LOG, "ab")
    DAEMON = subprocess.Popen(daemon_args(), stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT)
    logf.close()
    deadline = time.monotonic() + WAIT
    while True:
        if DAEMON.poll() is not None:
            raise RuntimeError("tinyvmm serve exited with %d:\n%s" % (DAEMON.returncode, log_tail()))
        try:
            r = Client(SOCK, API, timeout=10).get("/v1/health")
            if r.status == 200:
                return
        except (FileNotFoundError, ConnectionRefusedError, socket.timeout, ConnectionResetError):
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("tinyvmm serve did not answer /v1/health in %d s:\n%s" % (WAIT, log_tail()))
        time.sleep(0.2)


def stop_daemon(timeout=WAIT):
    """SIGTERM, wait; SIGKILL if it does not go. True if it ended by itself."""
    if DAEMON is None or DAEMON.poll() is not None:
        return True
    DAEMON.send_signal(signal.SIGTERM)
    try:
        DAEMON.wait(timeout)
        return True
    except subprocess.TimeoutExpired:
        DAEMON.kill()
        DAEMON.wait()
        return False


def vmrss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for ln in f:
            if ln.startswith("VmRSS:"):
                return int(ln.split()[1])
    return 0


def procs_matching(text):
    """pids (not ours) whose command line holds text."""
    out = []
    me = os.getpid()
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == me:
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
        except OSError:
            continue
        if text.encode() in cmd:
            out.append(int(d))
    return out


def proc_status(pid):
    """/proc/PID/status as a dict ({} once it is gone)."""
    try:
        with open("/proc/%d/status" % pid) as f:
            return dict(ln.rstrip("\n").split(":\t", 1) for ln in f if ":\t" in ln)
    except OSError:
        return {}


def is_helper_of(pid, daemon):
    """Whether pid is the privileged helper of the daemon (a fork of it,
    vmm/serve/serve_priv.c): part of the daemon, not a leak."""
    st = proc_status(pid)
    return st.get("Name") == "tinyvmm-priv" and st.get("PPid") == str(daemon)


def vmm_pids(sid):
    return [p for p in procs_matching(sid) if DAEMON is None or p != DAEMON.pid]


def vsock_files():
    return sorted(glob.glob(os.path.join(STATE, "sandboxes", "*", "vsock.sock")))


def leaks(running=()):
    """What is left behind beyond the daemon and the VMMs of the running
    sandbox ids given."""
    found = []
    running = set(running)
    for pid in procs_matching(DIR):
        if DAEMON is not None and DAEMON.poll() is None and (pid == DAEMON.pid or is_helper_of(pid, DAEMON.pid)):
            continue
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if not any(s in cmd for s in running):
            found.append("process %d: %s" % (pid, cmd[:300]))
    for sid in CREATED:
        if sid in running:
            continue
        for pid in vmm_pids(sid):
            found.append("process %d of ended sandbox %s" % (pid, sid))
    for f in vsock_files():
        name = os.path.basename(os.path.dirname(f))
        if name not in running:
            found.append("socket " + f)
    jails = "/run/tinyvmm/jail"
    if os.path.isdir(jails):
        for name in os.listdir(jails):
            if any(sid[4:] in name for sid in CREATED if sid not in running):
                found.append("jail dir %s/%s" % (jails, name))
    ended_ids = [sid[4:] for sid in CREATED if sid not in running]
    for sid in ended_ids:  # a networked sandbox's TAP: "tvs" + 8 hex digits of its id
        if os.path.exists("/sys/class/net/tvs" + sid[:8]):
            found.append("TAP tvs" + sid[:8])
    if ended_ids and os.path.isdir("/sys/fs/cgroup"):
        for top, dirs, _ in os.walk("/sys/fs/cgroup"):
            if top.count("/") > 7:
                dirs[:] = []
                continue
            for d in dirs:
                if any(i in d for i in ended_ids):
                    found.append("cgroup %s/%s" % (top, d))
    return found


def setUpModule():
    global DIR, SOCK, STATE, LOG, START_RSS
    if os.geteuid() != 0:
        raise unittest.SkipTest("needs root (it runs requests as uids 0, 1001 and 1002)")
    if not os.access(BIN, os.X_OK):
        raise RuntimeError("no %s: build it first" % BIN)
    DIR = tempfile.mkdtemp(prefix="tvm-serve-")
    os.chmod(DIR, 0o755)  # uids 1001 and 1002 reach the socket
    SOCK = os.path.join(DIR, "api.sock")
    STATE = os.path.join(DIR, "state")
    LOG = os.path.join(DIR, "daemon.log")
    try:
        start_daemon()
    except BaseException:
        stop_daemon(10)
        raise
    START_RSS = vmrss_kib(DAEMON.pid)


def delete_everything():
    if DAEMON is None or DAEMON.poll() is not None:
        return
    # paused ones too (a test that failed midway): they keep a TAP
    for uid in (UID_A, UID_B, UID_C):
        for state in ("running", "paused"):
            r = call(uid, "GET", "/v1/sandboxes?state=" + state)
            for sb in (r.json or {}).get("sandboxes", []):
                call(uid, "DELETE", "/v1/sandboxes/" + sb["id"])
    for sid, (uid, tok) in CREATED.items():
        wait_for(lambda: (call(uid, "GET", "/v1/sandboxes/" + sid).json or {}).get("state")
                 not in ("running", "paused"), "sandbox %s to end" % sid, check=False)


def tearDownModule():
    problems = []
    try:
        try:
            delete_everything()
        except Exception as e:  # noqa: BLE001 - go on to stop the daemon and look for leaks
            problems.append("deleting the sandboxes: %r" % e)
        if not stop_daemon():
            problems.append("the daemon did not exit within %d s of SIGTERM" % WAIT)
        deadline = time.monotonic() + 30
        while leaks() and time.monotonic() < deadline:
            time.sleep(0.5)
        problems += leaks()
    finally:
        for pid in procs_matching(DIR or "/nonexistent-dir"):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        fails = client.take_failures()
        if fails:
            problems += ["API check: " + f for f in fails]
        if problems:
            raise AssertionError("after the daemon's end (its log and state kept in %s):\n  %s"
                                 % (DIR, "\n  ".join(problems)))
        if DIR:
            shutil.rmtree(DIR, ignore_errors=True)


# --- requests -----------------------------------------------------------

def call(uid, method, target, token=None, **kw):
    """One request as uid -> client.Response. Without /dev/kvm, an answer
    saying that a VMM could not start for want of it skips the test."""
    c = Client(SOCK, API, token=token, timeout=kw.pop("timeout", WAIT))
    r = c.request(method, target, **kw) if uid == 0 else as_uid(uid, c.request, method, target, **kw)
    if NO_VM and r.status >= 500 and b"/dev/kvm" in (r.body or b""):
        client.take_failures()  # an answer of a test that does not run
        raise unittest.SkipTest("needs /dev/kvm: %s %s answered %d" % (method, target, r.status))
    return r


def stream_events(uid, method, target, token=None, **kw):
    """(status, content type, [events]) of a whole ndjson stream, as uid."""
    def run():
        c = Client(SOCK, API, token=token, timeout=kw.pop("timeout", EXEC_WAIT))
        with c.stream(method, target, **kw) as s:
            if s.status != 200:
                return s.status, s.header("Content-Type"), s.json
            return s.status, s.header("Content-Type"), list(s.events())
    return run() if uid == 0 else as_uid(uid, run)


def run_exec(uid, sid, body, token=None, **kw):
    return call(uid, "POST", "/v1/sandboxes/%s/execs" % sid, token=token, json=body,
                accept="application/json", timeout=kw.pop("timeout", EXEC_WAIT), **kw)


def create(uid, body=None, expect=201):
    if NO_VM and expect == 201:
        raise unittest.SkipTest("needs /dev/kvm: a create")
    r = call(uid, "POST", "/v1/sandboxes", json=body or {}, timeout=CREATE_WAIT)
    if r.status == 201 and r.json:
        CREATED[r.json["id"]] = (uid, r.json["access_token"])
    if expect is not None and r.status != expect:
        raise AssertionError("create as uid %d: %d, wanted %d: %r\n%s" % (uid, r.status, expect, r.body, log_tail()))
    return r


def delete(uid, sid):
    return call(uid, "DELETE", "/v1/sandboxes/" + sid)


def wait_for(pred, what, timeout=WAIT, interval=1.0, check=True):
    deadline = time.monotonic() + timeout
    while True:
        try:
            v = pred()
        except (OSError, AttributeError, TypeError):
            v = None
        if v:
            return v
        if time.monotonic() > deadline:
            if check:
                raise AssertionError("waited %d s for %s" % (timeout, what))
            return None
        time.sleep(interval)


def delete_during(uid, sid, what, **kw):
    """POST .../what, and a DELETE of sid 0.2 s after it was sent: the
    first request's Response (said in the log)."""
    got = {}
    t = threading.Thread(target=lambda: got.update(
        r=call(uid, "POST", "/v1/sandboxes/%s/%s" % (sid, what), check="response", **kw)))
    t.start()
    time.sleep(0.2)
    delete(uid, sid)
    t.join()
    print("\n  %s answered %d to a DELETE 0.2 s in" % (what, got["r"].status), end="")
    return got["r"]


def wait_ended(uid, sid, timeout=WAIT, interval=1.0):
    def ended():
        r = call(uid, "GET", "/v1/sandboxes/" + sid)
        return r.json if r.status == 200 and r.json["state"] == "ended" else None
    return wait_for(ended, "sandbox %s to end" % sid, timeout, interval)


def ts(s):
    return datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))


def hostfile(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def module_sandbox(name):
    """The long-lived sandbox of owner A (uid 0) or B (uid 1001), made on
    first use."""
    if name in SANDBOXES:
        return SANDBOXES[name]
    if NO_VM:
        raise unittest.SkipTest("needs /dev/kvm: the module sandboxes")
    if name in FAILED_CREATES:  # one try only: no stream of VMs for a broken create
        raise AssertionError("the module sandbox %s could not be made: %s" % (name, FAILED_CREATES[name]))
    uid = UID_A if name == "A" else UID_B
    secret = "zq" + secrets.token_hex(16)
    suite = "serve-test-" + secrets.token_hex(4)
    body = {"envs": {"PLAIN_VAR": "plain-value"}, "secret_envs": {"SECRET_VAR": secret},
            "metadata": {"suite": suite, "owner": name}}
    try:
        r = create(uid, body)
    except BaseException as e:
        FAILED_CREATES[name] = str(e)[:2000]
        raise
    sb = {"id": r.json["id"], "token": r.json["access_token"], "uid": uid, "secret": secret,
          "suite": suite, "create": r, "body": body}
    SANDBOXES[name] = sb
    return sb


def extend(sb):
    """Keep a module sandbox from expiring: its timeout as long as the
    server allows (1800 s, else the default 300)."""
    for t in (1800, 300):
        r = call(sb["uid"], "POST", "/v1/sandboxes/%s/timeout" % sb["id"], json={"timeout_s": t},
                 check="response" if t == 1800 else True)
        if r.status == 200:
            return r
    return r


def check_offsets(tc, events):
    """Output events have contiguous offsets; returns (stdout, stderr) bytes."""
    out = {"stdout": b"", "stderr": b""}
    nxt = None
    for ev in events:
        if ev.get("type") in ("stdout", "stderr"):
            data = base64.b64decode(ev["data"])
            if nxt is not None:
                tc.assertEqual(ev["offset"], nxt, "output offsets are contiguous")
            nxt = ev["offset"] + len(data)
            out[ev["type"]] += data
    return out["stdout"], out["stderr"]


def check_stream_shape(tc, events):
    """start first, exactly one terminal event, last."""
    tc.assertTrue(events, "no events")
    tc.assertEqual(events[0]["type"], "start", events[:3])
    terminal = [e for e in events if e["type"] in ("exit", "error")]
    tc.assertEqual(len(terminal), 1, terminal)
    tc.assertIs(events[-1], terminal[0], "the exit/error event is the last")
    for e in events[1:-1]:
        tc.assertIn(e["type"], ("stdout", "stderr", "keepalive"))
    return terminal[0]


class ServeTest(unittest.TestCase):
    maxDiff = 4000

    def setUp(self):
        client.take_failures()  # not ours
        for sb in SANDBOXES.values():
            extend(sb)

    def tearDown(self):
        fails = client.take_failures()
        alive = DAEMON is not None and DAEMON.poll() is None
        if fails:
            self.fail("answers not as openapi.json says:\n  " + "\n  ".join(fails))
        if not alive:
            self.fail("the daemon is gone:\n" + log_tail())

    def a(self):
        return module_sandbox("A")

    def b(self):
        return module_sandbox("B")

    def expect_not_allowed(self, method, target, **kw):
        """method on target answers 405 with Allow listing the methods the
        API document gives the path (RFC 9110 §15.5.6)."""
        r = call(UID_A, method, target, check=False, **kw)
        self.expect_error(r, 405, "method_not_allowed")
        allow = r.header("Allow")
        self.assertIsNotNone(allow, "%s %s: 405 without Allow" % (method, target))
        self.assertEqual(set(allow.split(", ")), API.methods_of(target), "%s %s" % (method, target))

    def expect_error(self, r, statuses, error=None, http_level=False):
        """r (a Response or raw bytes) is an error answer with a status in
        statuses and an Error body."""
        if isinstance(r, (bytes, bytearray)):
            status, headers, body = client.parse_raw(r)
        else:
            status, headers, body = r.status, r.headers, r.body
        if isinstance(statuses, int):
            statuses = (statuses,)
        self.assertIn(status, statuses, body[:300])
        errs = API.check_error(status, body, http_level=http_level)
        self.assertEqual(errs, [], body[:300])
        e = json.loads(body)
        if error:
            self.assertEqual(e["error"], error)
        return e


# --- 01: the service ----------------------------------------------------

class T01Service(ServeTest):
    def test_health_and_version(self):
        r = call(UID_A, "GET", "/v1/health")
        self.assertEqual(r.status, 200)
        if NO_VM:  # the daemon answers, and says why no sandbox can start
            self.assertEqual(r.json["status"], "degraded")
            self.assertEqual(len(r.json["problems"]), 1, r.json)
            self.assertRegex(r.json["problems"][0], r"^/dev/kvm: .*: no sandbox can start \(.*\)$")
        else:
            self.assertEqual((r.json["status"], r.json["problems"]), ("ok", []))
        r = call(UID_B, "GET", "/v1/version")
        self.assertEqual(r.status, 200)
        self.assertEqual(r.json["api"], "v1")
        m = re.search(r'TVM_VERSION "([^"]+)"', (hostfile(os.path.join(ROOT, "vmm/core/version.h")) or b"").decode())
        if m:
            self.assertEqual(r.json["version"], m.group(1))

    def test_create_on_a_host_without_kvm(self):
        """No usable /dev/kvm: a create is 503 `unavailable`, answered
        before any VMM is started (no sandbox directory appears), as any
        user would see it; not a 500 after a VMM failed."""
        if not NO_VM:
            self.skipTest("/dev/kvm is usable here: a create starts a VM")
        boxes = os.path.join(STATE, "sandboxes")
        before = set(os.listdir(boxes)) if os.path.isdir(boxes) else set()
        r = as_uid(UID_A, Client(SOCK, API, timeout=WAIT).request, "POST", "/v1/sandboxes", json={})
        e = self.expect_error(r, 503, "unavailable")
        self.assertRegex(e["message"], r"^/dev/kvm: .*: no sandbox can start \(.*\)$")
        self.assertIsNotNone(r.header("Retry-After"))
        self.assertEqual(set(os.listdir(boxes)) if os.path.isdir(boxes) else set(), before)
        self.assertNotIn("ended by itself", log_tail(200))

    def test_pool_sized_where_no_sandbox_can_start(self):
        """A pool sized while no sandbox can start keeps its size and its
        answer says why it stays empty (it said only 200 and ready 0)."""
        if not NO_VM:
            self.skipTest("/dev/kvm is usable here: the pool would fill")
        try:
            p = set_pool(2)
            self.assertEqual((p["size"], p["ready"], p["starting"]), (2, 0, 0))
            self.assertEqual(len(p["problems"]), 1, p)
            self.assertRegex(p["problems"][0], r"^/dev/kvm: .*: no sandbox can start \(.*\)$")
            self.assertEqual(call(UID_B, "GET", POOL).json["problems"], p["problems"])
        finally:
            self.assertEqual(set_pool(0)["size"], 0)

    def test_unknown_route_and_method(self):
        self.expect_error(call(UID_A, "GET", "/v1/nothing", check=False), 404, "not_found")
        self.expect_error(call(UID_A, "GET", "/v2/health", check=False), 404, "not_found")
        self.expect_not_allowed("PATCH", "/v1/health")
        self.expect_not_allowed("POST", "/v1/version")
        self.expect_not_allowed("PUT", "/v1/sandboxes", json={})
        self.expect_not_allowed("DELETE", "/v1/templates")
        self.expect_not_allowed("POST", "/v1/templates/default")
        self.expect_not_allowed("POST", "/v1/templates/default/pool")


# --- 02: sandboxes and who may use them ---------------------------------

class T02Sandboxes(ServeTest):
    def test_01_create_fields(self):
        a = self.a()
        r = a["create"]
        self.assertEqual(r.status, 201)
        j = r.json
        self.assertRegex(j["id"], r"^sbx_[0-9a-f]{32}$")
        self.assertRegex(j["access_token"], r"^[0-9a-f]{32}$")
        self.assertEqual(j["state"], "running")
        self.assertEqual(j["template"], "default")
        self.assertEqual(j["metadata"], a["body"]["metadata"])
        self.assertEqual((j["cpus"], j["memory_mib"], j["idle_timeout_s"]), (1, 256, 0))
        self.assertIsNone(j["ended_at"])
        self.assertIsNone(j["end_reason"])
        self.assertGreater(ts(j["expires_at"]), ts(j["created_at"]))
        self.assertNotIn(a["secret"].encode(), r.body)
        self.assertNotEqual(self.b()["id"], j["id"])
        self.assertNotEqual(self.b()["token"], j["access_token"])

    def test_02_get_has_no_token_nor_secret(self):
        a = self.a()
        r = call(UID_A, "GET", "/v1/sandboxes/" + a["id"])
        self.assertEqual(r.status, 200)
        self.assertEqual(r.json["id"], a["id"])
        self.assertEqual(r.json["state"], "running")
        self.assertNotIn("access_token", r.json)
        self.assertNotIn(a["token"].encode(), r.body)
        self.assertNotIn(a["secret"].encode(), r.body)

    def test_03_list_only_own(self):
        a, b = self.a(), self.b()
        ids = lambda r: [s["id"] for s in r.json["sandboxes"]]  # noqa: E731
        ra = call(UID_A, "GET", "/v1/sandboxes")
        self.assertEqual(ra.status, 200)
        self.assertIn(a["id"], ids(ra))
        self.assertNotIn(b["id"], ids(ra))
        for body in (ra.body,):
            self.assertNotIn(a["secret"].encode(), body)
            self.assertNotIn(a["token"].encode(), body)
        rb = call(UID_B, "GET", "/v1/sandboxes")
        self.assertIn(b["id"], ids(rb))
        self.assertNotIn(a["id"], ids(rb))
        self.assertNotIn(b["secret"].encode(), rb.body)
        rc = call(UID_C, "GET", "/v1/sandboxes")
        self.assertEqual(rc.status, 200)
        self.assertEqual([i for i in ids(rc) if i in CREATED], [])
        # a token opens one sandbox, not the owner's listing
        rc = call(UID_C, "GET", "/v1/sandboxes", token=b["token"])
        self.assertNotIn(b["id"], ids(rc))
        # filters
        q = "/v1/sandboxes?state=running&metadata.suite=" + urllib.parse.quote(a["suite"])
        self.assertEqual(ids(call(UID_A, "GET", q)), [a["id"]])
        q = "/v1/sandboxes?metadata.suite=%s&metadata.owner=A" % urllib.parse.quote(a["suite"])
        self.assertEqual(ids(call(UID_A, "GET", q)), [a["id"]])
        q = "/v1/sandboxes?metadata.suite=%s&metadata.owner=B" % urllib.parse.quote(a["suite"])
        self.assertEqual(ids(call(UID_A, "GET", q)), [])
        self.assertNotIn(a["id"], ids(call(UID_A, "GET", "/v1/sandboxes?state=ended")))
        self.expect_error(call(UID_A, "GET", "/v1/sandboxes?state=sleeping", check="response"), 400,
                          "bad_request")

    def test_04_other_owner_gets_404(self):
        a, b = self.a(), self.b()
        missing = "sbx_" + secrets.token_hex(16)
        e_missing = self.expect_error(call(UID_A, "GET", "/v1/sandboxes/" + missing), 404, "sandbox_not_found")
        # No token, a random one, and the caller's own sandbox's token:
        # none opens the other owner's sandbox.
        for tok in (None, secrets.token_hex(16), "own"):
            for uid, sid, own in ((UID_A, b["id"], a["token"]), (UID_B, a["id"], b["token"])):
                r = call(uid, "GET", "/v1/sandboxes/" + sid, token=own if tok == "own" else tok)
                e = self.expect_error(r, 404, "sandbox_not_found")
                self.assertEqual((e["code"], e["error"]), (e_missing["code"], e_missing["error"]))
        # nothing under the id works for the other owner either
        self.expect_error(run_exec(UID_B, a["id"], {"cmd": ["true"]}), 404, "sandbox_not_found")
        self.expect_error(call(UID_B, "GET", "/v1/sandboxes/%s/files?path=/etc/hostname" % a["id"]), 404)
        self.expect_error(call(UID_B, "GET", "/v1/sandboxes/%s/logs" % a["id"]), 404)
        self.expect_error(call(UID_B, "POST", "/v1/sandboxes/%s/timeout" % a["id"], json={"timeout_s": 300}), 404)
        self.expect_error(call(UID_B, "DELETE", "/v1/sandboxes/" + a["id"]), 404)
        self.expect_error(call(UID_C, "DELETE", "/v1/sandboxes/" + b["id"], token=a["token"]), 404)
        self.assertEqual(call(UID_A, "GET", "/v1/sandboxes/" + a["id"]).json["state"], "running")
        self.assertEqual(call(UID_B, "GET", "/v1/sandboxes/" + b["id"]).json["state"], "running")

    def test_05_token_access_from_third_uid(self):
        a, b = self.a(), self.b()
        r = call(UID_C, "GET", "/v1/sandboxes/" + b["id"], token=b["token"])
        self.assertEqual(r.status, 200)
        self.assertNotIn("access_token", r.json)
        self.assertNotIn(b["secret"].encode(), r.body)
        r = run_exec(UID_C, b["id"], {"cmd": ["echo", "via-token"]}, token=b["token"])
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json["stdout"], "via-token\n")
        r = call(UID_C, "GET", "/v1/sandboxes/%s/fs/list?path=/tmp" % b["id"], token=b["token"])
        self.assertEqual(r.status, 200, r.body)
        # the token opens that one sandbox only, and only itself
        self.expect_error(call(UID_C, "GET", "/v1/sandboxes/" + a["id"], token=b["token"]), 404)
        self.expect_error(call(UID_C, "GET", "/v1/sandboxes/" + b["id"]), 404)
        self.expect_error(call(UID_C, "GET", "/v1/sandboxes/" + b["id"], token=secrets.token_hex(16)), 404)
        self.expect_error(call(UID_C, "GET", "/v1/sandboxes/" + b["id"], token=b["token"][:-1]), 404)

    def test_06_timeout_route(self):
        a = self.a()
        r = call(UID_A, "POST", "/v1/sandboxes/%s/timeout" % a["id"], json={"timeout_s": 300})
        self.assertEqual(r.status, 200, r.body)
        g = call(UID_A, "GET", "/v1/sandboxes/" + a["id"])
        self.assertEqual(ts(g.json["expires_at"]), ts(r.json["expires_at"]))
        self.assertGreater(ts(r.json["expires_at"]), datetime.datetime.now(datetime.timezone.utc))
        for bad in ({"timeout_s": "300"}, {"timeout_s": 0}, {"timeout_s": -5}, {}):
            self.expect_error(call(UID_A, "POST", "/v1/sandboxes/%s/timeout" % a["id"], json=bad,
                                   check="response"), 400, "bad_request")
        self.assertEqual(call(UID_A, "GET", "/v1/sandboxes/" + a["id"]).json["state"], "running")

    def test_07_bad_create_bodies(self):
        cases = [(b"{not json", None), (b"[]", None), (b'{"timeout_s": "ten"}', "timeout_s"),
                 (b'{"cpus": 99}', "cpus"), (b'{"memory_mib": "lots"}', "memory_mib"),
                 (b'{"envs": {"A": 1}}', "envs"), (b'{"metadata": [1]}', "metadata"),
                 (b'{"network": {"enabled": "yes"}}', "enabled"), (b'{"timeout_s": 1e999}', None),
                 # rules the VMM would refuse: the create's 400 (in the API's words, not the
                 # CLI's flags), not a sandbox that dies starting
                 (b'{"network": {"enabled": true, "allow_out": ["bogus"]}}', "network.allow_out: bogus: "),
                 (b'{"network": {"enabled": true, "allow_out": [""]}}', "network.allow_out: empty rule"),
                 (b'{"network": {"enabled": true, "dns": [""]}}', "network.dns: expected an IPv4"),
                 # the VMM takes 4 resolvers: a fifth is this 400, not a VMM that cannot start
                 (b'{"network": {"enabled": true, "dns": ["10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4",'
                  b' "10.0.0.5"]}}', "network.dns: an array of at most 4"),
                 (b'{"network": {"enabled": true, "allow_out": ["10.0.0.0/33"]}}', "prefix length over 32"),
                 # the rule named whole, also one that starts with a colon or holds a range
                 (b'{"network": {"enabled": true, "allow_out": ["::1/129"]}}',
                  "network.allow_out: ::1/129: prefix length over 128"),
                 (b'{"network": {"enabled": true, "allow_out": ["10.0.0.0/8:80-90"]}}',
                  'network.allow_out: "10.0.0.0/8:80-90": CIDR[:PORT[/tcp|udp]] (one port per rule) is expected'),
                 (b'{"network": {"enabled": true, "allow_out": [5]}}', "a string of at most 71 bytes"),
                 (b'{"network": {"enabled": true, "dns": ["10.0.0.0/8"]}}', "network.dns: 10.0.0.0/8: expected a plain"),
                 # rules without enabled: no network would be a surprise
                 (b'{"network": {"allow_out": ["10.0.0.0/8:80/tcp"]}}', "network.allow_out: given without"),
                 (b'{"network": {"enabled": false, "dns": ["10.0.0.1"]}}', "network.dns: given without"),
                 (b'{"template": 5}', "template"), (b'\xff\xfe{}', None)]
        try:
            for body, field in cases:
                r = call(UID_A, "POST", "/v1/sandboxes", body=body, content_type="application/json",
                         check="response", timeout=CREATE_WAIT)
                e = self.expect_error(r, 400, "bad_request")
                if field:
                    self.assertIn(field, e["message"], body)
            big = json.dumps({"metadata": {"k": "x" * (2 * MIB)}}).encode()
            r = call(UID_A, "POST", "/v1/sandboxes", body=big, content_type="application/json", check="response")
            self.expect_error(r, 413, "payload_too_large")
        finally:
            r = call(UID_A, "GET", "/v1/sandboxes?state=running")
            for sb in r.json["sandboxes"]:
                if sb["id"] not in (s["id"] for s in SANDBOXES.values()):
                    delete(UID_A, sb["id"])  # made by a body that should have been refused


# --- 03: execs ------------------------------------------------------------

class T03Exec(ServeTest):
    def test_argv_and_status(self):
        a = self.a()
        r = run_exec(UID_A, a["id"], {"cmd": ["echo", "a b", "c"]})
        self.assertEqual(r.status, 200, r.body)
        j = r.json
        self.assertEqual((j["exit_code"], j["signal"], j["timed_out"]), (0, 0, False))
        self.assertEqual((j["stdout"], j["stderr"]), ("a b c\n", ""))
        self.assertEqual((j["stdout_truncated"], j["stderr_truncated"]), (False, False))
        g = call(UID_A, "GET", "/v1/sandboxes/%s/execs/%s" % (a["id"], j["exec_id"]))
        self.assertEqual(g.status, 200)
        self.assertEqual(g.json["state"], "exited")
        self.assertIsNone(g.json["error"])
        self.assertEqual(g.json["result"]["stdout"], "a b c\n")
        self.assertEqual(g.json["result"]["exit_code"], 0)
        self.expect_error(call(UID_A, "GET", "/v1/sandboxes/%s/execs/ex_%s" % (a["id"], secrets.token_hex(8))),
                          404, "exec_not_found")

    def test_shell_and_nonzero_exit(self):
        r = run_exec(UID_B, self.b()["id"], {"shell": "echo one; echo two >&2; exit 3"})
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual((r.json["exit_code"], r.json["stdout"], r.json["stderr"]), (3, "one\n", "two\n"))
        self.assertFalse(r.json["timed_out"])
        r = run_exec(UID_A, self.a()["id"], {"cmd": ["false"]})
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json["exit_code"], 1)

    def test_envs_and_secret_envs(self):
        a = self.a()
        upper = a["secret"].translate(str.maketrans("abcdef", "ABCDEF"))
        r = run_exec(UID_A, a["id"], {"shell": 'echo "$PLAIN_VAR|$EXEC_VAR"; printf %s "$SECRET_VAR" | tr a-f A-F',
                                      "envs": {"EXEC_VAR": "per-exec"}})
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json["stdout"], "plain-value|per-exec\n" + upper, "the secret reached the job")
        # a failed exec's error message does not carry it either
        r2 = run_exec(UID_A, a["id"], {"cmd": ["/no/such/" + "x"]})
        self.assertNotIn(a["secret"].encode(), r2.body)
        # never in a listing, a GET, the audit log, the daemon's log
        bodies = {
            "GET": call(UID_A, "GET", "/v1/sandboxes/" + a["id"]).body,
            "list": call(UID_A, "GET", "/v1/sandboxes").body,
            "exec status": call(UID_A, "GET", "/v1/sandboxes/%s/execs/%s" % (a["id"], r.json["exec_id"])).body,
        }
        logs = call(UID_A, "GET", "/v1/sandboxes/%s/logs" % a["id"])
        self.assertEqual(logs.status, 200, logs.body)
        self.assertIn(b"\n", logs.body)
        bodies["logs"] = logs.body
        bodies["daemon log"] = hostfile(LOG) or b""
        for path in glob.glob(os.path.join(STATE, "**", "*"), recursive=True):
            if "log" in os.path.basename(path).lower() and os.path.isfile(path):
                bodies[path] = hostfile(path) or b""
        for what, body in bodies.items():
            self.assertNotIn(a["secret"].encode(), body, "secret value in " + what)

    def test_cwd_user_stdin(self):
        a = self.a()
        r = run_exec(UID_A, a["id"], {"cmd": ["pwd"], "cwd": "/tmp"})
        self.assertEqual((r.status, r.json["stdout"]), (200, "/tmp\n"))
        r = run_exec(UID_A, a["id"], {"cmd": ["id", "-u"]})
        self.assertEqual((r.status, r.json["stdout"]), (200, "1000\n"))
        r = run_exec(UID_A, a["id"], {"cmd": ["id", "-u"], "user": "root"})
        self.assertEqual((r.status, r.json["stdout"]), (200, "0\n"))
        text = "héllo stdin\nline two\n"
        r = run_exec(UID_A, a["id"], {"cmd": ["cat"], "stdin_b64": base64.b64encode(text.encode()).decode()})
        self.assertEqual((r.status, r.json["stdout"]), (200, text))

    def test_idle_agent_connections_do_not_lock_execs_out(self):
        """Sixteen connections left open and quiet on a sandbox's agent
        (clients that never closed) give their slots to new ones: the
        next exec runs."""
        sid = self.a()["id"]
        idle = []
        try:
            for _ in range(16):
                s = socket.socket(socket.AF_UNIX)
                s.connect(os.path.join(STATE, "sandboxes", sid, "vsock.sock"))
                s.sendall(b"CONNECT 1024\n")
                idle.append(s)
            r = run_exec(UID_A, sid, {"cmd": ["echo", "through"]})
            self.assertEqual((r.status, (r.json or {}).get("stdout")), (200, "through\n"), r.body)
        finally:
            for s in idle:
                s.close()

    def test_not_started(self):
        r = run_exec(UID_A, self.a()["id"], {"cmd": ["/no/such/binary"]})
        self.assertGreaterEqual(r.status, 400, "a command that never started is not a result")
        self.expect_error(r, (400, 404, 502))

    def test_timeout(self):
        r = run_exec(UID_A, self.a()["id"], {"cmd": ["sleep", "600"], "timeout_s": 2})
        self.assertEqual(r.status, 200, r.body)
        self.assertTrue(r.json["timed_out"])
        self.assertTrue(r.json["exit_code"] != 0 or r.json["signal"] != 0)

    def test_output_capped(self):
        r = run_exec(UID_A, self.a()["id"], {"shell": "head -c 20971520 /dev/zero | tr '\\0' a",
                                             "max_output_bytes": MIB, "timeout_s": 600})
        self.assertEqual(r.status, 200, r.body[:300])
        j = r.json
        self.assertEqual(j["exit_code"], 0)
        self.assertTrue(j["stdout_truncated"])
        self.assertFalse(j["stderr_truncated"])
        self.assertGreater(len(j["stdout"]), 0)
        self.assertLessEqual(len(j["stdout"].encode()), MIB)
        self.assertEqual(set(j["stdout"]), {"a"})

    def test_limits_of_its_own_cgroup(self):
        sid = self.a()["id"]
        # a fork loop stops at pids_max and says so; the sandbox goes on
        r = run_exec(UID_A, sid, {"shell": "while :; do sleep 100 & done", "pids_max": 8, "timeout_s": 120})
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual((r.json["pids_limited"], r.json["oom_killed"], r.json["timed_out"]), (True, False, False))
        # past memory_mib the guest kernel kills it, and says so
        r = run_exec(UID_A, sid, {"cmd": ["python3", "-c", "b = b'x' * (96 << 20)"], "memory_mib": 24})
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual((r.json["oom_killed"], r.json["signal"]), (True, 9))
        r = run_exec(UID_A, sid, {"cmd": ["true"]})
        self.assertEqual((r.status, r.json["exit_code"], r.json["oom_killed"], r.json["pids_limited"]),
                         (200, 0, False, False))

    def test_bad_exec_bodies(self):
        sid = self.a()["id"]
        for body, field in ((b'{"cmd": "echo"}', "cmd"), (b"{}", None), (b'{"cmd": ["true"], "shell": "true"}', None),
                            (b'{"cmd": ["true"], "timeout_s": "x"}', "timeout_s"), (b'{"cmd": [1]}', "cmd"),
                            (b'{"shell": "true", "stdin_b64": "%%%"}', "stdin_b64"),
                            (b'{"shell": "true", "user": "admin"}', "user"),
                            (b'{"shell": "true", "envs": ["A=1"]}', "envs"),
                            (b'{"shell": "true", "max_output_bytes": 1.5}', "max_output_bytes"),
                            (b'{"shell": "true", "memory_mib": 0}', "memory_mib"),
                            (b'{"shell": "true", "pids_max": -1}', "pids_max"),
                            (b'{"shell": "true"', None)):
            r = call(UID_A, "POST", "/v1/sandboxes/%s/execs" % sid, body=body, content_type="application/json",
                     check="response", timeout=EXEC_WAIT)
            e = self.expect_error(r, 400, "bad_request")
            if field:
                self.assertIn(field, e["message"], body)


# --- 04: streams ------------------------------------------------------------

class T04Stream(ServeTest):
    def test_ndjson_stream(self):
        a = self.a()
        st, ct, events = stream_events(UID_A, "POST", "/v1/sandboxes/%s/execs" % a["id"],
                                       json={"shell": "echo out1; echo err1 >&2; echo out2; exit 4"})
        self.assertEqual(st, 200, events)
        self.assertEqual(ct.split(";")[0], "application/x-ndjson")
        end = check_stream_shape(self, events)
        self.assertEqual(end["type"], "exit", end)
        self.assertEqual(end["exit_code"], 4)
        self.assertEqual(end["exec_id"], events[0]["exec_id"])
        out, err = check_offsets(self, events)
        self.assertEqual((out, err), (b"out1\nout2\n", b"err1\n"))
        firsts = [e for e in events if e["type"] in ("stdout", "stderr")]
        self.assertEqual(firsts[0]["offset"], 0)
        # the same as uid 1002 through B's token
        b = self.b()
        st, ct, events = stream_events(UID_C, "POST", "/v1/sandboxes/%s/execs" % b["id"], token=b["token"],
                                       json={"cmd": ["echo", "streamed"]})
        self.assertEqual(st, 200, events)
        self.assertEqual(check_stream_shape(self, events)["exit_code"], 0)
        self.assertEqual(check_offsets(self, events)[0], b"streamed\n")

    def test_background_and_reattach(self):
        a = self.a()
        n = 300
        script = ("i=0; while [ $i -lt %d ]; do echo line$i; i=$((i+1)); done; sleep 3; "
                  "i=0; while [ $i -lt %d ]; do echo tail$i; i=$((i+1)); done; echo done >&2" % (n, n))
        want_out = "".join("line%d\n" % i for i in range(n)) + "".join("tail%d\n" % i for i in range(n))
        r = run_exec(UID_A, a["id"], {"shell": script, "background": True})
        self.assertEqual(r.status, 201, r.body)
        eid = r.json["exec_id"]
        base = "/v1/sandboxes/%s/execs/%s" % (a["id"], eid)
        # first attach: take a little, then drop the connection
        got = []
        c = Client(SOCK, API, timeout=EXEC_WAIT)
        with c.stream("GET", base + "/events?since=0") as s:
            self.assertEqual(s.status, 200, s.body)
            first = s.readline()
            self.assertEqual(first, {"type": "start", "exec_id": eid})
            while True:
                ev = s.readline()
                self.assertIsNotNone(ev, "the stream ended before any output")
                got.append(ev)
                if ev["type"] in ("stdout", "stderr", "exit", "error"):
                    break
        self.assertIn(got[-1]["type"], ("stdout", "stderr"), got)
        mid = got[-1]["offset"] + len(base64.b64decode(got[-1]["data"]))
        st = call(UID_A, "GET", base)
        self.assertEqual(st.status, 200)
        self.assertIn(st.json["state"], ("running", "exited"))
        # reattach where we stopped: nothing is missing
        st_, _, rest = stream_events(UID_A, "GET", base + "/events?since=%d" % mid)
        self.assertEqual(st_, 200, rest)
        end = check_stream_shape(self, rest)
        self.assertEqual(end["type"], "exit", end)
        outs = [e for e in rest if e["type"] in ("stdout", "stderr")]
        self.assertTrue(outs)
        self.assertLessEqual(outs[0]["offset"], mid)
        self.assertGreater(outs[0]["offset"] + len(base64.b64decode(outs[0]["data"])), mid)
        check_offsets(self, rest)
        whole = check_offsets(self, [e for e in got if e["type"] in ("stdout", "stderr")])
        stream = {"stdout": bytearray(whole[0]), "stderr": bytearray(whole[1])}
        for e in outs:
            data = base64.b64decode(e["data"])
            skip = max(0, mid - e["offset"])
            stream[e["type"]] += data[skip:]
        self.assertEqual(bytes(stream["stdout"]).decode(), want_out)
        self.assertEqual(bytes(stream["stderr"]), b"done\n")
        # after the end: the status has the result; a replay from 0 is whole
        st = call(UID_A, "GET", base)
        self.assertEqual(st.json["state"], "exited")
        self.assertEqual(st.json["result"]["stdout"], want_out)
        st_, _, again = stream_events(UID_A, "GET", base + "/events?since=0")
        self.assertEqual(check_offsets(self, again)[0].decode(), want_out)
        self.assertEqual(check_stream_shape(self, again)["type"], "exit")


    def test_stdin_and_signal(self):
        sid = self.a()["id"]
        c = Client(SOCK, API, timeout=WAIT)
        # "stdin": true: the stdin route feeds it, eof=1 closes it
        r = run_exec(UID_A, sid, {"cmd": ["cat"], "stdin": True, "background": True})
        self.assertEqual(r.status, 201, r.body)
        base = "/v1/sandboxes/%s/execs/%s" % (sid, r.json["exec_id"])
        with c.stream("GET", base + "/events?since=0") as s:
            self.assertEqual(s.status, 200, s.body)
            events = [s.readline()]
            self.assertEqual(events[0]["type"], "start")
            self.assertEqual(call(UID_A, "POST", base + "/stdin", body=b"first ").status, 204)
            self.assertEqual(call(UID_A, "POST", base + "/stdin?eof=1", body=b"second\n").status, 204)
            events += list(s.events())
        end = check_stream_shape(self, events)
        self.assertEqual((end["type"], end["exit_code"]), ("exit", 0), end)
        self.assertEqual(check_offsets(self, events)[0], b"first second\n")
        self.expect_error(call(UID_A, "POST", base + "/stdin", body=b"late"), 409, "conflict")
        # a signal to a running exec; stdin of an exec started without "stdin": true
        r = run_exec(UID_A, sid, {"cmd": ["sleep", "600"], "background": True})
        self.assertEqual(r.status, 201, r.body)
        base = "/v1/sandboxes/%s/execs/%s" % (sid, r.json["exec_id"])
        with c.stream("GET", base + "/events?since=0") as s:
            events = [s.readline()]
            self.assertEqual(events[0]["type"], "start")
            self.expect_error(call(UID_A, "POST", base + "/stdin", body=b"x"), 409, "conflict")
            for bad in ({"signal": 99}, {"signal": "SIGFOO"}, {"signal": "15"}, {}):
                self.expect_error(call(UID_A, "POST", base + "/signal", json=bad, check="response"), 400,
                                  "bad_request")
            self.assertEqual(call(UID_A, "POST", base + "/signal", json={"signal": "SIGTERM"}).status, 204)
            events += list(s.events())
        end = check_stream_shape(self, events)
        self.assertEqual((end["type"], end["signal"]), ("exit", 15), end)
        st = call(UID_A, "GET", base)
        self.assertEqual((st.json["state"], st.json["result"]["signal"]), ("exited", 15))
        self.expect_error(call(UID_A, "POST", base + "/signal", json={"signal": 9}), 409, "conflict")
        self.expect_error(call(UID_A, "POST", "/v1/sandboxes/%s/execs/ex_%s/signal" % (sid, secrets.token_hex(8)),
                               json={"signal": 9}), 404, "exec_not_found")

# --- 05: files ----------------------------------------------------------------

class T05Files(ServeTest):
    def test_put_get_20mib_streamed(self):
        sid = self.a()["id"]
        data = os.urandom(20 * MIB)
        want = hashlib.sha256(data).hexdigest()
        base = vmrss_kib(DAEMON.pid)
        peak = [base]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    peak[0] = max(peak[0], vmrss_kib(DAEMON.pid))
                except OSError:
                    return
                stop.wait(0.02)
        t = threading.Thread(target=sample, daemon=True)
        t.start()
        try:
            target = "/v1/sandboxes/%s/files?path=/tmp/big.bin&mode=0600" % sid
            r = call(UID_A, "PUT", target, body=(data[i:i + 65536] for i in range(0, len(data), 65536)),
                     headers={"Content-Length": str(len(data))}, timeout=EXEC_WAIT)
            self.assertEqual(r.status, 201, r.body)
            self.assertEqual(r.json, {"path": "/tmp/big.bin", "size": len(data)})
            h, n = hashlib.sha256(), 0
            c = Client(SOCK, API, timeout=EXEC_WAIT)
            with c.stream("GET", "/v1/sandboxes/%s/files?path=/tmp/big.bin" % sid, accept=None) as s:
                self.assertEqual(s.status, 200, s.body)
                self.assertEqual(s.header("Content-Type").split(";")[0], "application/octet-stream")
                for chunk in s.chunks():
                    h.update(chunk)
                    n += len(chunk)
        finally:
            stop.set()
            t.join()
        self.assertEqual(n, len(data))
        self.assertEqual(h.hexdigest(), want, "the file came back byte-exact")
        grew = (peak[0] - base) / 1024
        self.assertLess(grew, 40, "the daemon's RSS grew %.1f MiB during a 20 MiB transfer" % grew)

    def test_put_chunked_and_modes(self):
        sid = self.a()["id"]
        data = os.urandom(MIB + 123)
        r = call(UID_A, "PUT", "/v1/sandboxes/%s/files?path=/tmp/chunked.bin" % sid,
                 body=(data[i:i + 100000] for i in range(0, len(data), 100000)), timeout=EXEC_WAIT)
        self.assertEqual(r.status, 201, r.body)
        self.assertEqual(r.json["size"], len(data))
        g = call(UID_A, "GET", "/v1/sandboxes/%s/files?path=/tmp/chunked.bin" % sid, timeout=EXEC_WAIT)
        self.assertEqual(g.status, 200)
        self.assertEqual(g.body, data)
        r = call(UID_A, "PUT", "/v1/sandboxes/%s/files?path=/tmp/empty" % sid, body=b"",
                 headers={"Content-Length": "0"}, check="response")
        self.assertEqual((r.status, r.json["size"]), (201, 0))
        self.assertEqual(call(UID_A, "GET", "/v1/sandboxes/%s/files?path=/tmp/empty" % sid).body, b"")
        self.expect_error(call(UID_A, "PUT", "/v1/sandboxes/%s/files?path=/tmp/m&mode=rwx" % sid, body=b"x",
                               check="response"), 400, "bad_request")
        self.expect_error(call(UID_A, "PUT", "/v1/sandboxes/%s/files" % sid, body=b"x", check="response"),
                          400, "bad_request")
        # a broken chunk size is the client's fault: 400 naming it, not the guest's 502
        raw = ("PUT /v1/sandboxes/%s/files?path=/tmp/badchunk HTTP/1.1\r\nHost: x\r\n"
               "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n-5\r\nxxxxx\r\n0\r\n\r\n" % sid).encode()
        e = self.expect_error(client.raw_exchange(SOCK, raw), 400, "bad_request")
        self.assertIn("chunk-size", e["message"])
        self.expect_error(call(UID_A, "GET", "/v1/sandboxes/%s/files?path=/tmp/badchunk" % sid), 404, "not_found")

    def test_fs_list_and_delete(self):
        sid = self.a()["id"]
        r = call(UID_A, "PUT", "/v1/sandboxes/%s/files?path=/tmp/lsdir/sub/f.txt&mode=0640" % sid, body=b"hello")
        self.assertEqual(r.status, 201, r.body)
        self.assertEqual(r.json, {"path": "/tmp/lsdir/sub/f.txt", "size": 5})
        r = call(UID_A, "GET", "/v1/sandboxes/%s/fs/list?path=/tmp/lsdir" % sid)
        self.assertEqual(r.status, 200, r.body)
        self.assertEqual(r.json["path"], "/tmp/lsdir")
        self.assertEqual([(e["name"], e["type"]) for e in r.json["entries"]], [("sub", "dir")])
        r = call(UID_A, "GET", "/v1/sandboxes/%s/fs/list?path=/tmp/lsdir/sub" % sid)
        ent = {e["name"]: e for e in r.json["entries"]}
        self.assertEqual(set(ent), {"f.txt"})
        self.assertEqual((ent["f.txt"]["type"], ent["f.txt"]["size"]), ("file", 5))
        self.assertEqual(ent["f.txt"]["mode"] & 0o777, 0o640)
        self.assertEqual(call(UID_A, "GET", "/v1/sandboxes/%s/files?path=/tmp/lsdir/sub/f.txt" % sid).body, b"hello")
        r = call(UID_A, "DELETE", "/v1/sandboxes/%s/files?path=/tmp/lsdir/sub/f.txt" % sid)
        self.assertEqual(r.status, 204, r.body)
        self.expect_error(call(UID_A, "GET", "/v1/sandboxes/%s/files?path=/tmp/lsdir/sub/f.txt" % sid), (404, 502))
        r = call(UID_A, "GET", "/v1/sandboxes/%s/fs/list?path=/tmp/lsdir/sub" % sid)
        self.assertEqual((r.status, r.json["entries"]), (200, []))
        self.expect_error(call(UID_A, "GET", "/v1/sandboxes/%s/fs/list?path=/no/such/dir" % sid), (404, 502))
        r = call(UID_A, "DELETE", "/v1/sandboxes/%s/files?path=/no/such/file" % sid)
        if r.status != 204:  # API.md does not say whether removing a missing file is an error
            self.expect_error(r, (404, 502))
        self.expect_error(call(UID_A, "GET", "/v1/sandboxes/%s/fs/list" % sid, check="response"), 400)
        self.expect_not_allowed("DELETE", "/v1/sandboxes/%s/fs/list?path=/tmp" % sid)
        self.expect_not_allowed("POST", "/v1/sandboxes/%s/files?path=/tmp/x" % sid, body=b"x")
        self.expect_not_allowed("PATCH", "/v1/sandboxes/%s" % sid)

    def test_path_traversal(self):
        sid = self.a()["id"]
        passwd = hostfile("/etc/passwd")
        for p in ("../../etc/passwd", "/../../../etc/passwd", "/tmp/../../etc/passwd", "../" * 20 + "etc/shadow",
                  "%2e%2e/%2e%2e/etc/passwd"):
            r = call(UID_A, "GET", "/v1/sandboxes/%s/files?path=%s" % (sid, urllib.parse.quote(p, safe="")))
            if r.status == 200:
                self.assertNotEqual(r.body, passwd, "a host file through path=%s" % p)
            else:
                self.expect_error(r, (400, 404, 502))
        # dot segments in the URL path never route elsewhere nor reach a host file
        for path in ("/v1/sandboxes/%s/%%2e%%2e/%%2e%%2e/health" % sid,
                     "/v1/sandboxes/%2e%2e/logs",
                     "/v1/sandboxes/%2E%2E%2F%2E%2E%2F%2E%2E%2Fetc%2Fpasswd/logs",
                     "/v1/sandboxes/..%2f..%2f..%2f..%2fetc%2fpasswd/logs",
                     "/v1/sandboxes/%s%%2f..%%2f..%%2f..%%2fetc/logs" % sid,
                     "/v1/sandboxes/%s/files/..%%2f..%%2fetc%%2fpasswd" % sid,
                     "/v1/%2e%2e/v1/health",
                     "/v1/sandboxes/%s/%%2e/logs" % sid):
            for uid in (UID_A, UID_B):
                r = call(uid, "GET", path, check=False)
                self.assertNotIn(b"root:x:0:0", r.body, path)
                self.expect_error(r, (400, 404))
        # symlinks planted in the guest lead into the guest only
        r = run_exec(UID_A, sid, {"shell": "ln -sfn / /tmp/rootlink && ln -sfn /etc/passwd /tmp/pwlink"})
        self.assertEqual((r.status, r.json["exit_code"]), (200, 0))
        for p in ("/tmp/rootlink/etc/passwd", "/tmp/pwlink"):
            r = call(UID_A, "GET", "/v1/sandboxes/%s/files?path=%s" % (sid, p))
            if r.status == 200:
                self.assertNotEqual(r.body, passwd)
            else:
                self.expect_error(r, (400, 404, 502))
        marker = "tvm-escape-" + secrets.token_hex(6)
        for p in ("/tmp/rootlink/tmp/" + marker, os.path.join(STATE, marker), "/etc/" + marker,
                  "../../../../tmp/" + marker):
            r = call(UID_A, "PUT", "/v1/sandboxes/%s/files?path=%s" % (sid, urllib.parse.quote(p, safe="/")),
                     body=b"x")
            if r.status != 201:
                self.expect_error(r, (400, 404, 502))
        for hp in ("/tmp/" + marker, os.path.join(STATE, marker), "/etc/" + marker):
            self.assertFalse(os.path.exists(hp), "the file API wrote the host's " + hp)


# --- 06: hostile clients and capacity ------------------------------------------

class T06Hostile(ServeTest):
    def test_malformed_requests(self):
        for raw in (b"GARBAGE\r\n\r\n", b"\x00\x01\x02\xff binary junk\r\n\r\n",
                    b"GET\r\n\r\n", b"GET /v1/health HTTP/1.1\r\nno colon here\r\n\r\n",
                    b"GET /v1/health HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n"):
            self.expect_error(client.raw_exchange(SOCK, raw), 400, "bad_request", http_level=True)
        line = b"GET /v1/" + b"a" * (100 * 1024) + b" HTTP/1.1\r\nHost: x\r\n\r\n"
        self.expect_error(client.raw_exchange(SOCK, line), (400, 414), "bad_request", http_level=True)
        head = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * (100 * 1024) + b"\r\n\r\n"
        self.expect_error(client.raw_exchange(SOCK, head), (400, 431), "bad_request", http_level=True)
        many = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-H%d: v\r\n" % i for i in range(2000)) + b"\r\n"
        self.expect_error(client.raw_exchange(SOCK, many), (400, 431), "bad_request", http_level=True)
        self.assertEqual(call(UID_A, "GET", "/v1/health").status, 200)

    def test_a_body_said_too_long_is_413_before_100_continue(self):
        """A control body whose Content-Length is over the 1 MiB limit, from
        a client waiting for 100 Continue (curl's way for a large body):
        413 at once, not a 100 and then a closed connection."""
        head = (b"POST /v1/sandboxes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: 3000000\r\nExpect: 100-continue\r\n\r\n")
        out = client.raw_exchange(SOCK, head, timeout=WAIT)
        self.assertNotIn(b"100 Continue", out)
        self.expect_error(out, 413, "payload_too_large")

    def test_no_100_continue_after_a_final_answer(self):
        """A request with Expect: 100-continue whose handler answers
        without reading the body: no 100 after that final answer (RFC 9110
        §10.1.1; it came before the next response), and the connection
        ends rather than guess whether the body follows."""
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(WAIT)
        s.connect(SOCK)
        try:
            s.sendall(b"GET /v1/version HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"
                      b"abcGET /v1/version HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            out = b""
            while True:
                b = s.recv(65536)
                if not b:
                    break
                out += b
        finally:
            s.close()
        self.assertNotIn(b"100 Continue", out)
        self.assertEqual(out.count(b"HTTP/1.1 200 "), 1, out[:500])
        self.assertEqual(call(UID_A, "GET", "/v1/health").status, 200)

    def test_slow_client_blocks_nobody(self):
        sent = []
        done = threading.Event()
        head_sent = threading.Event()
        answer = []

        def slow():
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(WAIT)
            try:
                s.connect(SOCK)
                head = b"GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 200
                for i in range(len(head)):
                    if done.is_set():
                        break
                    s.sendall(head[i:i + 1])
                    sent.append(i)
                    time.sleep(1)
                s.sendall(b"\r\n\r\n")
                head_sent.set()
                answer.append(s.recv(4096))
            except OSError as e:
                answer.append(e)  # the daemon may give up on a slow head: fine
            finally:
                s.close()
        t = threading.Thread(target=slow, daemon=True)
        t.start()
        wait_for(lambda: len(sent) >= 3, "the slow client to start", interval=0.2)
        r = call(UID_A, "GET", "/v1/health")
        self.assertEqual(r.status, 200)
        self.assertFalse(head_sent.is_set(), "answered while the slow head was still being sent")
        r = run_exec(UID_A, self.a()["id"], {"cmd": ["true"]})
        self.assertEqual(r.status, 200)
        self.assertFalse(head_sent.is_set())
        done.set()
        t.join(WAIT)

    def test_1000_connections(self):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        want = 1100 + 64
        if soft < want:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096) if hard != resource.RLIM_INFINITY
                                                        else 4096, hard))
        conns = []
        refused = 0
        try:
            for i in range(1000):
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.settimeout(5)
                try:
                    s.connect(SOCK)
                    if i % 2:
                        s.sendall(b"GET /v1/health HTTP/1.1\r\nHo")  # half a head
                    conns.append(s)
                except OSError:
                    s.close()
                    refused += 1
                    if refused >= 3:  # the daemon's backlog is full: that many are waiting already
                        break
            # The flooding uid is held to its share of connections (a clean
            # 503 with Retry-After); another uid is still served.
            r = call(UID_A, "GET", "/v1/health", timeout=WAIT, check="response")
            self.assertIn(r.status, (200, 503), "with %d connections open" % len(conns))
            if r.status == 503:
                self.assertEqual(r.json["error"], "capacity")
            r = call(UID_B, "GET", "/v1/sandboxes/" + self.b()["id"], timeout=WAIT)
            self.assertEqual(r.status, 200)
        finally:
            for s in conns:
                s.close()
        wait_for(lambda: call(UID_A, "GET", "/v1/health").status == 200, "health after the connections closed")
        self.assertEqual(DAEMON.poll(), None)

    def test_capacity_and_quota(self):
        a, b = self.a(), self.b()
        made = []

        def running(uid):
            return len(call(uid, "GET", "/v1/sandboxes?state=running").json["sandboxes"])
        try:
            # owner B up to its limit (4), then 429
            while running(UID_B) < 4 and len(made) < 4:
                r = create(UID_B, {"metadata": {"filler": "B"}})
                made.append((UID_B, r.json["id"]))
            r = create(UID_B, {"metadata": {"filler": "B"}}, expect=None)
            if r.status == 201:
                made.append((UID_B, r.json["id"]))
            self.expect_error(r, 429, "quota_exceeded")
            self.assertIsNone(r.header("Retry-After"))  # a limit of running sandboxes: no time helps
            # then owner A up to the host's limit (6), then 503 with Retry-After
            while running(UID_A) + running(UID_B) < 6 and len(made) < 6:
                r = create(UID_A, {"metadata": {"filler": "A"}})
                made.append((UID_A, r.json["id"]))
            self.assertLess(running(UID_A), 4)
            r = create(UID_A, {"metadata": {"filler": "A"}}, expect=None)
            if r.status == 201:
                made.append((UID_A, r.json["id"]))
            e = self.expect_error(r, 503, "capacity")
            self.assertRegex(r.header("Retry-After") or "", r"^[0-9]+$")
            self.assertNotIn("id", e)
            # the third uid too
            self.expect_error(create(UID_C, {}, expect=None), (429, 503))
            # health counts the caller's own; root (the operator) sees them all
            self.assertEqual(call(0, "GET", "/v1/health").json["sandboxes"], 6)
            self.assertEqual(call(UID_A, "GET", "/v1/health").json["sandboxes"], running(UID_A))
            self.assertEqual(call(UID_C, "GET", "/v1/health").json["sandboxes"], running(UID_C))
            # the running ones still work at capacity
            r = run_exec(UID_B, made[0][1], {"cmd": ["echo", "full"]})
            self.assertEqual((r.status, r.json["stdout"]), (200, "full\n"))
        finally:
            for uid, sid in made:
                delete(uid, sid)
        for uid, sid in made:
            self.assertEqual(wait_ended(uid, sid)["end_reason"], "killed")
        self.assertEqual(call(UID_A, "GET", "/v1/sandboxes/" + a["id"]).json["state"], "running")
        self.assertEqual(call(UID_B, "GET", "/v1/sandboxes/" + b["id"]).json["state"], "running")
        wait_for(lambda: not any(vmm_pids(sid) for _, sid in made), "the fillers' VMMs to go")


# --- 07: lifetimes ------------------------------------------------------------

class T07Lifetimes(ServeTest):
    def test_ttl_expired(self):
        r = create(UID_A, {"timeout_s": 5})
        sid = r.json["id"]
        try:
            self.assertGreater(ts(r.json["expires_at"]), ts(r.json["created_at"]))
            sb = wait_ended(UID_A, sid)
            self.assertEqual(sb["end_reason"], "expired")
            self.assertIsNotNone(sb["ended_at"])
            e = self.expect_error(run_exec(UID_A, sid, {"cmd": ["true"]}), 410, "sandbox_expired")
            self.assertEqual(e["end_reason"], "expired")
            base = "/v1/sandboxes/" + sid
            self.expect_error(call(UID_A, "POST", base + "/timeout", json={"timeout_s": 60}), 410)
            self.expect_error(call(UID_A, "PUT", base + "/files?path=/tmp/x", body=b"x"), 410)
            self.expect_error(call(UID_A, "GET", base + "/files?path=/tmp/x"), 410)
            self.expect_error(call(UID_A, "GET", base + "/fs/list?path=/"), 410)
            lg = call(UID_A, "GET", base + "/logs")
            self.assertIn(lg.status, (200, 410))
            ids = [s["id"] for s in call(UID_A, "GET", "/v1/sandboxes?state=ended").json["sandboxes"]]
            self.assertIn(sid, ids)
            self.expect_error(call(UID_B, "GET", base), 404, "sandbox_not_found")
        finally:
            self.assertEqual(delete(UID_A, sid).status, 204)
        g = call(UID_A, "GET", "/v1/sandboxes/" + sid)
        self.assertEqual((g.json["state"], g.json["end_reason"]), ("ended", "expired"))
        wait_for(lambda: not vmm_pids(sid), "the VMM of %s to go" % sid)

    def test_idle_timeout(self):
        r = create(UID_B, {"idle_timeout_s": 3})
        sid = r.json["id"]
        self.assertEqual(r.json["idle_timeout_s"], 3)
        try:
            # poll the listing only: a request to the sandbox itself is activity
            def ended():
                lst = call(UID_B, "GET", "/v1/sandboxes?state=ended").json["sandboxes"]
                return [s for s in lst if s["id"] == sid]
            sb = wait_for(ended, "the idle sandbox to end", interval=5)[0]
            self.assertEqual(sb["end_reason"], "idle")
        finally:
            delete(UID_B, sid)
        wait_for(lambda: not vmm_pids(sid), "the VMM of %s to go" % sid)

    def test_delete_during_exec(self):
        sid = create(UID_A, {}).json["id"]
        c = Client(SOCK, API, timeout=WAIT)
        events = []
        try:
            with c.stream("POST", "/v1/sandboxes/%s/execs" % sid, json={"cmd": ["sleep", "600"]}) as s:
                self.assertEqual(s.status, 200, s.body)
                events.append(s.readline())
                self.assertEqual(events[0]["type"], "start")
                self.assertEqual(delete(UID_A, sid).status, 204)
                events += list(s.events())
        finally:
            delete(UID_A, sid)
        end = check_stream_shape(self, events)
        self.assertEqual(end["type"], "error", end)
        sb = wait_ended(UID_A, sid)
        self.assertEqual(sb["end_reason"], "killed")
        self.assertEqual(delete(UID_A, sid).status, 204, "DELETE of an ended sandbox")
        wait_for(lambda: not vmm_pids(sid), "the VMM of %s to go" % sid)

    def test_vmm_crash_ends_that_sandbox_only(self):
        a = self.a()
        sid = create(UID_A, {}).json["id"]
        try:
            pids = vmm_pids(sid)
            self.assertTrue(pids, "no process holds %s in its command line" % sid)
            self.assertNotIn(DAEMON.pid, pids)
            for p in pids:
                os.kill(p, signal.SIGKILL)
            sb = wait_ended(UID_A, sid)
            self.assertEqual(sb["end_reason"], "crashed")
            self.expect_error(run_exec(UID_A, sid, {"cmd": ["true"]}), 410, "sandbox_expired")
        finally:
            delete(UID_A, sid)
        r = run_exec(UID_A, a["id"], {"cmd": ["echo", "still here"]})
        self.assertEqual((r.status, r.json["stdout"]), (200, "still here\n"))
        self.assertEqual(call(UID_B, "GET", "/v1/sandboxes/" + self.b()["id"]).json["state"], "running")
        wait_for(lambda: not vmm_pids(sid), "the processes of %s to go" % sid)
        wait_for(lambda: not [f for f in vsock_files() if sid in f], "the socket of %s to go" % sid)


# --- 08: a restart of the daemon ------------------------------------------------

class T08Restart(ServeTest):
    def test_sigterm_then_restart_readopts(self):
        a, b = self.a(), self.b()
        before = {}
        for uid in (UID_A, UID_B):
            for sb in call(uid, "GET", "/v1/sandboxes?state=running").json["sandboxes"]:
                before[sb["id"]] = uid
        self.assertIn(a["id"], before)
        self.assertIn(b["id"], before)
        self.assertTrue(stop_daemon(), "the daemon did not exit on SIGTERM:\n" + log_tail())
        start_daemon()
        running = []
        for sid, uid in before.items():
            r = call(uid, "GET", "/v1/sandboxes/" + sid)
            self.assertEqual(r.status, 200, "sandbox %s forgotten by the restart" % sid)
            if r.json["state"] == "running":
                running.append(sid)
            else:
                self.assertIn(r.json["end_reason"], ("crashed", "killed"), r.json)
        self.assertIn(a["id"], running, "A's sandbox was not re-adopted")
        self.assertIn(b["id"], running, "B's sandbox was not re-adopted")
        r = run_exec(UID_A, a["id"], {"cmd": ["echo", "after-restart"]})
        self.assertEqual((r.status, r.json["stdout"]), (200, "after-restart\n"))
        r = run_exec(UID_B, b["id"], {"cmd": ["cat"], "stdin_b64": base64.b64encode(b"B again").decode()})
        self.assertEqual((r.status, r.json["stdout"]), (200, "B again"))
        # the token and the environment survive too
        r = run_exec(UID_C, b["id"], {"shell": 'echo "$PLAIN_VAR"'}, token=b["token"])
        self.assertEqual((r.status, r.json["stdout"]), (200, "plain-value\n"))
        self.expect_error(call(UID_B, "GET", "/v1/sandboxes/" + a["id"]), 404)
        self.assertEqual(call(0, "GET", "/v1/health").json["sandboxes"], len(running))
        # nothing beyond the daemon and the running sandboxes' VMMs
        wait_for(lambda: not leaks(running), "no leaks after the restart", timeout=30, check=False)
        self.assertEqual(leaks(running), [])
        for sid in running:
            self.assertTrue(vmm_pids(sid), "re-adopted %s has no VMM process" % sid)
        for sid in set(before) - set(running):
            wait_for(lambda: not vmm_pids(sid), "the VMM of ended %s to go" % sid)


def write_state(pid, state="running", sid=None, **top):
    """A sandbox's state.json as a daemon writes it (owner root; pid 0: none,
    else that process's start time), with top's keys over the defaults:
    (id, its directory)."""
    sid = sid or "sbx_" + secrets.token_hex(16)
    d = os.path.join(STATE, "sandboxes", sid)
    os.makedirs(d, 0o700, exist_ok=True)
    start = 0
    if pid:
        with open("/proc/%d/stat" % pid) as f:
            start = int(f.read().rsplit(")", 1)[1].split()[19])  # field 22
    body = {"sandbox": {"id": sid, "access_token": secrets.token_hex(16), "template": "default", "state": state,
                        "cpus": 1, "memory_mib": 256},
            "owner": 0, "pid": pid, "pid_start": start, "net": False, "net_args": [], "pooled": False}
    body.update(top)
    with open(os.path.join(d, "state.json"), "w") as f:
        json.dump(body, f)
    return sid, d


class T08bHostileState(ServeTest):
    """A state file is input (a previous daemon's, maybe a taken-over one's):
    a pid and its start time are anyone's to read in /proc, so a restarted
    daemon signals a recorded pid only when its command line is that
    sandbox's VMM's (`run ... --vsock-uds <its socket>`)."""

    def state(self, pid, state="running", sid=None, **top):
        return write_state(pid, state, sid, **top)

    def test_a_fifo_for_a_file_hangs_nothing(self):
        """A FIFO where a state file or the config is: the start goes on
        (the state is unreadable: removed, one line), the config is one
        line and exit 64; neither waits for a writer."""
        self.assertTrue(stop_daemon(), log_tail())
        # its socket went with it (removed by its helper: the daemon may not)
        self.assertFalse(os.path.exists(SOCK), log_tail())
        sid = "sbx_" + secrets.token_hex(16)
        d = os.path.join(STATE, "sandboxes", sid)
        os.mkdir(d, 0o700)
        os.mkfifo(os.path.join(d, "state.json"), 0o600)
        start_daemon()
        self.assertIn("%s: unreadable sandbox state: removed" % d, log_tail(50))
        self.assertFalse(os.path.exists(d))
        cfg = os.path.join(DIR, "fifo.json")
        os.mkfifo(cfg, 0o600)
        try:
            r = subprocess.run([BIN, "serve", "--socket", os.path.join(DIR, "fifo.sock"), "--config", cfg],
                               capture_output=True, timeout=WAIT)
        finally:
            os.unlink(cfg)
        self.assertEqual((r.returncode, r.stderr),
                         (64, b"tinyvmm serve: --config " + cfg.encode() + b": not a regular file\n"))

    def test_saved_values_are_checked_again(self):
        """What a restarted daemon takes from a state file is what a create
        could have made: a template that is no name is an unreadable
        state (removed, one line); a shape out of bounds gets a create's
        defaults; a host address no range could give holds no /30."""
        self.assertTrue(stop_daemon(), log_tail())
        bad, d = write_state(0, "ended")
        with open(os.path.join(d, "state.json")) as f:
            st = json.load(f)
        st["sandbox"]["template"] = "../../../etc"
        with open(os.path.join(d, "state.json"), "w") as f:
            json.dump(st, f)
        shape = write_state(0, "paused", pause_gen=1)[0]  # a paused one keeps its /30
        with open(os.path.join(STATE, "sandboxes", shape, "state.json")) as f:
            st = json.load(f)
        st["sandbox"].update(cpus=0, memory_mib=1 << 40, idle_timeout_s=1 << 40)
        st.update(net=True, net_host=0xfffffffd, net_args=["--net-deny-all"])
        with open(os.path.join(STATE, "sandboxes", shape, "state.json"), "w") as f:
            json.dump(st, f)
        start_daemon()
        try:
            self.assertIn("%s: unreadable sandbox state: removed" % d, log_tail(50))
            self.assertFalse(os.path.exists(d))
            j = call(0, "GET", "/v1/sandboxes/" + shape).json
            self.assertEqual((j["cpus"], j["memory_mib"], j["idle_timeout_s"]), (1, 256, 0), j)
            self.assertIsNone(j["network"]["host_address"], j)
        finally:
            call(0, "DELETE", "/v1/sandboxes/" + shape)

    def test_a_saved_template_is_shown_and_deleted_whole(self):
        """A template read back at the start: its figures start at 0 (they
        are this daemon's), and a DELETE removes its directory (it stayed
        when the daemon's cwd was on another mount than its state dir: the
        daemon's own view makes that always so)."""
        self.assertTrue(stop_daemon(), log_tail())
        d = os.path.join(STATE, "templates", str(UID_C), "planted")
        os.makedirs(os.path.join(d, "snap"))
        with open(os.path.join(d, "template.json"), "w") as f:
            json.dump({"template": {"name": "planted", "created_at": "2026-12-01T00:00:00Z",
                                    "from_sandbox": "sbx_" + "ab" * 16, "cpus": 1, "memory_mib": 256,
                                    "network": False}, "owner": UID_C}, f)
        start_daemon()
        t = call(UID_C, "GET", "/v1/templates/planted").json
        self.assertEqual((t["name"], t["create_latency"]["samples"], t["pause_time"]["samples"],
                          t["pause_size"]["p50_kib"]), ("planted", 0, 0, None), t)
        self.assertEqual(call(UID_C, "DELETE", "/v1/templates/planted").status, 204)
        self.assertFalse(os.path.exists(d), log_tail(20))
        self.assertNotIn("not all removed", log_tail(20))

    def test_a_state_dir_of_another_user_is_refused(self):
        """Its state is trusted when read back (pids to signal, tokens, the
        jails root cleans up): a state dir another user owns, or may write,
        is refused in one line before anything is read (another user could
        swap its sandboxes/ for a link to /etc)."""
        d = tempfile.mkdtemp(dir=DIR)
        os.chmod(d, 0o755)
        for make in ("owned", "open"):
            st = os.path.join(d, make)
            os.mkdir(st, 0o700)
            if make == "owned":
                os.chown(st, UID_C, UID_C)
            else:
                os.chmod(st, 0o777)
            r = subprocess.run([BIN, "serve", "--socket", os.path.join(d, make + ".sock"), "--state-dir", st],
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(b"--state-dir %s: %s: Operation not permitted (it and each folder above it must be"
                          % (st.encode(), st.encode()), r.stderr)
            self.assertFalse(os.path.exists(os.path.join(st, "sandboxes")), "it read or made state there")
            self.assertFalse(os.path.exists(os.path.join(d, make + ".sock")))

    def test_a_socket_in_a_missing_folder_is_refused(self):
        # a typo in --socket used to make folders (only the default's is made)
        d = tempfile.mkdtemp(dir=DIR)
        sock = os.path.join(d, "no", "such", "api.sock")
        r = subprocess.run([BIN, "serve", "--socket", sock, "--state-dir", os.path.join(d, "state")],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(b"--socket %s: No such file or directory (its folder must exist)" % sock.encode(), r.stderr)
        self.assertFalse(os.path.exists(os.path.join(d, "no")))

    def test_the_state_dir_has_one_spelling(self):
        """A restarted daemon knows its VMMs by the paths in their command
        lines: --state-dir D//x/ is D/x, whatever the spelling."""
        d = tempfile.mkdtemp(dir=DIR)

        def first_line(sock, state):
            p = subprocess.Popen([BIN, "serve", "--socket", os.path.join(d, sock), "--state-dir", state],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                return p.stderr.readline().decode()
            finally:
                p.terminate()
                p.wait(WAIT)
                p.stderr.close()
        self.assertIn("(state in %s/x," % d, first_line("s.sock", d + "//x/"))
        # and through a symlink, the path it leads to: a jailed VMM's socket
        # link names its jail by it, and the daemon's own view shows that one
        os.symlink(d, d + ".link")
        try:
            self.assertIn("(state in %s/y," % os.path.realpath(d), first_line("s2.sock", d + ".link/y"))
        finally:
            os.unlink(d + ".link")

    def test_a_restart_signals_only_its_own_vmms(self):
        victims = [subprocess.Popen(["sleep", "1000"], start_new_session=True) for _ in range(3)]
        fake_dir = tempfile.mkdtemp(prefix="tvm-fakevmm-", dir=DIR)
        fake = near = ended = None
        made = []
        try:
            self.assertTrue(stop_daemon(), "the daemon did not exit on SIGTERM:\n" + log_tail())
            made.append(self.state(victims[0].pid)[0])                            # running
            made.append(self.state(victims[1].pid, "paused", pause_gen=1)[0])     # paused
            self.state(victims[2].pid, pooled=True)                               # a pool's
            # and one whose pid does run "its VMM": `run --vsock-uds <its socket>`
            sid = "sbx_" + secrets.token_hex(16)
            sock = os.path.join(STATE, "sandboxes", sid, "vsock.sock")
            with open(os.path.join(fake_dir, "run"), "w") as f:
                f.write("#!/bin/sh\nwhile :; do sleep 1; done\n")
            os.chmod(os.path.join(fake_dir, "run"), 0o755)
            def stand_in(argv):  # the kernel makes its argv: /bin/sh run ARGS...
                pid = os.fork()
                if pid == 0:
                    try:
                        os.setsid()
                        os.chdir(fake_dir)
                        os.execv("run", argv)
                    finally:
                        os._exit(127)

                def started():
                    with open("/proc/%d/cmdline" % pid, "rb") as f:
                        return f.read().startswith(b"/bin/sh\0run\0")
                wait_for(started, "the stand-in to start")
                return pid
            fake = stand_in(["run", "--vsock-uds", sock])
            made.append(self.state(fake, sid=sid)[0])
            # ended, but its VMM outlived the stop (no helper to send it)
            sid3 = "sbx_" + secrets.token_hex(16)
            ended = stand_in(["run", "--vsock-uds", os.path.join(STATE, "sandboxes", sid3, "vsock.sock")])
            made.append(self.state(ended, "ended", sid=sid3)[0])
            # near misses: its socket not where vmm_argv puts it
            sid2 = "sbx_" + secrets.token_hex(16)
            near = stand_in(["run", "--jail", "--vsock-uds", os.path.join(STATE, "sandboxes", sid2, "vsock.sock")])
            made.append(self.state(near, sid=sid2)[0])
            start_daemon()
            for v in victims:
                self.assertIsNone(v.poll(), "a restarted daemon signalled pid %d, named by a state file, "
                                  "that is not a VMM of its:\n%s" % (v.pid, log_tail()))
            self.assertEqual(os.waitpid(near, os.WNOHANG)[0], 0, "a near miss was signalled:\n" + log_tail())
            wait_for(lambda: os.waitpid(fake, os.WNOHANG)[0] == fake, "the stand-in VMM to be stopped", timeout=30)
            fake = None
            wait_for(lambda: os.waitpid(ended, os.WNOHANG)[0] == ended, "the ended one's VMM to be stopped", timeout=30)
            ended = None
            states = {sid: call(0, "GET", "/v1/sandboxes/" + sid).json["state"] for sid in made}
            self.assertEqual(set(states.values()), {"ended", "paused"}, states)
            self.assertEqual(states[made[1]], "paused")
        finally:
            for v in victims:
                v.kill()
                v.wait()
            for pid in (fake, near, ended):
                if pid:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
            for sid in made:
                call(0, "DELETE", "/v1/sandboxes/" + sid)
            shutil.rmtree(fake_dir, ignore_errors=True)


# --- 09: the daily CPU budget -------------------------------------------

UID_D = 1003  # owns nothing before this test


def restart_daemon(*extra):
    """SIGTERM the daemon (it must exit by itself), start it with extra flags."""
    global EXTRA_ARGS
    if not stop_daemon():
        raise AssertionError("the daemon did not exit on SIGTERM:\n" + log_tail())
    EXTRA_ARGS = list(extra)
    start_daemon()


class T09Budget(ServeTest):
    def restart(self, *extra):
        restart_daemon(*extra)

    def test_spent_budget_answers_429_per_owner_and_across_a_restart(self):
        self.restart("--cpu-budget", "2")
        try:
            sid = create(UID_C).json["id"]  # nothing spent yet: allowed
            # Guest user code runs on the VMM's vCPU thread: 3 s of CPU.
            r = run_exec(UID_C, sid, {"shell": "timeout 3 sh -c 'while :; do :; done'; echo spun"})
            self.assertEqual((r.status, r.json["stdout"]), (200, "spun\n"))
            time.sleep(1)  # the supervisor samples every 250 ms
            r = create(UID_C, expect=None)
            e = self.expect_error(r, 429, "quota_exceeded")
            self.assertIn("daily CPU budget", e["message"])
            # it renews at the next UTC midnight (RFC 9110 Retry-After: seconds)
            left = 86400 - int(time.time()) % 86400
            self.assertLessEqual(abs(int(r.header("Retry-After")) - left), 60, r.headers)
            h = call(UID_C, "GET", "/v1/health").json
            self.assertEqual(h["cpu_budget_s"], 2)
            self.assertGreaterEqual(h["cpu_used_s"], 2)
            self.assertEqual(call(UID_D, "GET", "/v1/health").json["cpu_used_s"], 0)
            # another owner is not charged for it
            other = create(UID_D).json["id"]
            delete(UID_D, other)
            # a resume starts a VMM as a create does: refused too (it was not)
            r = call(UID_C, "POST", "/v1/sandboxes/%s/pause" % sid, timeout=300)
            self.assertEqual(r.status, 200, r.body)
            e = self.expect_error(call(UID_C, "POST", "/v1/sandboxes/%s/resume" % sid, timeout=300), 429,
                                  "quota_exceeded")
            self.assertIn("daily CPU budget", e["message"])
            # ended and reaped: counted for good, kept across a restart
            delete(UID_C, sid)
            wait_ended(UID_C, sid)
            wait_for(lambda: not vmm_pids(sid), "the VMM of %s to go" % sid)
            time.sleep(1)
            with open(os.path.join(STATE, "cpu-usage")) as f:
                lines = [ln.split() for ln in f if ln.split()[1] == str(UID_C)]
            self.assertTrue(lines and int(lines[-1][2]) >= 2000, lines)
            self.restart("--cpu-budget", "2")
            self.expect_error(create(UID_C, expect=None), 429, "quota_exceeded")
        finally:
            self.restart()
        self.assertIsNone(call(UID_C, "GET", "/v1/health").json["cpu_budget_s"])
        create_ok = create(UID_C).json["id"]  # no budget: allowed again
        delete(UID_C, create_ok)


# --- 09b: a long-lived sandbox's exec history -------------------------

class T09bKeptExecs(ServeTest):
    def test_the_oldest_ended_exec_is_forgotten_never_a_running_one(self):
        cfg = os.path.join(DIR, "kept-execs.json")
        with open(cfg, "w") as f:
            json.dump({"kept_execs": 2, "kept_output_mib": 1}, f)
        restart_daemon("--config", cfg)
        try:
            sid = self.a()["id"]
            base = "/v1/sandboxes/%s/execs/" % sid

            def ran(word):
                r = run_exec(UID_A, sid, {"cmd": ["echo", word]})
                self.assertEqual((r.status, r.json["stdout"]), (200, word + "\n"), r.body)
                return r.json["exec_id"]

            r = run_exec(UID_A, sid, {"cmd": ["sleep", "600"], "background": True})
            self.assertEqual(r.status, 201, r.body)
            bg = r.json["exec_id"]
            one = ran("one")
            two = ran("two")  # two kept already: "one" goes, the running one stays
            self.expect_error(call(UID_A, "GET", base + one), 404, "exec_not_found")
            self.assertEqual(call(UID_A, "GET", base + bg).json["state"], "running")
            self.assertEqual(call(UID_A, "GET", base + two).json["result"]["stdout"], "two\n")
            three = ran("three")
            self.expect_error(call(UID_A, "GET", base + two), 404, "exec_not_found")
            self.assertEqual(call(UID_A, "POST", base + bg + "/signal", json={"signal": "SIGKILL"}).status, 204)
            wait_for(lambda: call(UID_A, "GET", base + bg).json["state"] == "exited", "the sleep to end")
            four = ran("four")  # now the ended background one is the oldest
            self.expect_error(call(UID_A, "GET", base + bg), 404, "exec_not_found")
            for eid, word in ((three, "three"), (four, "four")):
                self.assertEqual(call(UID_A, "GET", base + eid).json["result"]["stdout"], word + "\n")
            # 1 MiB of output kept: the second 700 KiB makes the first go
            big = {"shell": "head -c 716800 /dev/zero | tr '\\0' x", "max_output_bytes": 1 << 20}
            first = run_exec(UID_A, sid, big).json
            second = run_exec(UID_A, sid, big).json
            self.assertEqual((len(second["stdout"]), second["stdout_truncated"]), (716800, False))
            self.expect_error(call(UID_A, "GET", base + first["exec_id"]), 404, "exec_not_found")
        finally:
            restart_daemon()


# --- 10: the warm pool --------------------------------------------------

POOL = "/v1/templates/default/pool"


def pool():
    return call(UID_A, "GET", POOL).json


def set_pool(size):
    r = call(UID_A, "PUT", POOL, json={"size": size})
    if r.status != 200:
        raise AssertionError("PUT %s: %d %r" % (POOL, r.status, r.body))
    return r.json


def pooled_dirs():
    """Sandbox directories no create of this module returned: the pool's."""
    d = os.path.join(STATE, "sandboxes")
    return {n for n in os.listdir(d) if n not in CREATED}


def timed_first_result(uid, body=None):
    """(sandbox, seconds to its create's answer, seconds to a `true` result)."""
    t = time.monotonic()
    sb = create(uid, body).json
    created = time.monotonic() - t
    r = run_exec(uid, sb["id"], {"cmd": ["true"]})
    took = time.monotonic() - t
    if (r.status, (r.json or {}).get("exit_code")) != (200, 0):
        raise AssertionError("true in %s: %d %r" % (sb["id"], r.status, r.body))
    return sb, created, took


class T10Pool(ServeTest):
    @classmethod
    def setUpClass(cls):
        if NO_VM:  # each test waits for pooled sandboxes first
            raise unittest.SkipTest("needs /dev/kvm: pooled sandboxes")
    def test_pool_serves_creates_once_each_and_ends_with_the_daemon(self):
        restart_daemon("--pool", "2", "--max-sandboxes", "14", "--max-per-owner", "12")
        try:
            wait_for(lambda: pool()["ready"] == 2, "2 pooled sandboxes", timeout=CREATE_WAIT)
            self.assertEqual(len(pooled_dirs()), 2)
            # invisible: listed to no one, not counted as running
            for uid in (UID_A, UID_C, UID_D):
                ids = [x["id"] for x in call(uid, "GET", "/v1/sandboxes?state=running").json["sandboxes"]]
                self.assertFalse(set(ids) & pooled_dirs(), ids)
            for sid in pooled_dirs():
                self.expect_error(call(UID_A, "GET", "/v1/sandboxes/" + sid), 404, "sandbox_not_found")

            # hits: two owners, each its own never-used VM
            a, c_hit, t_hit = timed_first_result(UID_C, {"envs": {"WHO": "c"}, "metadata": {"k": "v"}})
            b = create(UID_D).json
            self.assertEqual((a["from_pool"], b["from_pool"]), (True, True))
            self.assertEqual(a["metadata"], {"k": "v"})
            probe = "test -e /tmp/mine && echo present || echo absent; od -An -tx1 -N16 /dev/urandom; echo \"[$WHO]\""
            ra = run_exec(UID_C, a["id"], {"shell": "echo x > /tmp/mine; " + probe}).json["stdout"].split("\n")
            rb = run_exec(UID_D, b["id"], {"shell": probe}).json["stdout"].split("\n")
            self.assertEqual((ra[0], ra[2]), ("present", "[c]"))
            self.assertEqual((rb[0], rb[2]), ("absent", "[]"))
            self.assertNotEqual(ra[1], rb[1], "two pooled sandboxes gave the same random bytes")
            self.assertNotEqual(vmm_pids(a["id"]), vmm_pids(b["id"]))
            self.expect_error(call(UID_D, "GET", "/v1/sandboxes/" + a["id"]), 404, "sandbox_not_found")
            p = pool()
            self.assertEqual(p["hits"], 2)
            self.assertEqual(p["create_latency"]["hit"]["samples"], 2)

            # a miss: the pool emptied, the same request restores on demand
            self.assertEqual(set_pool(0)["size"], 0)
            wait_for(lambda: (lambda q: q["ready"] + q["starting"] == 0)(pool()), "the pool to empty")
            wait_for(lambda: not pooled_dirs(), "the pooled sandboxes' state to go")
            m, c_miss, t_miss = timed_first_result(UID_C, {"envs": {"WHO": "c"}})
            self.assertFalse(m["from_pool"])
            self.assertEqual(pool()["misses"], 1)
            # figures, not assertions (no wall-clock asserts): make bench has them too
            # (a guest fork+exec alone is ~1 s on the nested test host)
            print("\n  create: from the pool %.3f s, restored on demand %.3f s (%.0fx); create + first `true`:"
                  " %.3f s, %.3f s" % (c_hit, c_miss, c_miss / max(c_hit, 1e-4), t_hit, t_miss), file=sys.stderr)
            for sb, uid in ((a, UID_C), (b, UID_D), (m, UID_C)):
                delete(uid, sb["id"])

            # 10 creates at once against a pool of 2: all succeed, none shares a VM
            set_pool(2)
            wait_for(lambda: pool()["ready"] == 2, "the pool to refill", timeout=CREATE_WAIT)
            hits0 = pool()["hits"]
            out = [None] * 10

            def one(i):
                out[i] = create(UID_C if i % 2 else UID_D, expect=None)
            ts = [threading.Thread(target=one, args=(i,)) for i in range(10)]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
            self.assertEqual([r.status for r in out], [201] * 10, [r.body for r in out if r.status != 201])
            ids = [r.json["id"] for r in out]
            self.assertEqual(len(set(ids)), 10)
            pids = [tuple(vmm_pids(sid)) for sid in ids]
            self.assertTrue(all(pids), pids)
            self.assertEqual(len(set(pids)), 10, pids)
            hits = sum(r.json["from_pool"] for r in out)
            self.assertGreaterEqual(hits, 2)
            self.assertEqual(pool()["hits"] - hits0, hits)
            for r, i in zip(out, range(10)):
                res = run_exec(UID_C if i % 2 else UID_D, r.json["id"], {"cmd": ["true"]})
                self.assertEqual((res.status, res.json["exit_code"]), (200, 0))
                delete(UID_C if i % 2 else UID_D, r.json["id"])

            # who may size it, and how
            self.expect_error(call(UID_C, "PUT", POOL, json={"size": 1}), 403, "forbidden")
            self.expect_error(call(UID_A, "PUT", POOL, json={"size": 15}), 400, "bad_request")
            self.expect_error(call(UID_A, "PUT", POOL, json={}, check=False), 400, "bad_request")
            self.expect_error(call(UID_A, "PUT", POOL, json={"size": 1, "x": 1}, check=False), 400, "bad_request")
            self.expect_error(call(UID_A, "GET", "/v1/templates/other/pool"), 404, "not_found")
            self.expect_not_allowed("DELETE", POOL)
            wait_for(lambda: pool()["ready"] == 2, "the pool to refill", timeout=CREATE_WAIT)
            left = pooled_dirs()
            self.assertEqual(len(left), 2)
        finally:
            restart_daemon()
        # SIGTERM ended the pool's VMMs and removed their state
        for sid in left:
            self.assertFalse(vmm_pids(sid), "pooled sandbox %s outlived its daemon" % sid)
            self.assertFalse(os.path.exists(os.path.join(STATE, "sandboxes", sid)))
        self.assertEqual(pool()["size"], 0)

    def test_pool_takes_no_place_and_never_gives_a_dead_vm(self):
        n0 = call(0, "GET", "/v1/health").json["sandboxes"]
        restart_daemon("--pool", "2", "--max-sandboxes", str(n0 + 2), "--max-per-owner", "4")
        made = []
        try:
            wait_for(lambda: pool()["ready"] == 2, "2 pooled sandboxes", timeout=CREATE_WAIT)
            # the service is "full" counting pooled VMs: both creates are hits, not 503s
            for uid in (UID_C, UID_D):
                sb = create(uid).json
                made.append((uid, sb["id"]))
                self.assertTrue(sb["from_pool"])
            self.expect_error(create(UID_C, expect=None), 503, "capacity")
            for uid, sid in made:
                delete(uid, sid)
                wait_ended(uid, sid)
            made = []
            # a miss at the limit (another shape) ends a pooled VM for its own
            wait_for(lambda: pool()["ready"] == 2, "the pool to refill", timeout=CREATE_WAIT)
            sb = create(UID_C, {"memory_mib": 320}).json
            made.append((UID_C, sb["id"]))
            self.assertFalse(sb["from_pool"])
            wait_for(lambda: len(pooled_dirs()) == 1, "one pooled sandbox to make room")
            delete(UID_C, sb["id"])
            wait_ended(UID_C, sb["id"])
            made = []
            # a pooled VMM killed just before a create: never handed out
            set_pool(1)
            wait_for(lambda: (lambda q: (q["ready"], q["starting"]) == (1, 0))(pool()), "one ready pooled sandbox",
                     timeout=CREATE_WAIT)
            (sid,) = pooled_dirs()
            with open(os.path.join(STATE, "sandboxes", sid, "state.json")) as f:
                os.kill(json.load(f)["pid"], signal.SIGKILL)
            sb = create(UID_C).json
            made.append((UID_C, sb["id"]))
            self.assertNotEqual(sb["id"], sid)
            self.assertFalse(sb["from_pool"])
            r = run_exec(UID_C, sb["id"], {"cmd": ["true"]})
            self.assertEqual((r.status, r.json["exit_code"]), (200, 0))
        finally:
            for uid, sid in made:
                delete(uid, sid)
            restart_daemon()

    def test_killed_daemon_leaves_no_pool_behind(self):
        restart_daemon("--pool", "1")
        try:
            wait_for(lambda: pool()["ready"] == 1, "a pooled sandbox", timeout=CREATE_WAIT)
            left = pooled_dirs()
            self.assertEqual(len(left), 1)
            self.assertTrue(all(vmm_pids(sid) for sid in left))
            DAEMON.kill()  # no SIGTERM handler ran: the next daemon cleans up
            DAEMON.wait()
        finally:
            restart_daemon()
        for sid in left:
            wait_for(lambda: not vmm_pids(sid), "the VMM of pooled sandbox %s to be killed" % sid, timeout=30)
            self.assertFalse(os.path.exists(os.path.join(STATE, "sandboxes", sid)))


# --- 11: pause and resume -----------------------------------------------

# Started in a session of its own; the exec waits until it counts (the
# agent ends an exec's process group with it).
COUNTER = ("setsid sh -c 'n=0; while :; do n=$((n+1)); echo $n > /tmp/count; sleep 1; done' "
           "</dev/null >/dev/null 2>&1 & while [ ! -e /tmp/count ]; do sleep 0.2; done")


def counter_value(test, sid):
    """The COUNTER's value. Read until not empty: the loop's `echo > file`
    truncates before it writes, and a read in between saw "" (CI, once)."""
    r = run_exec(UID_C, sid, {"shell": 'until c=$(cat /tmp/count) && [ -n "$c" ]; do sleep 0.1; done; echo "$c"',
                                  "timeout_s": 60})
    test.assertEqual((r.status, (r.json or {}).get("exit_code")), (200, 0), r.body)
    return int(r.json["stdout"])


class T11Pause(ServeTest):
    def count(self, sid):
        return counter_value(self, sid)

    def test_pause_resume_keeps_files_and_processes(self):
        sid = create(UID_C).json["id"]
        base = "/v1/sandboxes/%s/" % sid
        try:
            self.assertEqual(run_exec(UID_C, sid, {"shell": "echo round0 > /tmp/data; " + COUNTER}).status, 200)
            wait_for(lambda: self.count(sid) >= 2, "the counter to count")
            self.expect_error(call(UID_C, "POST", base + "resume"), 409, "conflict")
            lines = ["round0"]
            for i in range(1, 4):
                before = self.count(sid)
                r = call(UID_C, "POST", base + "pause", timeout=300)
                self.assertEqual((r.status, r.json["state"]), (200, "paused"), r.body)
                wait_for(lambda: not vmm_pids(sid), "the VMM of paused %s to end" % sid, timeout=30)
                self.assertEqual(call(UID_C, "GET", base[:-1]).json["state"], "paused")
                ids = [x["id"] for x in call(UID_C, "GET", "/v1/sandboxes?state=paused").json["sandboxes"]]
                self.assertIn(sid, ids)
                self.expect_error(run_exec(UID_C, sid, {"cmd": ["true"]}), 409, "conflict")
                self.expect_error(call(UID_C, "POST", base + "pause"), 409, "conflict")
                snaps = glob.glob(os.path.join(STATE, "sandboxes", sid, "paused-*", "mem"))
                self.assertEqual(len(snaps), 1, snaps)  # the one before is removed
                # a diff against the template: the pages changed, far below RAM
                with open(snaps[0], "rb") as f:
                    head = f.read(32)
                self.assertEqual(head[:8], b"TVMDIFF\n")
                pages = struct.unpack_from("<Q", head, 24)[0]
                print("\n  pause %d: a diff of %d pages (%.1f MiB) of %d MiB RAM"
                      % (i, pages, pages / 256, 256), end="")
                self.assertLess(pages * 4096, (256 << 20) // 4)
                r = call(UID_C, "POST", base + "resume", timeout=CREATE_WAIT)
                self.assertEqual((r.status, r.json["state"]), (200, "running"), r.body)
                out = run_exec(UID_C, sid, {"shell": "cat /tmp/data; echo round%d >> /tmp/data" % i}).json
                self.assertEqual(out["stdout"].split(), lines)
                lines.append("round%d" % i)
                after = self.count(sid)
                self.assertGreaterEqual(after, before)
                wait_for(lambda: self.count(sid) > after, "the counter to go on after resume %d" % i)
            print()
            # each pause is in its audit log, with the pid of the VMM that saved it
            paused = [e for e in map(json.loads, call(UID_C, "GET", base + "logs").body.splitlines())
                      if e["event"] == "paused"]
            self.assertEqual(len(paused), 3, paused)
            self.assertTrue(all(e["pid"] > 0 for e in paused), paused)
            # the template's metrics: time and size of its sandboxes' pauses
            p = pool()
            self.assertGreaterEqual(p["pause_time"]["samples"], 3)
            self.assertGreater(p["pause_size"]["p50_kib"], 0)
            self.assertLess(p["pause_size"]["p99_kib"], 64 << 10)
        finally:
            delete(UID_C, sid)
        wait_ended(UID_C, sid)
        wait_for(lambda: not vmm_pids(sid), "the VMM of %s to end" % sid)

    def test_a_failed_resume_leaves_it_paused(self):
        sid = create(UID_C).json["id"]
        base = "/v1/sandboxes/%s/" % sid
        try:
            self.assertEqual(run_exec(UID_C, sid, {"shell": "echo kept > /tmp/data"}).status, 200)
            self.assertEqual(call(UID_C, "POST", base + "pause", timeout=300).status, 200)
            snap = glob.glob(os.path.join(STATE, "sandboxes", sid, "paused-*"))
            self.assertEqual(len(snap), 1, snap)
            os.rename(os.path.join(snap[0], "mem"), os.path.join(snap[0], "mem.aside"))
            r = call(UID_C, "POST", base + "resume", timeout=CREATE_WAIT, check="response")
            self.expect_error(r, 500, "internal")
            self.assertIn("stays paused", r.json["message"])
            self.assertEqual(call(UID_C, "GET", base[:-1]).json["state"], "paused")
            # what failed is mended: the next resume has it all
            os.rename(os.path.join(snap[0], "mem.aside"), os.path.join(snap[0], "mem"))
            r = call(UID_C, "POST", base + "resume", timeout=CREATE_WAIT)
            self.assertEqual((r.status, r.json["state"]), (200, "running"), r.body)
            self.assertEqual(run_exec(UID_C, sid, {"cmd": ["cat", "/tmp/data"]}).json["stdout"], "kept\n")
        finally:
            delete(UID_C, sid)
        wait_ended(UID_C, sid)

    def test_delete_during_a_pause_or_a_resume_answers_410(self):
        """A DELETE while the VMM saves, or while a resume starts it: the
        request answers 410 with the reason (200 if it won the race),
        never 500, and no VMM of the sandbox is left running."""
        for what in ("pause", "resume"):
            sid = create(UID_C).json["id"]
            if what == "resume":
                r = call(UID_C, "POST", "/v1/sandboxes/%s/pause" % sid, timeout=300)
                self.assertEqual(r.status, 200, r.body)
            r = delete_during(UID_C, sid, what, timeout=CREATE_WAIT)
            if r.status != 200:
                self.expect_error(r, 410, "sandbox_expired")
                self.assertEqual(r.json["end_reason"], "killed")
            self.assertEqual(wait_ended(UID_C, sid)["end_reason"], "killed")
            wait_for(lambda: not vmm_pids(sid), "the VMM of %s to end after a DELETE during its %s" % (sid, what))

    def test_paused_sandbox_survives_a_daemon_restart_and_ends_on_delete(self):
        sid = create(UID_C).json["id"]
        base = "/v1/sandboxes/%s/" % sid
        run_exec(UID_C, sid, {"shell": "echo kept > /tmp/data"})
        # re-adopted by a new daemon (its VMM is not that daemon's child):
        # its VMM's end is still a pause, not a crash
        restart_daemon()
        r = call(UID_C, "POST", base + "pause", timeout=300)
        self.assertEqual((r.status, (r.json or {}).get("state")), (200, "paused"), r.body)
        restart_daemon()
        self.assertEqual(call(UID_C, "GET", base[:-1]).json["state"], "paused")
        r = call(UID_C, "POST", base + "resume", timeout=CREATE_WAIT)
        self.assertEqual(r.status, 200, r.body)
        r = run_exec(UID_C, sid, {"cmd": ["cat", "/tmp/data"]})
        self.assertEqual((r.status, (r.json or {}).get("stdout")), (200, "kept\n"), r.body)
        self.assertEqual(call(UID_C, "POST", base + "pause", timeout=300).status, 200)
        # a daemon killed once the VMM had saved the pause but before it
        # wrote so: the next one finds the whole snapshot, and it is paused
        DAEMON.kill()
        DAEMON.wait()
        path = os.path.join(STATE, "sandboxes", sid, "state.json")
        with open(path) as f:
            st = json.load(f)
        st["sandbox"]["state"], st["paused"], st["pause_gen"] = "running", False, st["pause_gen"] - 1
        with open(path, "w") as f:
            json.dump(st, f)
        start_daemon()
        self.assertEqual(call(UID_C, "GET", base[:-1]).json["state"], "paused")
        self.assertEqual(call(UID_C, "POST", base + "resume", timeout=CREATE_WAIT).status, 200)
        r = run_exec(UID_C, sid, {"cmd": ["cat", "/tmp/data"]})
        self.assertEqual((r.status, (r.json or {}).get("stdout")), (200, "kept\n"), r.body)
        self.assertEqual(call(UID_C, "POST", base + "pause", timeout=300).status, 200)
        delete(UID_C, sid)
        self.assertEqual(wait_ended(UID_C, sid)["end_reason"], "killed")



    def test_paused_sandboxes_per_owner_are_bounded(self):
        # they hold disk and never expire: at most --max-per-owner (4) each
        ids = []
        try:
            for _ in range(4):  # one running at a time: paused ones hold no place
                ids.append(create(UID_D).json["id"])
                r = call(UID_D, "POST", "/v1/sandboxes/%s/pause" % ids[-1], timeout=300)
                self.assertEqual(r.status, 200, r.body)
            ids.append(create(UID_D).json["id"])
            e = self.expect_error(call(UID_D, "POST", "/v1/sandboxes/%s/pause" % ids[4], timeout=300), 429,
                                  "quota_exceeded")
            self.assertIn("paused sandboxes", e["message"])
            self.assertEqual(call(UID_D, "GET", "/v1/sandboxes/" + ids[4]).json["state"], "running")
        finally:
            for k in ids:
                delete(UID_D, k)
        for k in ids:
            wait_ended(UID_D, k)


class T12Fork(ServeTest):
    """POST /v1/sandboxes/{id}/fork: children from the parent's state now."""

    def sh(self, sid, script):
        r = run_exec(UID_C, sid, {"shell": script})
        self.assertEqual((r.status, (r.json or {}).get("exit_code")), (200, 0), r.body)
        return r.json["stdout"]

    def count(self, sid):
        return counter_value(self, sid)

    def test_children_have_files_processes_and_their_own_identity(self):
        b = create(UID_C).json
        sid, kids = b["id"], []
        base = "/v1/sandboxes/%s/" % sid
        try:
            self.sh(sid, "echo parent-file > /tmp/data; " + COUNTER)
            wait_for(lambda: self.count(sid) >= 2, "the counter to count")
            # the token grants the sandbox, not new ones
            self.expect_error(call(UID_D, "POST", base + "fork", token=b["access_token"], json={"count": 1}), 403,
                              "forbidden")
            for bad in ({"count": 0}, {"count": 9}, {"count": "2"}, {"cnt": 1}):
                self.expect_error(call(UID_C, "POST", base + "fork", json=bad, check="response"), 400, "bad_request")
            before = self.count(sid)
            r = call(UID_C, "POST", base + "fork", json={"count": 2}, timeout=CREATE_WAIT)
            self.assertEqual(r.status, 201, r.body)
            kids = [k["id"] for k in r.json["sandboxes"]]
            self.assertEqual(len(set(kids)), 2)
            for k in r.json["sandboxes"]:
                self.assertEqual((k["forked_from"], k["state"]), (sid, "running"))
                self.assertEqual(len(k["access_token"]), 32)
            self.assertEqual(call(UID_C, "GET", base[:-1]).json["state"], "running")
            ids = [sid] + kids
            for k in ids:  # files and processes: in each, the counter goes on
                self.assertEqual(self.sh(k, "cat /tmp/data"), "parent-file\n")
                self.assertGreaterEqual(self.count(k), before)
                now = self.count(k)
                wait_for(lambda: self.count(k) > now, "the counter of %s to go on" % k)
            # their own identity: hostname, entropy
            names = [self.sh(k, "cat /proc/sys/kernel/hostname").strip() for k in ids]
            self.assertEqual(names[1:], ["sbx-" + k[4:] for k in kids])
            self.assertEqual(len(set(names)), 3, names)
            rand = [self.sh(k, "cat /proc/sys/kernel/random/uuid; head -c 16 /dev/urandom | od -An -tx1")
                    for k in ids]
            self.assertEqual(len(set(rand)), 3, rand)
            # a write in one is in no other
            self.sh(kids[0], "echo mine > /tmp/kid0")
            for k in (sid, kids[1]):
                self.assertEqual(self.sh(k, "cat /tmp/kid0 2>/dev/null; echo end"), "end\n")
            audit = hostfile(os.path.join(STATE, "sandboxes", kids[0], "audit.jsonl")) or b""
            self.assertIn(b"\"forked\"", audit)
        finally:
            for k in [sid] + kids:
                delete(UID_C, k)
        for k in [sid] + kids:
            wait_ended(UID_C, k)
            wait_for(lambda: not vmm_pids(k), "the VMM of %s to end" % k)

    def test_delete_during_a_paused_fork_answers_410(self):
        """A DELETE of a paused parent while its children start: the fork
        answers 410 (201 if the fork won the race) and no child of it
        runs on."""
        sid = create(UID_C).json["id"]
        base = "/v1/sandboxes/%s/" % sid
        self.assertEqual(call(UID_C, "POST", base + "pause", timeout=300).status, 200)
        r = delete_during(UID_C, sid, "fork", json={"count": 1}, timeout=CREATE_WAIT)
        if r.status == 201:
            kids = [k["id"] for k in r.json["sandboxes"]]
            for k in kids:
                delete(UID_C, k)
        else:
            self.expect_error(r, 410, "sandbox_expired")
            kids = [o["id"] for o in call(UID_C, "GET", "/v1/sandboxes").json["sandboxes"]
                    if o.get("forked_from") == sid]
        for k in kids:
            wait_ended(UID_C, k)
            wait_for(lambda: not vmm_pids(k), "the VMM of %s to end" % k)
        self.assertEqual(wait_ended(UID_C, sid)["end_reason"], "killed")

    def test_a_paused_sandbox_forks_and_stays_paused(self):
        sid = create(UID_C).json["id"]
        base = "/v1/sandboxes/%s/" % sid
        kids = []
        try:
            self.sh(sid, "echo paused-parent > /tmp/data")
            self.assertEqual(call(UID_C, "POST", base + "pause", timeout=300).status, 200)
            r = call(UID_C, "POST", base + "fork", json={"count": 1}, timeout=CREATE_WAIT)
            self.assertEqual(r.status, 201, r.body)
            kids = [k["id"] for k in r.json["sandboxes"]]
            self.assertEqual(r.json["sandboxes"][0]["forked_from"], sid)
            self.assertEqual(self.sh(kids[0], "cat /tmp/data; echo kid > /tmp/data"), "paused-parent\n")
            # the parent stays paused, no VMM of its own; resumed, it is
            # as it was (the child's write is the child's)
            self.assertEqual(call(UID_C, "GET", base[:-1]).json["state"], "paused")
            self.assertEqual(vmm_pids(sid), [])
            self.assertEqual(call(UID_C, "POST", base + "resume", timeout=CREATE_WAIT).status, 200)
            self.assertEqual(self.sh(sid, "cat /tmp/data"), "paused-parent\n")
            r = run_exec(UID_C, sid, {"cmd": ["sleep", "30"], "background": True})
            self.assertEqual(r.status, 201, r.body)
            r = call(UID_C, "POST", base + "fork", json={})
            self.expect_error(r, 409, "conflict")
            self.assertIn("commands are running", r.json["message"])
        finally:
            for k in [sid] + kids:
                delete(UID_C, k)
        for k in [sid] + kids:
            wait_ended(UID_C, k)



class T13Templates(ServeTest):
    """POST /v1/templates {name, from_sandbox}: creates start from it."""

    def sh(self, sid, script, uid=UID_C):
        r = run_exec(uid, sid, {"shell": script})
        self.assertEqual((r.status, (r.json or {}).get("exit_code")), (200, 0), r.body)
        return r.json["stdout"]

    def test_a_template_from_a_sandbox(self):
        src = create(UID_C, {"metadata": {"role": "builder"}}).json["id"]
        made = []
        try:
            # (the exec's process group ends with it: wait until the
            # process is in a session of its own)
            self.sh(src, "mkdir -p /tmp/app && echo prepared > /tmp/app/ready && "
                         "{ setsid sh -c 'echo $$ > /tmp/app/pid; exec sleep 86407' </dev/null >/dev/null 2>&1 & } "
                         "&& while [ ! -s /tmp/app/pid ]; do sleep 0.2; done")
            for bad in ({"name": "default", "from_sandbox": src}, {"name": "Bad Name", "from_sandbox": src},
                        {"name": "x"}, {"name": "x", "from_sandbox": src, "more": 1}):
                self.expect_error(call(UID_C, "POST", "/v1/templates", json=bad, check="response"), 400,
                                  "bad_request")
            # another uid's sandbox is not found, as a missing one
            self.expect_error(call(UID_D, "POST", "/v1/templates", json={"name": "py", "from_sandbox": src}), 404,
                              "sandbox_not_found")
            r = call(UID_C, "POST", "/v1/templates", json={"name": "py", "from_sandbox": src}, timeout=CREATE_WAIT)
            self.assertEqual(r.status, 201, r.body)
            self.assertEqual((r.json["name"], r.json["from_sandbox"]), ("py", src))
            print("\n  template py: %d KiB of memory (a diff against the default template)" % r.json["memory_kib"],
                  end="")
            self.assertLess(r.json["memory_kib"], 64 << 10)
            self.expect_error(call(UID_C, "POST", "/v1/templates", json={"name": "py", "from_sandbox": src}), 409,
                              "conflict")
            # the source runs on, as it was
            self.assertEqual(self.sh(src, "cat /tmp/app/ready"), "prepared\n")
            # a name like a build's temporary one is a name like any other
            r = call(UID_C, "POST", "/v1/templates", json={"name": "py.tmp", "from_sandbox": src},
                     timeout=CREATE_WAIT)
            self.assertEqual(r.status, 201, r.body)
            self.assertEqual(sorted(t["name"] for t in call(UID_C, "GET", "/v1/templates").json["templates"]),
                             ["py", "py.tmp"])
            self.assertEqual(call(UID_D, "GET", "/v1/templates").json["templates"], [])
            self.expect_error(call(UID_D, "GET", "/v1/templates/py"), 404, "template_not_found")
            self.expect_error(create(UID_D, {"template": "py"}, expect=400), 400, "bad_request")
            self.expect_error(create(UID_C, {"template": "py", "memory_mib": 512}, expect=400), 400,
                              "bad_request")
            e = self.expect_error(create(UID_C, {"template": "py", "network": {"enabled": True}}, expect=400), 400,
                                  "bad_request")
            self.assertIn("has no network device", e["message"])
            for _ in range(2):
                b = create(UID_C, {"template": "py"}).json
                made.append(b["id"])
                self.assertEqual(b["template"], "py")
            # the process: a cmdline that starts "sleep 86407" (this shell's does not)
            outs = [self.sh(k, "cat /tmp/app/ready /proc/sys/kernel/hostname; "
                               "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done | "
                               "grep -c '^sleep 86407'; head -c 8 /dev/urandom | od -An -tx1") for k in made]
            for k, out in zip(made, outs):
                lines = out.split("\n")
                self.assertEqual(lines[0], "prepared", out)
                self.assertEqual(lines[1], "sbx-" + k[4:], out)  # its own hostname
                self.assertGreaterEqual(int(lines[2]), 1, out)  # the process runs in it
            self.assertNotEqual(outs[0].split("\n")[3], outs[1].split("\n")[3])  # entropy of its own
            self.sh(made[0], "echo only-here > /tmp/app/mine")
            self.assertEqual(self.sh(made[1], "cat /tmp/app/mine 2>/dev/null; echo end"), "end\n")
            # its own figures: the two creates from it, then a pause of one of its sandboxes
            t = call(UID_C, "GET", "/v1/templates/py").json
            self.assertEqual(t["create_latency"]["samples"], 2, t)
            self.assertEqual(call(UID_C, "GET", "/v1/templates/py.tmp").json["create_latency"]["samples"], 0)
            r = call(UID_C, "POST", "/v1/sandboxes/%s/pause" % made[1], timeout=300)
            self.assertEqual(r.status, 200, r.body)
            t = call(UID_C, "GET", "/v1/templates/py").json
            self.assertEqual((t["pause_time"]["samples"], t["pause_size"]["samples"]), (1, 1), t)
            print(" created from it in %s ms (p50), paused in %s ms, %s KiB"
                  % (t["create_latency"]["p50_ms"], t["pause_time"]["p50_ms"], t["pause_size"]["p50_kib"]), end="")
            # a restart keeps it; a delete ends its use, not the sandboxes made from it
            restart_daemon()
            self.assertEqual(call(UID_C, "GET", "/v1/templates/py").json["from_sandbox"], src)
            self.assertEqual(call(UID_C, "GET", "/v1/templates/py.tmp").json["from_sandbox"], src)
            self.assertEqual(call(UID_C, "DELETE", "/v1/templates/py.tmp").status, 204)
            self.assertEqual(call(UID_C, "DELETE", "/v1/templates/py").status, 204)
            self.expect_error(call(UID_C, "DELETE", "/v1/templates/py"), 404, "template_not_found")
            self.expect_error(create(UID_C, {"template": "py"}, expect=400), 400, "bad_request")
            self.assertEqual(self.sh(made[1], "cat /tmp/app/ready"), "prepared\n")
            self.assertFalse(os.path.exists(os.path.join(STATE, "templates", str(UID_C), "py")))
        finally:
            for k in [src] + made:
                delete(UID_C, k)
        for k in [src] + made:
            wait_ended(UID_C, k)

    def running(self, uid):
        return sorted(x["id"] for x in call(uid, "GET", "/v1/sandboxes?state=running").json["sandboxes"])

    def test_a_template_from_a_warmup(self):
        """POST /v1/templates {name, warmup}: the daemon runs the command in
        a sandbox of its own, saves it when it exits 0, and ends it."""
        before = self.running(UID_C)
        made = None
        try:
            for bad in ({"name": "w", "warmup": ""}, {"name": "w", "warmup": 7},
                        {"name": "w", "warmup": "true", "from_sandbox": "sbx_" + "0" * 32},
                        {"name": "w", "warmup": "true", "cpus": 0},
                        {"name": "w", "warmup": "true", "timeout_s": 10 ** 9},
                        {"name": "w", "from_sandbox": "sbx_" + "0" * 32, "memory_mib": 512}):
                self.expect_error(call(UID_C, "POST", "/v1/templates", json=bad, check="response"), 400,
                                  "bad_request")
            # a failed warm-up says why (the end of its stderr, past 200 kB
            # and a NUL) and saves nothing
            e = self.expect_error(call(UID_C, "POST", "/v1/templates", timeout=CREATE_WAIT, json={
                "name": "w", "warmup": "yes E | head -c 200000 >&2; printf 'x\\000' >&2; "
                                       "echo no-such-package >&2; exit 3"}), 422, "warmup_failed")
            self.assertIn("exited with 3", e["message"])
            self.assertIn("no-such-package", e["message"])
            self.assertNotIn("\n", e["message"])  # one line
            e = self.expect_error(call(UID_C, "POST", "/v1/templates", timeout=CREATE_WAIT,
                                       json={"name": "w", "warmup": "sleep 600", "timeout_s": 2}),
                                  422, "warmup_failed")
            self.assertIn("timed out after 2 s", e["message"])
            self.expect_error(call(UID_C, "GET", "/v1/templates/w"), 404, "template_not_found")
            r = call(UID_C, "POST", "/v1/templates", timeout=CREATE_WAIT, json={
                "name": "w", "warmup": "mkdir -p /opt/w && echo warmed > /opt/w/ready && "
                                       "{ setsid sh -c 'exec sleep 86408' </dev/null >/dev/null 2>&1 & } "
                                       "&& sleep 1"})
            self.assertEqual(r.status, 201, r.body)
            self.assertEqual((r.json["name"], r.json["cpus"], r.json["memory_mib"]), ("w", 1, 256))
            # the warm-up's sandbox has ended: nothing of the build runs on
            build = wait_ended(UID_C, r.json["from_sandbox"])
            self.assertEqual((build["end_reason"], build["metadata"]), ("killed", {"template_build": "w"}))
            # its audit log has the warm-up, as an exec's would be
            logs = call(UID_C, "GET", "/v1/sandboxes/%s/logs" % build["id"])
            recs = {x["event"]: x for x in map(json.loads, logs.body.decode().splitlines())}
            self.assertEqual(recs["warmup_start"]["user"], "root", logs.body)
            self.assertIn("setsid sh -c 'exec sleep 86408'", recs["warmup_start"]["command"])
            self.assertEqual((recs["warmup_end"]["exit_code"], recs["warmup_end"]["timed_out"]), (0, False))
            wait_for(lambda: self.running(UID_C) == before, "the builds' sandboxes to end", WAIT)
            made = create(UID_C, {"template": "w"}).json["id"]
            out = self.sh(made, "cat /opt/w/ready; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; "
                                "done | grep -c '^sleep 86408'")
            self.assertEqual(out.split("\n")[:2], ["warmed", "1"], out)
        finally:
            if made:
                delete(UID_C, made)
            call(UID_C, "DELETE", "/v1/templates/w")
        if made:
            wait_ended(UID_C, made)

    def build_in_background(self, name, script):
        """POST /v1/templates {name, warmup: script} on a thread: (the
        thread, a list that gets the response or the exception, the id
        of the build's sandbox once it runs)."""
        if NO_VM:
            self.skipTest("needs /dev/kvm: a build's sandbox")
        before = set(self.running(UID_C))
        got = []

        def build():
            try:
                got.append(call(UID_C, "POST", "/v1/templates", timeout=CREATE_WAIT,
                                json={"name": name, "warmup": script}))
            except Exception as x:  # noqa: BLE001 - the restart's broken connection
                got.append(x)
        th = threading.Thread(target=build)
        th.start()
        new = wait_for(lambda: set(self.running(UID_C)) - before, "the build's sandbox to run", CREATE_WAIT)
        return th, got, new.pop()

    def test_a_warmup_is_a_running_command(self):
        """While it runs: no pause of its sandbox (409), no second build of
        the name (409); a DELETE of it ends the build with 410."""
        th, got, sid = self.build_in_background("busy", "sleep 600")
        try:
            # the sandbox has started: the warm-up runs, or is about to
            wait_for(lambda: any(json.loads(x).get("event") == "warmup_start" for x in
                                 call(UID_C, "GET", "/v1/sandboxes/%s/logs" % sid).body.decode().splitlines()),
                     "the warm-up to start", WAIT)
            e = self.expect_error(call(UID_C, "POST", "/v1/sandboxes/%s/pause" % sid), 409, "conflict")
            self.assertIn("running", e["message"])
            e = self.expect_error(call(UID_C, "POST", "/v1/templates", json={"name": "busy", "warmup": "true"}),
                                  409, "conflict")
            self.assertIn("being built", e["message"])
            self.assertEqual(delete(UID_C, sid).status, 204)
            th.join(WAIT)
            e = self.expect_error(got[0], 410, "sandbox_expired")
            self.assertEqual(e["end_reason"], "killed")
            self.expect_error(call(UID_C, "GET", "/v1/templates/busy"), 404, "template_not_found")
        finally:
            delete(UID_C, sid)
            th.join(WAIT)

    def test_a_build_a_restart_interrupts_is_ended(self):
        th, got, sid = self.build_in_background("cut", "sleep 600")
        try:
            restart_daemon()
            th.join(WAIT)
            sb = wait_ended(UID_C, sid)
            self.assertEqual(sb["end_reason"], "killed")
            wait_for(lambda: not vmm_pids(sid), "the VMM of %s to go" % sid)
            self.expect_error(call(UID_C, "GET", "/v1/templates/cut"), 404, "template_not_found")
            # the name is free again
            self.assertNotIn("cut", [t["name"] for t in call(UID_C, "GET", "/v1/templates").json["templates"]])
        finally:
            delete(UID_C, sid)
            th.join(WAIT)


# --- 14: the host's OOM killer --------------------------------------------

def own_cgroup_dirs():
    """{controller ("" for cgroup v2): this process's cgroup directory in
    the hierarchy that has it}."""
    mounts = {}
    with open("/proc/self/mounts") as f:
        for ln in f:
            mnt, fs, opts = ln.split()[1:4]
            if fs == "cgroup":
                for o in opts.split(","):
                    mounts.setdefault(o, mnt)
            elif fs == "cgroup2":
                mounts.setdefault("", mnt)
    dirs = {}
    with open("/proc/self/cgroup") as f:
        for ln in f:
            _, ctrls, path = ln.rstrip("\n").split(":", 2)
            for c in ctrls.split(",") if ctrls else [""]:
                if c in mounts:
                    dirs[c] = mounts[c] + path.rstrip("/")
    return dirs


class T14Oom(ServeTest):
    def test_a_vmm_past_its_cgroup_parents_memory_ends_oom(self):
        """--cgroup-parent: the VMMs' cgroups are made under it, so a
        limit there holds them; the one its OOM killer ends is "oom"."""
        dirs = own_cgroup_dirs()
        mem = dirs.get("memory")
        if not mem and "" in dirs and os.path.exists(os.path.join(dirs[""], "cgroup.controllers")):
            with open(os.path.join(dirs[""], "cgroup.controllers")) as f:
                mem = dirs[""] if "memory" in f.read().split() else None
        if not mem:
            self.skipTest("no memory cgroup controller on this host")
        # relative: below the daemon's own cgroup (the VMMs' default place)
        parent = "tinyvmm-serve-oom-%d" % os.getpid()
        mem = os.path.join(mem, parent)
        os.makedirs(mem, exist_ok=True)
        limit = os.path.join(mem, "memory.max")
        if not os.path.exists(limit):  # cgroup v1
            limit = os.path.join(mem, "memory.limit_in_bytes")
        with open(limit, "w") as f:
            f.write("%d\n" % (96 << 20))
        # The template's memory file in the page cache, charged to this
        # cgroup: the VMM maps it private, and its clean pages charged to
        # the limited cgroup would be reclaimed and read again (a thrash
        # until the sandbox's lifetime ends, not an OOM kill; what a host
        # sees when it overcommits its parent's limit).
        delete(UID_C, create(UID_C).json["id"])  # the template exists
        for m in glob.glob(os.path.join(os.environ["TINYVMM_CACHE"], "**", "mem"), recursive=True):
            with open(m, "rb") as f:
                while f.read(1 << 20):
                    pass
        # a parent the VMM would refuse: the daemon does not start
        bad = subprocess.run([BIN, "serve", "--socket", os.path.join(DIR, "bad.sock"), "--cgroup-parent", "a/../b"],
                             capture_output=True, timeout=WAIT)
        self.assertEqual(bad.returncode, 64, bad.stderr)
        self.assertEqual(len(bad.stderr.decode().strip().splitlines()), 1, bad.stderr)
        self.assertIn("--cgroup-parent", bad.stderr.decode())
        sid = None
        try:
            restart_daemon("--cgroup-parent", parent)
            sid = create(UID_C).json["id"]
            # the guest has 256 MiB: 160 MiB fits in it, not in the host's 96
            r = run_exec(UID_C, sid, {"shell": "python3 -c 'import time; time.sleep(1); "
                                               "b = b\"x\" * (160 << 20); print(len(b))'"})
            # the exec's answer names the end, as a GET does
            e = self.expect_error(r, 410, "sandbox_expired")
            self.assertEqual(e["end_reason"], "oom", r.body)
            self.assertEqual(wait_ended(UID_C, sid)["end_reason"], "oom")
            self.assertIn("out of memory", log_tail(200))
            # only that sandbox: the daemon serves on
            self.assertEqual(call(UID_C, "GET", "/v1/health").status, 200)
        finally:
            if sid:
                delete(UID_C, sid)
            restart_daemon()
            # the VMM's own cgroup went with it; then the parent, in
            # every controller the VMM made it in
            for d in sorted(set(os.path.join(x, parent) for x in dirs.values())):
                if os.path.isdir(d):
                    wait_for(lambda: not glob.glob(d + "/*/"), "%s to empty" % d, WAIT)
                    os.rmdir(d)


# --- 15: networked sandboxes --------------------------------------------

def tap_addrs(name):
    """The IPv4 addresses (CIDR) on a host interface, [] when it is gone."""
    r = subprocess.run(["ip", "-4", "-o", "addr", "show", "dev", name], capture_output=True, text=True)
    return [w for ln in r.stdout.splitlines() for i, w in enumerate(ln.split()) if ln.split()[i - 1] == "inet"]


def accept_one(lsn, got, answer):
    """A thread that takes one connection on lsn: got gets its peer's
    address and the first 100 bytes it sent (or the error), and it gets
    answer."""
    def run():
        try:
            c, peer = lsn.accept()
            with c:
                got["peer"], got["data"] = peer[0], c.recv(100)
                c.sendall(answer)
        except OSError as e:
            got["error"] = repr(e)
    # a daemon thread: a test that ends early (skipped where no VM can
    # start) leaves it in accept() until its timeout, not the process
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


class T15Network(ServeTest):
    def check_own_network(self, sb, lsn, mac=None):
        """Networked sandbox sb (its JSON) was given its own identity: a TAP
        with its host end, eth0's MAC (mac, if given), hostname sbx-<hex>,
        one default route via its host end, and a TCP connection from its
        address to its host end on lsn's port."""
        net, h = sb["network"], sb["id"][4:]
        self.assertEqual(net["tap"], "tvs" + h[:8])
        self.assertEqual(tap_addrs(net["tap"]), [net["host_address"] + "/30"])
        code = ("import socket\n"
                "print(open('/sys/class/net/eth0/address').read().strip())\n"
                "print(open('/proc/sys/kernel/hostname').read().strip())\n"
                "print(' '.join(l.split()[2] for l in open('/proc/net/route') if l.split()[1:2] == ['00000000']))\n"
                "s = socket.create_connection((%r, %d), 20); s.sendall(b'child'); print(s.recv(100))\n"
                % (net["host_address"], lsn.getsockname()[1]))
        got = {}
        t = accept_one(lsn, got, b"hello child")
        r = run_exec(UID_C, sb["id"], {"cmd": ["python3", "-c", code]})
        t.join(30)
        self.assertEqual((r.status, r.json.get("exit_code")), (200, 0), r.body)
        got_mac, name, gws, answer = r.json["stdout"].splitlines()
        if mac:
            self.assertEqual(got_mac, mac)
        self.assertEqual(name, "sbx-" + h)
        self.assertEqual([socket.inet_ntoa(struct.pack("<I", int(g, 16))) for g in gws.split()],
                         [net["host_address"]], "its one default route")
        self.assertEqual(answer, "b'hello child'")
        self.assertEqual((got.get("peer"), got.get("data")), (net["address"], b"child"), got)

    def check_networked_fork(self, sb, lsn, allow, count, rules=None, unfinished=False):
        """Fork networked sandbox sb into count children; each must have its
        own TAP and /30, eth0 at its address with its own MAC and default
        route, the parent's egress rules (allow: --net-allow values; rules:
        a function of its host end giving the set), and reach its host end
        on lsn's port through its own TAP. The children are deleted after,
        and their TAPs go; or, unfinished, their state says their identity
        was not given yet (a daemon killed mid-fork; the first child paused)
        and a restarted daemon ends them (crashed) and removes their TAPs."""
        port = lsn.getsockname()[1]
        r = call(UID_C, "POST", "/v1/sandboxes/%s/fork" % sb["id"], json={"count": count}, timeout=600)
        self.assertEqual(r.status, 201, r.body)
        kids = r.json["sandboxes"]
        nets = [k["network"] for k in kids] + [sb["network"]]
        self.assertEqual(len({n["tap"] for n in nets}), count + 1, nets)
        self.assertEqual(len({str(ipaddress.ip_network(n["address"] + "/30", strict=False)) for n in nets}),
                         count + 1, nets)
        for k in kids:
            net, h = k["network"], k["id"][4:]
            self.check_own_network(k, lsn, "02:" + ":".join(h[i:i + 2] for i in range(0, 10, 2)))
            with open("/proc/%d/cmdline" % vmm_pids(k["id"])[0], "rb") as f:
                argv = f.read().decode().split("\0")
            self.assertEqual(argv[argv.index("--net") + 1], net["tap"])
            self.assertNotIn("--net-ip", argv)
            allowed = [argv[i + 1] for i, a in enumerate(argv) if a == "--net-allow"]
            if allow is not None:
                self.assertEqual(allowed, allow)
            else:
                self.assertEqual(set(allowed), rules(net["host_address"]))
        if unfinished:
            # paused too (a pause once slipped past the mark: its state then
            # took the paused branch of a restart, which kept it)
            r = call(UID_C, "POST", "/v1/sandboxes/%s/pause" % kids[0]["id"], timeout=300)
            self.assertEqual((r.status, r.json.get("state")), (200, "paused"), r.body)
            self.assertTrue(stop_daemon(), log_tail())
            for k in kids:
                path = os.path.join(STATE, "sandboxes", k["id"], "state.json")
                with open(path) as f:
                    st = json.load(f)
                self.assertIs(st["identity_pending"], False)
                st["identity_pending"] = True
                with open(path, "w") as f:
                    json.dump(st, f)
            start_daemon()
        for k in kids:
            if unfinished:
                self.assertEqual(call(UID_C, "GET", "/v1/sandboxes/" + k["id"]).json["end_reason"], "crashed")
                wait_for(lambda: not vmm_pids(k["id"]), "the VMM of unfinished " + k["id"] + " to end", timeout=30)
            else:
                self.assertEqual(delete(UID_C, k["id"]).status, 204)
        for k in kids:
            wait_for(lambda: not os.path.exists("/sys/class/net/" + k["network"]["tap"]),
                     "the TAP of deleted " + k["id"] + " to go", timeout=30)

    def test_empty_lists_let_nothing_out(self):
        """allow_out and dns given and empty: the VMM denies everything
        (--net-deny-all), where no list at all gives the default rules.
        Read from its VMM's argv, or, where no VM can start, from the
        flags saved in the state of the sandbox that could not."""
        for net, want in (({"enabled": True, "allow_out": []}, ["--net-deny-all"]),
                          ({"enabled": True, "allow_out": [], "dns": []}, ["--net-deny-all"]),
                          ({"enabled": True, "allow_out": [], "dns": ["10.0.0.53"]}, ["--net-dns", "10.0.0.53"])):
            c = Client(SOCK, API, timeout=CREATE_WAIT)
            r = as_uid(UID_C, c.request, "POST", "/v1/sandboxes", json={"network": net}, check="response")
            if r.status == 201:
                CREATED[r.json["id"]] = (UID_C, r.json["access_token"])
                with open("/proc/%d/cmdline" % vmm_pids(r.json["id"])[0], "rb") as f:
                    argv = f.read().decode().split("\0")
                flags = [a for a in argv[argv.index("--net") + 2:] if a]  # the egress flags end its argv
                self.assertEqual(flags[:2], ["--net-ingress", "replies"])  # every sandbox: no way in
                flags = flags[2:]
                self.assertEqual(delete(UID_C, r.json["id"]).status, 204)
            else:  # refused before any VMM (503 unavailable): nothing to read
                self.assertTrue(NO_VM, r.body)
                self.expect_error(r, 503, "unavailable")
                self.skipTest("needs /dev/kvm: a sandbox's VMM")
            self.assertEqual(flags, want, net)

    def test_saved_rules_are_checked_again_at_load(self):
        """A state file is input too: a restarted daemon runs each saved
        egress value through the VMM's parsers again, and one they refuse
        leaves the sandbox with no way out (--net-deny-all), said once."""
        r = as_uid(UID_C, Client(SOCK, API, timeout=CREATE_WAIT).request, "POST", "/v1/sandboxes",
                   json={"network": {"enabled": True, "allow_out": ["10.0.0.0/8"]}}, check="response")
        if r.status == 201:
            sid = r.json["id"]
            CREATED[sid] = (UID_C, r.json["access_token"])
            self.assertEqual(delete(UID_C, sid).status, 204)
            wait_ended(UID_C, sid)
        else:  # no VM here: a state as a daemon leaves an ended networked sandbox's
            self.assertTrue(NO_VM, r.body)
            self.expect_error(r, 503, "unavailable")
            sid = write_state(0, "ended", net=True, net_host=0x0ad30005, net_args=["--net-allow", "10.0.0.0/8"])[0]
        path = os.path.join(STATE, "sandboxes", sid, "state.json")
        said = "sandbox %s: its egress rules are unreadable: it is given none" % sid
        for args, bad in ((["--net-allow", "10.0.0.0/8"], False), (["--net-allow", "bogus"], True),
                          (["--net-allow", "10.0.0.0/33"], True), (["--net-dns", "not-an-address"], True),
                          (["--net-dns", "10.0.0.1"] * 5, True), (["--net-exec", "/bin/sh"], True)):
            self.assertTrue(stop_daemon(), log_tail())
            with open(path) as f:
                st = json.load(f)
            self.assertIn("net_args", st)
            st["net_args"] = args
            with open(path, "w") as f:
                json.dump(st, f)
            start_daemon()
            self.assertEqual(said in log_tail(20), bad, (args, log_tail(20)))

    def test_the_daemon_gives_each_a_tap_and_a_30_and_removes_it(self):
        """network.enabled: a TAP of its own made by the daemon with the
        host end of a /30 of --net-range; the guest's eth0 has the other
        end; its allow_out is enforced; the TAP outlives a daemon restart
        while its VMM runs and goes with the VMM (DELETE, or a VMM gone
        while the daemon was down)."""
        lsn = socket.socket()
        lsn.bind(("0.0.0.0", 0))
        lsn.listen(4)
        lsn.settimeout(EXEC_WAIT)
        port = lsn.getsockname()[1]
        got = {}
        t = accept_one(lsn, got, b"hello guest")
        try:
            t0 = time.monotonic()
            sb = create(UID_C, {"network": {"enabled": True, "allow_out": ["10.211.0.0/16:%d/tcp" % port]},
                                "timeout_s": 1800}).json
            print("\n  networked create: %.1f s (the first makes its template)" % (time.monotonic() - t0))
            net = sb["network"]
            tap, host, guest = net["tap"], net["host_address"], net["address"]
            self.assertEqual(tap, "tvs" + sb["id"][4:12])
            self.assertEqual(ipaddress.ip_network(host + "/30", strict=False),
                             ipaddress.ip_network(guest + "/30", strict=False))
            self.assertIn(ipaddress.ip_address(host), ipaddress.ip_network("10.211.0.0/16"))
            self.assertEqual(tap_addrs(tap), [host + "/30"])
            # one python: the allowed port answers, another port of the host is dropped
            code = ("import socket\n"
                    "s = socket.create_connection((%r, %d), 20); s.sendall(b'from the guest'); print(s.recv(100))\n"
                    "try:\n socket.create_connection((%r, %d), 3); print('reached')\n"
                    "except OSError as e:\n print('blocked', type(e).__name__)\n" % (host, port, host, port + 1))
            r = run_exec(UID_C, sb["id"], {"cmd": ["python3", "-c", code]})
            self.assertEqual((r.status, r.json["exit_code"]), (200, 0), r.body)
            self.assertEqual(r.json["stdout"].splitlines(), ["b'hello guest'", "blocked TimeoutError"])
            t.join(30)
            self.assertEqual((got.get("peer"), got.get("data")), (guest, b"from the guest"), got)
            # nothing opens a connection into it: a server it runs answers
            # itself, not the host (its SYN is dropped: a timeout, not a refusal)
            r = run_exec(UID_C, sb["id"], {"shell": "setsid -f python3 -m http.server 8080 >/dev/null 2>&1; "
                                                    "for i in $(seq 60); do python3 -c 'import socket; socket."
                                                    "create_connection((\"127.0.0.1\", 8080), 2)' 2>/dev/null "
                                                    "&& echo up && break; sleep 1; done"})
            self.assertEqual(r.json["stdout"], "up\n", r.body)
            with self.assertRaises(socket.timeout):
                socket.create_connection((guest, 8080), 5).close()
            # a restart re-adopts it: its TAP stays, as it was
            restart_daemon()
            again = call(UID_C, "GET", "/v1/sandboxes/" + sb["id"]).json
            self.assertEqual((again["state"], again["network"]), ("running", net))
            self.assertEqual(tap_addrs(tap), [host + "/30"])
            # forked into two: each child has a /30, a TAP, an address, a
            # default route and a MAC of its own, its parent's allow_out,
            # and reaches the host through its own link
            self.check_networked_fork(sb, lsn, ["10.211.0.0/16:%d/tcp" % port], 2)
            # saved as a template, which has its network device: a create
            # from it has a network of its own (its /30, its guest
            # re-addressed, the create's rules); one without is refused
            r = call(UID_C, "POST", "/v1/templates", json={"name": "withnet", "from_sandbox": sb["id"]},
                     timeout=600)
            self.assertEqual((r.status, r.json.get("network")), (201, True), r.body)
            e = self.expect_error(create(UID_C, {"template": "withnet"}, expect=400), 400, "bad_request")
            self.assertIn("network.enabled true is required", e["message"])
            tsb = create(UID_C, {"template": "withnet",
                                 "network": {"enabled": True, "allow_out": ["10.211.0.0/16:%d/tcp" % port]}}).json
            self.assertNotEqual(tsb["network"]["tap"], tap)
            self.check_own_network(tsb, lsn)
            self.assertEqual(delete(UID_C, tsb["id"]).status, 204)
            self.assertEqual(call(UID_C, "DELETE", "/v1/templates/withnet").status, 204)
            wait_for(lambda: not os.path.exists("/sys/class/net/" + tsb["network"]["tap"]),
                     "the TAP of deleted " + tsb["id"] + " to go", timeout=30)
            # built by a warm-up with a network: the warm-up fetches from its
            # host end (the default route), the template is networked, and a
            # create from it has what was fetched and a network of its own
            r = call(UID_C, "POST", "/v1/templates", json={"name": "x", "from_sandbox": sb["id"],
                                                            "network": {"enabled": True}}, check="response")
            self.assertIn("network: only with warmup", self.expect_error(r, 400, "bad_request")["message"])
            fetch = ("import socket, struct\n"
                     "gw = [socket.inet_ntoa(struct.pack('<I', int(l.split()[2], 16))) for l in open('/proc/net/route')"
                     " if l.split()[1] == '00000000'][0]\n"
                     "s = socket.create_connection((gw, %d), 20); s.sendall(b'warm-up')\n"
                     "open('/opt/fetched', 'wb').write(s.recv(100))\n" % port)
            got.clear()
            t = accept_one(lsn, got, b"package bytes")
            r = call(UID_C, "POST", "/v1/templates", timeout=900,
                     json={"name": "netwarm", "warmup": "python3 - <<'EOF'\n" + fetch + "EOF\n",
                           "network": {"enabled": True, "allow_out": ["10.211.0.0/16:%d/tcp" % port]}})
            t.join(30)
            self.assertEqual((r.status, r.json.get("network")), (201, True), r.body)
            self.assertEqual(got.get("data"), b"warm-up", got)
            self.assertIn(ipaddress.ip_address(got["peer"]), ipaddress.ip_network("10.211.0.0/16"))
            wsb = call(UID_C, "GET", "/v1/sandboxes/" + r.json["from_sandbox"]).json
            self.assertEqual(wsb["state"], "ended")
            wait_for(lambda: not os.path.exists("/sys/class/net/tvs" + wsb["id"][4:12]),
                     "the TAP of the warm-up's sandbox to go", timeout=30)
            e = self.expect_error(create(UID_C, {"template": "netwarm"}, expect=400), 400, "bad_request")
            self.assertIn("network.enabled true is required", e["message"])
            tsb = create(UID_C, {"template": "netwarm",
                                 "network": {"enabled": True, "allow_out": ["10.211.0.0/16:%d/tcp" % port]}}).json
            r = run_exec(UID_C, tsb["id"], {"cmd": ["cat", "/opt/fetched"]})
            self.assertEqual((r.status, r.json.get("stdout")), (200, "package bytes"), r.body)
            self.check_own_network(tsb, lsn)
            self.assertEqual(delete(UID_C, tsb["id"]).status, 204)
            self.assertEqual(call(UID_C, "DELETE", "/v1/templates/netwarm").status, 204)
            # paused: its VMM ends, its /30 and TAP stay (its guest has that
            # address); resumed by a restarted daemon (the egress rules come
            # from the sandbox's state): the same address, the same allow_out
            r = call(UID_C, "POST", "/v1/sandboxes/%s/pause" % sb["id"], timeout=300)
            self.assertEqual((r.status, r.json.get("state"), r.json.get("network")), (200, "paused", net), r.body)
            wait_for(lambda: not vmm_pids(sb["id"]), "the VMM of the paused sandbox to end", timeout=30)
            # restored from a template with a network device, not booted:
            # its pause is a diff against that template
            snaps = glob.glob(os.path.join(STATE, "sandboxes", sb["id"], "paused-*", "mem"))
            self.assertEqual(len(snaps), 1, snaps)
            with open(snaps[0], "rb") as f:
                self.assertEqual(f.read(8), b"TVMDIFF\n", "a full snapshot: the sandbox was booted")
            self.assertEqual(tap_addrs(tap), [host + "/30"])
            restart_daemon()
            self.assertEqual(tap_addrs(tap), [host + "/30"])
            r = call(UID_C, "POST", "/v1/sandboxes/%s/resume" % sb["id"], timeout=CREATE_WAIT)
            self.assertEqual((r.status, r.json.get("state"), r.json.get("network")), (200, "running", net), r.body)
            with open("/proc/%d/cmdline" % vmm_pids(sb["id"])[0], "rb") as f:
                argv = f.read().decode().split("\0")
            self.assertEqual([argv[i + 1] for i, a in enumerate(argv) if a.startswith("--net")],
                             [tap, "10.211.0.0/16:%d/tcp" % port])
            got.clear()
            t = accept_one(lsn, got, b"hello guest")
            r = run_exec(UID_C, sb["id"], {"cmd": ["python3", "-c", code]})
            self.assertEqual((r.status, r.json.get("exit_code")), (200, 0), r.body)
            self.assertEqual(r.json["stdout"].splitlines(), ["b'hello guest'", "blocked TimeoutError"])
            t.join(30)
            self.assertEqual((got.get("peer"), got.get("data")), (guest, b"from the guest"), got)
            # it booted, so its first pause was whole and the second is a
            # diff against it: the first must stay for every later resume
            for _ in range(2):
                r = call(UID_C, "POST", "/v1/sandboxes/%s/pause" % sb["id"], timeout=300)
                self.assertEqual((r.status, r.json.get("state")), (200, "paused"), r.body)
                r = call(UID_C, "POST", "/v1/sandboxes/%s/resume" % sb["id"], timeout=CREATE_WAIT)
                self.assertEqual((r.status, r.json.get("state"), r.json.get("network")), (200, "running", net), r.body)
            r = run_exec(UID_C, sb["id"], {"cmd": ["cat", "/proc/sys/kernel/hostname"]})
            self.assertEqual((r.status, r.json.get("exit_code"), r.json.get("stdout")),
                             (200, 0, "sbx-%s\n" % sb["id"][4:]), r.body)
            # its VMM gone while the daemon is down: the next one removes the TAP
            self.assertTrue(stop_daemon(), log_tail())
            for pid in vmm_pids(sb["id"]):
                os.kill(pid, signal.SIGKILL)
            wait_for(lambda: not vmm_pids(sb["id"]), "the VMM to go")
            self.assertTrue(os.path.exists("/sys/class/net/" + tap), "the TAP went with its VMM: not the daemon's")
            start_daemon()
            self.assertEqual(call(UID_C, "GET", "/v1/sandboxes/" + sb["id"]).json["end_reason"], "crashed")
            self.assertFalse(os.path.exists("/sys/class/net/" + tap), "a restarted daemon left the TAP of " + sb["id"])
            # its /30 is free again, but an interface of the host has it (a
            # TAP some crash left, another daemon's): the next sandbox skips it
            subprocess.run(["ip", "tuntap", "add", "dev", "tvstest0", "mode", "tap"], check=True)
            self.addCleanup(subprocess.run, ["ip", "link", "del", "tvstest0"])
            subprocess.run(["ip", "addr", "add", host + "/30", "dev", "tvstest0"], check=True)
            # no allow_out: everything but the range goes out, and its own host end
            t0 = time.monotonic()
            sb2 = create(UID_C, {"network": {"enabled": True}}).json
            print("  networked create: %.1f s" % (time.monotonic() - t0))
            tap2, host2 = sb2["network"]["tap"], sb2["network"]["host_address"]
            self.assertNotEqual(ipaddress.ip_network(host2 + "/30", strict=False),
                                ipaddress.ip_network(host + "/30", strict=False))
            self.assertEqual(tap_addrs(tap2), [host2 + "/30"])
            with open("/proc/sys/net/ipv4/conf/%s/rp_filter" % tap2) as f:
                self.assertEqual(f.read().strip(), "1", "a spoofed source would pass the host")
            want = {str(n) for n in ipaddress.ip_network("0.0.0.0/0").address_exclude(
                ipaddress.ip_network("10.211.0.0/16"))} | {host2 + "/32", "::/0"}
            # the default rules, at its create and again at a resume
            for resumed in (False, True):
                if resumed:
                    r = call(UID_C, "POST", "/v1/sandboxes/%s/pause" % sb2["id"], timeout=300)
                    self.assertEqual((r.status, r.json.get("state")), (200, "paused"), r.body)
                    r = call(UID_C, "POST", "/v1/sandboxes/%s/resume" % sb2["id"], timeout=CREATE_WAIT)
                    self.assertEqual((r.status, r.json.get("state")), (200, "running"), r.body)
                with open("/proc/%d/cmdline" % vmm_pids(sb2["id"])[0], "rb") as f:
                    argv = f.read().decode().split("\0")
                allowed = {argv[i + 1] for i, a in enumerate(argv) if a == "--net-allow"}
                self.assertEqual(allowed, want, "resumed" if resumed else "created")
            # its child's default rules are made for the child's own /30,
            # by the daemon's range now (not its parent's, of another range);
            # the child of a daemon killed before its identity was given ends
            restart_daemon("--net-range", "10.212.0.0/16")
            self.check_networked_fork(sb2, lsn, None, 1, lambda h: {str(n) for n in ipaddress.ip_network(
                "0.0.0.0/0").address_exclude(ipaddress.ip_network("10.212.0.0/16"))} | {h + "/32", "::/0"},
                unfinished=True)
            # deleted, and the daemon stopped at once: its stop waits for
            # that VMM to end and removes the TAP
            self.assertEqual(delete(UID_C, sb2["id"]).status, 204)
            self.assertTrue(stop_daemon(), log_tail())
            self.assertFalse(os.path.exists("/sys/class/net/" + tap2), "a stopped daemon left the TAP of " + sb2["id"])
            start_daemon()
            self.assertEqual(wait_ended(UID_C, sb2["id"])["end_reason"], "killed")
            # a daemon killed after making a TAP, before the sandbox's state
            # was whole: the next one removes the TAP by the sandbox's name
            self.assertTrue(stop_daemon(), log_tail())
            lost = "sbx_" + secrets.token_hex(16)
            os.makedirs(os.path.join(STATE, "sandboxes", lost))
            with open(os.path.join(STATE, "sandboxes", lost, "state.json"), "w") as f:
                f.write('{"sandbox": {"id": "' + lost)  # cut short
            subprocess.run(["ip", "tuntap", "add", "dev", "tvs" + lost[4:12], "mode", "tap", "vnet_hdr"], check=True)
            start_daemon()
            self.assertFalse(os.path.exists("/sys/class/net/tvs" + lost[4:12]), "the TAP of unreadable " + lost)
            # a range whose every /30 is taken (here by the host's own
            # interface): the service is full, 503, and no sandbox is left
            restart_daemon("--net-range", str(ipaddress.ip_network(host + "/30", strict=False)))
            before = len(call(UID_C, "GET", "/v1/sandboxes").json["sandboxes"])
            r = create(UID_C, {"network": {"enabled": True}}, expect=503)
            self.assertEqual(self.expect_error(r, 503, "capacity")["message"],
                             "network: net_range has no free /30 (1 in all): try again later")
            self.assertTrue(r.header("Retry-After"), r.headers)
            self.assertEqual(len(call(UID_C, "GET", "/v1/sandboxes").json["sandboxes"]), before)
            restart_daemon()
            # ranges no TAP may take: refused at start, one line
            for bad in ("127.0.0.0/8", "0.0.0.0/8", "224.0.0.0/24", "10.0.0.0/ 24", "10.0.0.0/31", "10.0.0.0"):
                r = subprocess.run([BIN, "serve", "--socket", os.path.join(DIR, "bad.sock"), "--net-range", bad],
                                   capture_output=True, timeout=WAIT)
                self.assertEqual((r.returncode, len(r.stderr.splitlines())), (64, 1), (bad, r.stderr))
        finally:
            lsn.close()
            t.join(5)


# --- 16: the daemon's own walls -----------------------------------------

SELFTEST_BIN = os.path.join(ROOT, "build", "tinyvmm-seccomp-test")


def children_of(pid):
    out = []
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


class T16DaemonWalls(ServeTest):
    """The daemon confines itself (seccomp role "daemon",
    vmm/sandbox/seccomp_roles.c) before it reads a client's byte; VMMs and
    TAPs are made by its privileged helper (vmm/serve/serve_priv.c)."""

    def test_every_thread_is_confined_and_the_helper_holds_nothing(self):
        call(UID_A, "GET", "/v1/health")  # a connection thread, at least, has run
        tasks = os.listdir("/proc/%d/task" % DAEMON.pid)
        self.assertGreaterEqual(len(tasks), 2, "the accept loop and the supervisor")
        for t in tasks:
            with open("/proc/%d/task/%s/status" % (DAEMON.pid, t)) as f:
                st = dict(ln.rstrip("\n").split(":\t", 1) for ln in f if ":\t" in ln)
            self.assertEqual((st.get("Seccomp"), st.get("NoNewPrivs")), ("2", "1"), "thread %s: %s" % (t, st))
        helpers = [c for c in children_of(DAEMON.pid) if is_helper_of(c, DAEMON.pid)]
        self.assertEqual(len(helpers), 1, children_of(DAEMON.pid))
        st = proc_status(helpers[0])
        self.assertEqual(st.get("Seccomp"), "0", "the helper has none: a VMM sets up its own")
        # nothing of the daemon's but stdio and its socket: not the
        # listening socket, not the state dir's lock; and the binary it
        # runs, held open (a file put at its path later is never run)
        fds = sorted(int(f) for f in os.listdir("/proc/%d/fd" % helpers[0]))
        self.assertEqual(fds, [0, 1, 2, 3, 4])
        self.assertTrue(os.readlink("/proc/%d/fd/3" % helpers[0]).startswith("socket:"))
        self.assertEqual(os.readlink("/proc/%d/fd/4" % helpers[0]), os.path.realpath(BIN))
        self.assertIn("seccomp log)", log_tail(400))

    def test_inherited_descriptors_are_closed(self):
        """A descriptor the daemon inherits (here the host's /, open) would
        be a way out of its own view (/proc/self/fd/N/...): it closes all
        but stdio first."""
        d = tempfile.mkdtemp(dir=DIR)
        sock = os.path.join(d, "s.sock")
        root = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
        try:
            p = subprocess.Popen([BIN, "serve", "--socket", sock, "--state-dir", os.path.join(d, "state")],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 pass_fds=(root,))
        finally:
            os.close(root)
        try:
            wait_for(lambda: os.path.exists(sock), "the daemon's socket")
            held = []
            for f in os.listdir("/proc/%d/fd" % p.pid):
                try:
                    held.append(os.readlink("/proc/%d/fd/%s" % (p.pid, f)))
                except OSError:
                    pass
            self.assertNotIn("/", held, held)
        finally:
            p.terminate()
            self.assertEqual(p.wait(WAIT), 0)

    def test_a_daemon_not_root_confines_itself_and_hangs_up_in_order(self):
        """A daemon run as another user puts its walls on too (Landlock
        needs no_new_privs then: it refused to start), and SIGHUP (its
        terminal closed) stops it as SIGTERM does: exit 0, its socket
        removed (it died with 129 and left the socket)."""
        d = tempfile.mkdtemp(dir=DIR)
        os.chown(d, UID_C, UID_C)
        sock = os.path.join(d, "s.sock")
        logf = open(os.path.join(d, "log"), "wb")

        def drop():
            os.setgroups([])
            os.setgid(UID_C)
            os.setuid(UID_C)
        p = subprocess.Popen([BIN, "serve", "--socket", sock, "--state-dir", os.path.join(d, "state")],
                             stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT, preexec_fn=drop)
        logf.close()
        try:
            wait_for(lambda: os.path.exists(sock) or p.poll() is not None, "the daemon's socket")
            self.assertIsNone(p.poll(), read_text(os.path.join(d, "log")))
            r = as_uid(UID_C, Client(sock, API, timeout=WAIT).get, "/v1/health")
            self.assertEqual(r.status, 200)
            self.assertEqual(proc_status(p.pid).get("Seccomp"), "2")
            os.kill(p.pid, signal.SIGHUP)
            self.assertEqual(p.wait(WAIT), 0)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait(WAIT)
        self.assertFalse(os.path.exists(sock))
        self.assertIn("stopped", read_text(os.path.join(d, "log")))

    def test_a_vmm_is_the_daemons_child(self):
        if NO_VM:
            self.skipTest("needs /dev/kvm: a sandbox's VMM")
        sid = create(UID_A).json["id"]
        try:
            pids = vmm_pids(sid)
            self.assertEqual(len(pids), 1, pids)
            self.assertEqual(proc_status(pids[0]).get("PPid"), str(DAEMON.pid),
                             "made by the helper with CLONE_PARENT: the daemon reaps it")
            r = run_exec(UID_A, sid, {"cmd": ["true"]})
            self.assertEqual((r.status, r.json["exit_code"]), (200, 0))
        finally:
            delete(UID_A, sid)

    def test_a_daemon_whose_helper_is_gone_stops(self):
        """Its helper killed: no VMM could start and no TAP go, and a
        confined daemon cannot make another, so it stops (exit 1, one
        line) for its service manager to restart; nothing is left."""
        helpers = [c for c in children_of(DAEMON.pid) if is_helper_of(c, DAEMON.pid)]
        self.assertEqual(len(helpers), 1)
        os.kill(helpers[0], signal.SIGKILL)
        self.assertEqual(DAEMON.wait(WAIT), 1, log_tail())
        self.assertIn("tinyvmm serve: its privileged helper is gone: the daemon stops (its sandboxes stay for "
                      "the next daemon)", log_tail(10))
        self.assertEqual(leaks(), [])
        start_daemon()
        r = call(UID_A, "GET", "/v1/health")
        self.assertNotIn("the daemon's privileged helper is gone: no sandbox can start (restart the daemon)",
                         r.json["problems"])

    def test_a_stopped_helper_is_given_up(self):
        """A helper that does not answer (SIGSTOP) holds a create for
        PRIV_TIMEOUT_MS at most; then the daemon gives it up and stops."""
        if NO_VM:  # a create is refused before it asks the helper anything
            self.skipTest("needs /dev/kvm: a create that reaches the helper")
        helpers = [c for c in children_of(DAEMON.pid) if is_helper_of(c, DAEMON.pid)]
        self.assertEqual(len(helpers), 1)
        os.kill(helpers[0], signal.SIGSTOP)
        try:
            # the host's addresses are asked first: no answer, given up,
            # then the create is refused as one no sandbox can serve
            r = as_uid(UID_A, Client(SOCK, API, timeout=CREATE_WAIT).request, "POST", "/v1/sandboxes",
                       json={"network": {"enabled": True}}, check="response")
            e = self.expect_error(r, 503, "unavailable")
            self.assertIn("privileged helper", e["message"])
            self.assertEqual(DAEMON.wait(WAIT), 1, log_tail())
        finally:
            try:
                os.kill(helpers[0], signal.SIGCONT)
            except ProcessLookupError:
                pass
            if DAEMON.poll() is None:  # an assertion above failed
                stop_daemon()
            wait_for(lambda: not procs_matching(DIR), "the stopped helper to be ended with its daemon", timeout=30)
            start_daemon()

    def test_no_guest_is_said_in_the_daemons_terms(self):
        """A daemon whose TINYVMM_DATA_DIR has no guest: /v1/health says so
        in the daemon's terms (not the CLI's --kernel), and a create of
        the default template is 503 unavailable before any VMM starts."""
        d = tempfile.mkdtemp(dir=DIR)
        sock = os.path.join(d, "s.sock")
        env = dict(os.environ, TINYVMM_DATA_DIR=os.path.join(d, "empty"), TINYVMM_CACHE=os.path.join(d, "cache"))
        os.mkdir(env["TINYVMM_DATA_DIR"])
        logf = open(os.path.join(d, "log"), "wb")
        p = subprocess.Popen([BIN, "serve", "--socket", sock, "--state-dir", os.path.join(d, "state"),
                              "--socket-mode", "0666"], env=env, stdin=subprocess.DEVNULL, stdout=logf,
                             stderr=subprocess.STDOUT)
        logf.close()
        want = ("no guest kernel and base image in %s: no sandbox of the default template can start "
                "(tinyvmm serve's VMMs take the guest from $TINYVMM_DATA_DIR)" % env["TINYVMM_DATA_DIR"])
        try:
            def healthy():
                try:
                    return Client(sock, API, timeout=10).get("/v1/health")
                except OSError:
                    return None
            h = wait_for(healthy, "the daemon without a guest to answer")
            self.assertEqual(h.json["status"], "degraded")
            self.assertEqual(h.json["problems"][-1], want)
            r = Client(sock, API, timeout=CREATE_WAIT).request("POST", "/v1/sandboxes", json={}, check="response")
            e = self.expect_error(r, 503, "unavailable")
            self.assertEqual(e["message"], h.json["problems"][0])  # the first: /dev/kvm's where it is missing
            self.assertEqual(os.listdir(os.path.join(d, "state", "sandboxes")), [])  # no VMM was started
        finally:
            p.terminate()
            self.assertEqual(p.wait(WAIT), 0)

    def test_a_pooled_sandbox_is_no_ones_in_the_log(self):
        """A warm pool's sandbox has no owner until a create takes it: its
        audit lines say owner null, never (uid_t)-1."""
        if NO_VM:
            self.skipTest("needs /dev/kvm: no pool is made where no VM can start")
        restart_daemon("--pool", "1")
        try:
            wait_for(lambda: call(0, "GET", POOL).json["ready"] == 1, "the pooled sandbox",
                     timeout=CREATE_WAIT)
        finally:
            restart_daemon()  # the pooled one ends here
        self.assertIn('"owner":null', log_tail(400))
        self.assertNotIn("4294967295", log_tail(400))

    def test_a_forbidden_call_ends_the_daemon(self):
        """The test binary's daemon makes a call its role forbids (listen,
        from a thread made after the filter) as soon as it is confined."""
        if not os.access(SELFTEST_BIN, os.X_OK):
            self.skipTest("no %s (make integration builds it)" % SELFTEST_BIN)
        d = tempfile.mkdtemp(dir=DIR)

        def run(*extra):
            return subprocess.run([SELFTEST_BIN, "serve", "--socket", os.path.join(d, "s.sock"),
                                   "--state-dir", os.path.join(d, "state")] + list(extra),
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=WAIT)

        r = run()  # log is the default
        self.assertEqual(r.returncode, 159, r.stderr)
        self.assertIn(b"tinyvmm: seccomp: the daemon thread made a forbidden system call: listen (50)\n", r.stderr)
        r = run("--seccomp", "kill")
        self.assertEqual(r.returncode, -signal.SIGSYS, r.stderr)
        # its helper ends with it
        wait_for(lambda: not procs_matching(d), "the helpers of the ended daemons to go", timeout=30)
        # off: no filter, so no self-test either; it serves
        p = subprocess.Popen([SELFTEST_BIN, "serve", "--socket", os.path.join(d, "s.sock"), "--state-dir",
                              os.path.join(d, "state"), "--seccomp", "off"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def healthy():
                try:
                    return Client(os.path.join(d, "s.sock"), API, timeout=10).get("/v1/health").status == 200
                except OSError:
                    return False
            wait_for(healthy, "the unconfined daemon to answer")
            self.assertEqual(proc_status(p.pid).get("Seccomp"), "0")
        finally:
            p.terminate()
            self.assertEqual(p.wait(WAIT), 0)
        wait_for(lambda: not procs_matching(d), "the helper of the stopped daemon to go", timeout=30)
        # bad modes: one line, exit 64 (a wrong command line, as for every command)
        r = subprocess.run([BIN, "serve", "--socket", os.path.join(d, "s.sock"), "--seccomp", "strict"],
                           capture_output=True, timeout=WAIT)
        self.assertEqual((r.returncode, r.stderr), (64, b"tinyvmm serve: --seccomp: 'strict' is not kill, log or off\n"))
        cfg = os.path.join(d, "c.json")
        with open(cfg, "w") as f:
            json.dump({"seccomp": True}, f)
        r = subprocess.run([BIN, "serve", "--socket", os.path.join(d, "s.sock"), "--config", cfg],
                           capture_output=True, timeout=WAIT)
        self.assertEqual(r.returncode, 64, r.stderr)
        self.assertEqual(r.stderr.splitlines(), [b'tinyvmm serve: --config ' + cfg.encode() +
                                                 b': seccomp: "kill", "log" or "off" is expected'])
        # a limit at 0: the one named (it named seven)
        r = subprocess.run([BIN, "serve", "--socket", os.path.join(d, "s.sock"), "--max-sandboxes", "0"],
                           capture_output=True, timeout=WAIT)
        self.assertEqual((r.returncode, r.stderr),
                         (64, b"tinyvmm serve: max_sandboxes (--max-sandboxes) must not be 0\n"))


if __name__ == "__main__":
    unittest.main()
