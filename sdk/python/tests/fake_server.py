"""TEST DOUBLE -- NOT the tinyvmm daemon.

A standard-library, in-process fake of ``tinyvmm serve`` (vmm/serve/API.md,
v1) so the SDK and MCP tests run without KVM.  HTTP/1.1 on a Unix socket in
a temporary directory; every "sandbox" is a host directory and every exec a
host subprocess run as the current user (no isolation whatsoever: never
point anything but tests at it).

Guest paths are mapped into the sandbox's directory: file routes take the
path as ``ROOT + path``; in exec command lines and argv, absolute paths
under /tmp, /home, /work, /data, /srv and /sandbox are textually rewritten to
``ROOT + path`` (good enough for the tests' ``python3 /tmp/task.py``).

Run stand-alone for manual SDK play:
    python3 tests/fake_server.py /tmp/fake.sock
"""
from __future__ import annotations

import base64
import datetime as _dt
import http.server
import json
import os
import re
import secrets
import shutil
import signal
import socket
import socketserver
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from typing import Any, Dict, List, Optional

VERSION = "0.0.0-fake"
_TEMPLATE_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_PATH_RE = re.compile(r"(?<![\w./~-])/(?:tmp|home|work|data|srv|sandbox)(?=/|\b)")


def _now() -> float:
    return time.time()


def _rfc3339(t: Optional[float]) -> Optional[str]:
    if t is None:
        return None
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")



def _template_figures():
    """A new template's figures (none yet), as the daemon shows them."""
    lat = {"samples": 0, "p50_ms": None, "p99_ms": None}
    return {"create_latency": dict(lat), "pause_time": dict(lat),
            "pause_size": {"samples": 0, "p50_kib": None, "p99_kib": None}}

class ApiError(Exception):
    def __init__(self, code: int, error: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.code, self.error, self.message, self.extra = code, error, message, extra


class Exec:
    def __init__(self, sb: "FakeSandbox", eid: str, cap: int) -> None:
        self.sb, self.id, self.cap = sb, eid, cap
        self.events: List[Dict[str, Any]] = []  # output events + final
        self.offset = 0
        self.kept = {"stdout": 0, "stderr": 0}
        self.trunc = {"stdout": False, "stderr": False}
        self.cond = threading.Condition()
        self.state = "running"
        self.result: Optional[Dict[str, Any]] = None
        self.error: Optional[Dict[str, Any]] = None
        self.final: Optional[Dict[str, Any]] = None
        self.proc: Optional[subprocess.Popen] = None
        self.timed_out = False
        self.started = time.monotonic()
        self.out = {"stdout": bytearray(), "stderr": bytearray()}

    def add_output(self, kind: str, data: bytes) -> None:
        with self.cond:
            room = self.cap - self.kept[kind]
            if room <= 0:
                self.trunc[kind] = True
                return
            if len(data) > room:
                data = data[:room]
                self.trunc[kind] = True
            self.kept[kind] += len(data)
            self.out[kind] += data
            self.events.append({"type": kind, "offset": self.offset,
                                "data": base64.b64encode(data).decode("ascii")})
            self.offset += len(data)
            self.cond.notify_all()

    def finish(self, final: Dict[str, Any]) -> None:
        with self.cond:
            if self.final is not None:
                return
            self.final = final
            if final["type"] == "exit":
                self.state = "exited"
                r = {k: v for k, v in final.items() if k != "type"}
                r["stdout"] = self.out["stdout"].decode("utf-8", "replace")
                r["stderr"] = self.out["stderr"].decode("utf-8", "replace")
                self.result = {"exec_id": r.pop("exec_id"), **r}
            else:
                self.state = "failed"
                self.error = {"error": final["error"], "message": final["message"]}
            self.cond.notify_all()


class FakeSandbox:
    def __init__(self, server: "FakeDaemon", owner: int, body: Dict[str, Any],
                 parent: Optional["FakeSandbox"] = None, files_from: Optional[str] = None) -> None:
        self.id = "sbx_" + secrets.token_hex(16)
        self.token = secrets.token_hex(16)
        self.owner = owner
        self.root = tempfile.mkdtemp(prefix=self.id + "-", dir=server.tmp)
        if parent is not None:  # a fork: a copy of the parent's files at the fork
            files_from = parent.root
        if files_from is not None:  # a fork, or a create from a template: a copy of its files
            shutil.copytree(files_from, self.root, symlinks=True, dirs_exist_ok=True)
        for d in ("tmp", "home/sandbox"):
            os.makedirs(os.path.join(self.root, d), exist_ok=True)
        now = _now()
        self.created = now
        self.timeout_s = body.get("timeout_s", 300)
        self.expires = now + self.timeout_s
        self.paused = False
        self.forked_from: Optional[str] = parent.id if parent is not None else None
        self.idle = body.get("idle_timeout_s", 0)
        self.last_activity = now
        self.ended_at: Optional[float] = None
        self.end_reason: Optional[str] = None
        self.template = body.get("template", "default")
        self.cpus = body.get("cpus", 1)
        self.memory = body.get("memory_mib", 256)
        self.metadata = dict(body.get("metadata") or {})
        self.envs = dict(body.get("envs") or {})
        self.secret_envs = dict(body.get("secret_envs") or {})
        net = body.get("network")
        self.network = isinstance(net, dict) and bool(net.get("enabled"))
        self.execs: Dict[str, Exec] = {}
        self.log: List[Dict[str, Any]] = [{"time": _rfc3339(now), "event": "created"}]

    @property
    def state(self) -> str:
        return "ended" if self.ended_at is not None else "paused" if self.paused else "running"

    def json(self) -> Dict[str, Any]:
        return {"id": self.id, "state": self.state, "template": self.template,
                "created_at": _rfc3339(self.created), "expires_at": _rfc3339(self.expires),
                "ended_at": _rfc3339(self.ended_at), "end_reason": self.end_reason,
                "cpus": self.cpus, "memory_mib": self.memory, "idle_timeout_s": self.idle,
                "from_pool": False, "forked_from": self.forked_from, "network": None, "metadata": self.metadata}

    def gpath(self, p: str) -> str:
        if not p.startswith("/"):
            raise ApiError(400, "bad_request", "path: must be absolute")
        norm = os.path.normpath(p)
        return self.root + ("" if norm == "/" else norm)

    def rewrite(self, s: str) -> str:
        return _PATH_RE.sub(lambda m: self.root + m.group(0), s)

    def end(self, reason: str) -> None:
        if self.ended_at is not None:
            return
        self.ended_at = _now()
        self.end_reason = reason
        self.log.append({"time": _rfc3339(self.ended_at), "event": "ended", "end_reason": reason})
        for ex in list(self.execs.values()):
            if ex.final is None:
                if ex.proc is not None and ex.proc.poll() is None:
                    try:
                        os.killpg(ex.proc.pid, signal.SIGKILL)
                    except OSError:
                        pass
                ex.finish({"type": "error", "error": "sandbox_ended",
                           "message": f"the sandbox ended ({reason})"})


class FakeDaemon:
    """The fake daemon.  ``start()`` then use ``socket_path``; ``stop()`` at the end.

    Pause, resume and fork as the daemon: a paused sandbox keeps its files,
    its lifetime stops, and every route that needs the VM answers 409; a fork
    copies the parent's directory.  Only the owner (the peer's uid) may fork:
    set a sandbox's ``owner`` to another uid to play a caller who only holds
    its token.

    Custom templates as the daemon: ``templates`` maps ``(uid, name)`` to a
    saved template (its JSON answer in ``"json"``, a copy of the sandbox's
    directory in ``"root"``); each uid sees its own only (re-key one to
    another uid to play a template that is not the caller's).  A create from
    a template copies its files and takes its shape.

    Knobs for tests: ``quota`` (sandboxes per owner), ``template_quota``
    (templates per uid, 64), ``max_timeout_s``,
    ``support_stdin_signal`` (False: those routes answer 501),
    ``capacity_full`` (True: creates, resumes and forks answer 503 with Retry-After),
    ``keepalive_s``.
    """

    def __init__(self, socket_path: Optional[str] = None) -> None:
        self.tmp = tempfile.mkdtemp(prefix="tinyvmm-fake-")
        self.socket_path = socket_path or os.path.join(self.tmp, "api.sock")
        self.sandboxes: Dict[str, FakeSandbox] = {}
        self.templates: Dict[Any, Dict[str, Any]] = {}  # (uid, name) -> {"json", "root"}
        self.template_quota = 64
        self.lock = threading.RLock()
        self.quota = 20
        self.pool_size = 0
        self.max_timeout_s = 3600
        self.keep_ended_s = 600.0
        self.support_stdin_signal = True
        self.capacity_full = False
        self.keepalive_s = 10.0
        self.requests: List[str] = []
        self.json_bodies: List[Any] = []  # (method, path, body) of every JSON request
        self.answers: List[Any] = []  # (method, path, status, body) of every JSON answer
        self.uploads: List[Dict[str, Any]] = []  # {"path", "chunked", "size"} per PUT /files
        self._stop = threading.Event()
        self._server: Optional[socketserver.ThreadingUnixStreamServer] = None

    # -- lifecycle --------------------------------------------------------
    def start(self) -> "FakeDaemon":
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        daemon = self

        class Handler(_Handler):
            fake = daemon

        class Server(socketserver.ThreadingUnixStreamServer):
            daemon_threads = True
            allow_reuse_address = True

            def handle_error(self, request, client_address):
                # A client that hung up (a test that closed its connection
                # with a request half sent, or unread) is no server error,
                # as for the real daemon; anything else is printed.
                if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
                    super().handle_error(request, client_address)

        self._server = Server(self.socket_path, Handler)
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        threading.Thread(target=self._reaper, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self.lock:
            for sb in self.sandboxes.values():
                sb.end("killed")
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> "FakeDaemon":
        return self.start()

    def __exit__(self, *a: Any) -> None:
        self.stop()

    def _reaper(self) -> None:
        while not self._stop.wait(0.1):
            now = _now()
            with self.lock:
                for sid, sb in list(self.sandboxes.items()):
                    if sb.ended_at is None and sb.paused:
                        continue  # a paused sandbox's lifetime stops
                    if sb.ended_at is None:
                        running = any(e.final is None for e in sb.execs.values())
                        if now >= sb.expires:
                            sb.end("expired")
                        elif sb.idle and not running and now - sb.last_activity >= sb.idle:
                            sb.end("idle")
                    elif now - sb.ended_at > self.keep_ended_s:
                        del self.sandboxes[sid]
                        shutil.rmtree(sb.root, ignore_errors=True)

    # -- execs ------------------------------------------------------------
    def start_exec(self, sb: FakeSandbox, body: Dict[str, Any], keep_stdin_open: bool) -> Exec:
        cap = body.get("max_output_bytes", 1 << 20)
        ex = Exec(sb, "ex_" + secrets.token_hex(8), cap)
        env = dict(os.environ)
        env.update({"HOME": sb.root + "/home/sandbox", "TINYVMM_FAKE_ROOT": sb.root})
        env.update(sb.envs)
        env.update(sb.secret_envs)
        env.update(body.get("envs") or {})
        cwd = sb.root + "/home/sandbox"
        if body.get("cwd"):
            cwd = sb.gpath(body["cwd"])
            if not os.path.isdir(cwd):
                raise ApiError(502, "guest_error", "no such file or directory: cwd")
        if "cmd" in body:
            argv = [sb.rewrite(a) for a in body["cmd"]]
        else:
            argv = ["/bin/sh", "-c", sb.rewrite(body["shell"])]
        stdin_data = base64.b64decode(body["stdin_b64"]) if body.get("stdin_b64") else None
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except FileNotFoundError:
            raise ApiError(502, "guest_error", f"no such file: {body.get('cmd', ['?'])[0]}")
        except PermissionError:
            raise ApiError(502, "guest_error", "permission denied")
        ex.proc = proc
        sb.execs[ex.id] = ex
        sb.log.append({"time": _rfc3339(_now()), "event": "exec", "exec_id": ex.id})
        ex.events.append({"type": "start", "exec_id": ex.id})  # index 0, not output

        def feed_stdin() -> None:
            try:
                if stdin_data:
                    proc.stdin.write(stdin_data)
                if not keep_stdin_open:
                    proc.stdin.close()
            except OSError:
                pass

        feed_stdin()

        def reader(kind: str, f: Any) -> None:
            while True:
                b = f.read1(65536) if hasattr(f, "read1") else f.read(65536)
                if not b:
                    return
                ex.add_output(kind, b)

        readers = [threading.Thread(target=reader, args=(k, getattr(proc, k)), daemon=True)
                   for k in ("stdout", "stderr")]
        for t in readers:
            t.start()
        timeout_s = body.get("timeout_s") or 0

        def waiter() -> None:
            try:
                rc = proc.wait(timeout=timeout_s or None)
            except subprocess.TimeoutExpired:
                ex.timed_out = True
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
                rc = proc.wait()
            for t in readers:
                t.join(5)
            for fh in (proc.stdout, proc.stderr, proc.stdin):
                try:
                    fh.close()
                except (OSError, ValueError):
                    pass
            if ex.final is not None:
                return
            sig = -rc if rc < 0 else 0
            wall = int((time.monotonic() - ex.started) * 1000)
            ex.finish({"type": "exit", "exec_id": ex.id,
                       "exit_code": 124 if ex.timed_out else (128 + sig if sig else rc),
                       "signal": sig, "timed_out": ex.timed_out,
                       "stdout_truncated": ex.trunc["stdout"], "stderr_truncated": ex.trunc["stderr"],
                       "oom_killed": False, "pids_limited": False,
                       "wall_ms": wall, "cpu_ms": 0, "max_rss_kib": 0})
            sb.last_activity = _now()

        threading.Thread(target=waiter, daemon=True).start()
        return ex


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeDaemon

    def log_message(self, *a: Any) -> None:  # quiet; also client_address is '' on AF_UNIX
        pass

    def address_string(self) -> str:
        return "unix"

    # -- plumbing ---------------------------------------------------------
    def _peer_uid(self) -> int:
        try:
            creds = self.connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            return struct.unpack("3i", creds)[1]
        except (OSError, AttributeError):
            return os.getuid()

    def _send_json(self, code: int, obj: Any, headers: Optional[Dict[str, str]] = None) -> None:
        self.fake.answers.append((self.command, urllib.parse.urlsplit(self.path).path, code, obj))
        raw = b"" if obj is None else json.dumps(obj).encode()
        self.send_response(code)
        if obj is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(raw)

    def _start_chunked(self, ctype: str, code: int = 200) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

    def _end_chunks(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _body_chunks(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            while True:
                line = self.rfile.readline(100)
                if not line:
                    raise ApiError(400, "bad_request", "truncated chunked body")
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1000) not in (b"\r\n", b"\n", b""):
                        pass
                    return
                left = size
                while left:
                    b = self.rfile.read(min(left, 65536))
                    if not b:
                        raise ApiError(400, "bad_request", "truncated chunked body")
                    left -= len(b)
                    yield b
                self.rfile.readline(10)
        else:
            left = int(self.headers.get("Content-Length") or 0)
            while left:
                b = self.rfile.read(min(left, 65536))
                if not b:
                    raise ApiError(400, "bad_request", "truncated body")
                left -= len(b)
                yield b

    def _json_body(self) -> Dict[str, Any]:
        raw = b"".join(self._body_chunks())
        if not raw:
            return {}
        # as the daemon: a JSON body is parsed as JSON whatever its Content-Type says
        try:
            d = json.loads(raw)
        except ValueError:
            raise ApiError(400, "bad_request", "body: malformed JSON")
        if not isinstance(d, dict):
            raise ApiError(400, "bad_request", "body: must be an object")
        self.fake.json_bodies.append((self.command, urllib.parse.urlsplit(self.path).path, d))
        return d

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def _dispatch(self, method: str) -> None:
        u = urllib.parse.urlsplit(self.path)
        self.query = urllib.parse.parse_qsl(u.query, keep_blank_values=True)
        self.fake.requests.append(f"{method} {u.path}")
        try:
            self._route(method, u.path)
        except ApiError as e:
            body = {"code": e.code, "error": e.error, "message": e.message, **e.extra}
            hdrs = {"Retry-After": "1"} if e.code == 503 else {}
            # the request body may be unread: do not reuse this connection
            hdrs["Connection"] = "close"
            self.close_connection = True
            try:
                self._send_json(e.code, body, hdrs)
            except OSError:
                pass
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def q(self, name: str) -> Optional[str]:
        for k, v in self.query:
            if k == name:
                return v
        return None

    # -- routes -----------------------------------------------------------
    def _route(self, method: str, path: str) -> None:
        f = self.fake
        parts = [p for p in path.split("/") if p]
        if parts[:1] != ["v1"]:
            raise ApiError(404, "not_found", f"no route {path}")
        parts = parts[1:]
        allowed = None
        if parts == ["health"]:
            allowed = "GET"
            if method == "GET":
                with f.lock:
                    n = sum(1 for s in f.sandboxes.values() if s.state == "running")
                return self._send_json(200, {"status": "ok", "sandboxes": n, "problems": []})
        elif parts == ["version"]:
            allowed = "GET"
            if method == "GET":
                return self._send_json(200, {"version": VERSION, "api": "v1"})
        elif parts == ["sandboxes"]:
            if method == "POST":
                return self._create()
            if method == "GET":
                return self._list()
            allowed = "GET, POST"
        elif len(parts) >= 2 and parts[0] == "sandboxes":
            return self._sandbox_route(method, parts[1], parts[2:])
        elif parts == ["templates"]:
            if method == "POST":
                return self._template_create()
            if method == "GET":
                uid = self._peer_uid()
                with f.lock:
                    out = [t["json"] for (u, _), t in sorted(f.templates.items()) if u == uid]
                return self._send_json(200, {"templates": out})
            allowed = "GET, POST"
        elif len(parts) == 2 and parts[0] == "templates":
            allowed = "GET, DELETE"
            if method in ("GET", "DELETE"):
                key = (self._peer_uid(), parts[1])
                with f.lock:
                    t = f.templates.get(key)
                    if t is None:
                        raise ApiError(404, "template_not_found", f"no template \"{parts[1]}\"")
                    if method == "GET":
                        return self._send_json(200, t["json"])
                    del f.templates[key]
                shutil.rmtree(t["root"], ignore_errors=True)  # sandboxes made from it run on
                return self._send_json(204, None)
        elif len(parts) == 3 and parts[0] == "templates" and parts[2] == "pool":
            allowed = "GET, PUT"
            if parts[1] != "default":
                raise ApiError(404, "not_found", f"no template \"{parts[1]}\"")
            if method == "PUT":
                if self._peer_uid() not in (0, os.geteuid()):
                    raise ApiError(403, "forbidden", "may not size the pool")
                body = self._json_body()
                size = body.get("size")
                if set(body) != {"size"} or not isinstance(size, int) or isinstance(size, bool) or \
                        not 0 <= size <= 16:
                    raise ApiError(400, "bad_request", "size: an integer from 0 to 16 is expected")
                with f.lock:
                    f.pool_size = size
            if method in ("GET", "PUT"):
                lat = {"samples": 0, "p50_ms": None, "p99_ms": None}
                return self._send_json(200, {"template": "default", "size": f.pool_size, "ready": f.pool_size,
                                             "starting": 0, "hits": 0, "misses": 0, "problems": [], "cpus": 1,
                                             "memory_mib": 256,
                                             "create_latency": {"hit": lat, "miss": dict(lat)},
                                             "pause_time": dict(lat),
                                             "pause_size": {"samples": 0, "p50_kib": None, "p99_kib": None}})
        if allowed is None:
            raise ApiError(404, "not_found", f"no route {path}")
        raise ApiError(405, "method_not_allowed", f"{method} not allowed on {path}")

    def _template_create(self) -> None:
        """POST /v1/templates, in serve_template.c's order of checks."""
        f = self.fake
        body = self._json_body()
        uid = self._peer_uid()
        unknown = set(body) - {"name", "from_sandbox", "warmup", "cpus", "memory_mib", "timeout_s", "network"}
        if unknown:
            raise ApiError(400, "bad_request", f"body: unknown field {sorted(unknown)[0]}")
        name = body.get("name")
        if not isinstance(name, str) or not _TEMPLATE_NAME_RE.match(name) or name == "default":
            raise ApiError(400, "bad_request",
                           "name: required, 1 to 63 of a-z 0-9 - _ . (a letter or digit first), not \"default\"")
        if ("warmup" in body) == ("from_sandbox" in body):
            raise ApiError(400, "bad_request", "from_sandbox (save one of your sandboxes) or warmup (a shell "
                                               "command run in a new one): one of the two")
        if "warmup" in body:
            return self._template_warmup(uid, name, body)
        for k in ("cpus", "memory_mib", "timeout_s", "network"):
            if k in body:
                raise ApiError(400, "bad_request", f"{k}: only with warmup (a template from a sandbox has that "
                                                   "sandbox's)")
        sid = body.get("from_sandbox")
        if not isinstance(sid, str):
            raise ApiError(400, "bad_request", "from_sandbox: required, the id of one of your sandboxes")
        with f.lock:
            sb = f.sandboxes.get(sid)
            # only the owner's own sandboxes (a token does not do): what is made is theirs
            if sb is None or sb.owner != uid:
                raise ApiError(404, "sandbox_not_found", f"no sandbox {sid}")
            if sb.state == "ended":
                raise ApiError(410, "sandbox_expired", f"sandbox {sid} has ended ({sb.end_reason})",
                               end_reason=sb.end_reason)
            if (uid, name) in f.templates:
                raise ApiError(409, "conflict", f"template \"{name}\" exists: DELETE /v1/templates/{name} first")
            mine = sum(1 for (u, _) in f.templates if u == uid)
            if mine >= f.template_quota:
                raise ApiError(429, "quota_exceeded", f"uid {uid} has {mine} templates (the limit)")
            why = ("paused already" if sb.paused else
                   "commands are running" if any(e.final is None for e in sb.execs.values()) else None)
            if why:
                raise ApiError(409, "conflict", f"sandbox {sid} cannot be saved as a template: {why}")
            root = tempfile.mkdtemp(prefix=f"template-{uid}-{name}-", dir=f.tmp)
            shutil.copytree(sb.root, root, symlinks=True, dirs_exist_ok=True)
            t = {"name": name, "created_at": _rfc3339(_now()), "from_sandbox": sb.id, "cpus": sb.cpus,
                 "memory_mib": sb.memory, "memory_kib": 1024, "network": bool(sb.network), **_template_figures()}
            f.templates[(uid, name)] = {"json": t, "root": root}
            sb.log.append({"time": _rfc3339(_now()), "event": "template", "name": name})
        self._send_json(201, t)

    def _template_warmup(self, uid: int, name: str, body: Dict[str, Any]) -> None:
        """POST /v1/templates {name, warmup}: the warm-up runs (a host
        subprocess, as execs here) in a new sandbox, saved if it exits 0."""
        f = self.fake
        w = body["warmup"]
        if not isinstance(w, str) or not 1 <= len(w.encode()) <= 16384:
            raise ApiError(400, "bad_request", "warmup: a shell command, a string of 1 to 16384 bytes")
        for k, lo, hi in (("cpus", 1, 8), ("memory_mib", 64, 16384), ("timeout_s", 1, f.max_timeout_s)):
            v = body.get(k)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi):
                raise ApiError(400, "bad_request", f"{k}: must be an integer in {lo}..{hi}")
        timeout = body.get("timeout_s", min(600, f.max_timeout_s))
        net = body.get("network")
        if net is not None and not (isinstance(net, dict) and isinstance(net.get("enabled", False), bool)):
            raise ApiError(400, "bad_request", "network: an object is expected")
        with f.lock:
            if (uid, name) in f.templates:
                raise ApiError(409, "conflict", f"template \"{name}\" exists: DELETE /v1/templates/{name} first")
            self._admit(uid, 1)
            sb = FakeSandbox(f, uid, {k: body[k] for k in ("cpus", "memory_mib") if k in body})
            f.sandboxes[sb.id] = sb
        env = dict(os.environ, HOME=sb.root + "/home/sandbox", TINYVMM_FAKE_ROOT=sb.root)
        try:
            p = subprocess.run(["/bin/sh", "-c", sb.rewrite(w)], cwd=sb.root + "/home/sandbox", env=env,
                               stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
            why = f"exited with {p.returncode}" if p.returncode else None
            err = p.stderr
        except subprocess.TimeoutExpired as e:
            why, err = f"timed out after {timeout} s", e.stderr or b""
        with f.lock:
            sb.end("killed")
            if why:
                raise ApiError(422, "warmup_failed", f"the warm-up {why}: " + err[-400:].decode("utf-8", "replace"))
            root = tempfile.mkdtemp(prefix=f"template-{uid}-{name}-", dir=f.tmp)
            shutil.copytree(sb.root, root, symlinks=True, dirs_exist_ok=True)
            t = {"name": name, "created_at": _rfc3339(_now()), "from_sandbox": sb.id, "cpus": sb.cpus,
                 "memory_mib": sb.memory, "memory_kib": 1024, "network": bool(net and net.get("enabled")), **_template_figures()}
            f.templates[(uid, name)] = {"json": t, "root": root}
        self._send_json(201, t)

    def _create(self) -> None:
        f = self.fake
        body = self._json_body()
        uid = self._peer_uid()
        tmpl = None
        name = body.get("template")
        if name is not None and not isinstance(name, str):
            raise ApiError(400, "bad_request", "template: a string (a name)")
        if name not in (None, "default"):
            with f.lock:
                tmpl = f.templates.get((uid, name))
            if tmpl is None:
                raise ApiError(400, "bad_request",
                               f"template: no template \"{name}\" (\"default\", or yours: GET /v1/templates)")
        def chk_int(name: str, lo: int, hi: int) -> None:
            if name in body:
                v = body[name]
                if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                    raise ApiError(400, "bad_request", f"{name}: must be an integer in {lo}..{hi}")
        chk_int("timeout_s", 1, f.max_timeout_s)
        chk_int("idle_timeout_s", 0, 1 << 31)
        chk_int("cpus", 1, 8)
        chk_int("memory_mib", 64, 16384)
        if tmpl is not None:  # the template's shape: left out or equal
            tj = tmpl["json"]
            for k in ("cpus", "memory_mib"):
                if k in body and body[k] != tj[k]:
                    raise ApiError(400, "bad_request", f"{k}: template \"{name}\" has {tj['cpus']} CPUs and "
                                                       f"{tj['memory_mib']} MiB: leave them out")
            body = {**body, "cpus": tj["cpus"], "memory_mib": tj["memory_mib"]}
        for k in ("envs", "secret_envs", "metadata"):
            v = body.get(k)
            if v is not None and (not isinstance(v, dict) or not all(isinstance(x, str) for x in v.values())):
                raise ApiError(400, "bad_request", f"{k}: must be an object of strings")
        if len(body.get("metadata") or {}) > 32:
            raise ApiError(400, "bad_request", "metadata: at most 32 keys")
        net = isinstance(body.get("network"), dict) and bool(body["network"].get("enabled"))
        if tmpl is not None and net != tmpl["json"]["network"]:
            raise ApiError(400, "bad_request", f"network: template \"{name}\" " + (
                "has a network device: network.enabled true is required" if tmpl["json"]["network"]
                else "has no network device (a networked sandbox or warm-up makes one that has)"))
        if f.capacity_full:
            raise ApiError(503, "capacity", "no capacity left; retry later")
        with f.lock:
            mine = [s for s in f.sandboxes.values() if s.owner == uid and s.state == "running"]
            if len(mine) >= f.quota:
                raise ApiError(429, "quota_exceeded", f"at most {f.quota} sandboxes per owner")
            sb = FakeSandbox(f, uid, body, files_from=tmpl["root"] if tmpl is not None else None)
            f.sandboxes[sb.id] = sb
        self._send_json(201, {**sb.json(), "access_token": sb.token})

    def _list(self) -> None:
        f = self.fake
        uid = self._peer_uid()
        state = None
        meta = []
        for k, v in self.query:
            if k == "state":
                if v not in ("running", "paused", "ended"):
                    raise ApiError(400, "bad_request", "state: running, paused or ended")
                state = v
            elif k.startswith("metadata."):
                meta.append((k[len("metadata."):], v))
        with f.lock:
            out = [s.json() for s in f.sandboxes.values()
                   if s.owner == uid and (state is None or s.state == state)
                   and all(s.metadata.get(k) == v for k, v in meta)]
        self._send_json(200, {"sandboxes": out})

    def _admit(self, owner: int, n: int) -> None:
        """As a create: 503 without capacity, 429 past the owner's limit (n more)."""
        f = self.fake
        if f.capacity_full:
            raise ApiError(503, "capacity", "no capacity left; retry later")
        mine = [s for s in f.sandboxes.values() if s.owner == owner and s.state == "running"]
        if len(mine) + n > f.quota:
            raise ApiError(429, "quota_exceeded", f"at most {f.quota} sandboxes per owner")

    def _pause_resume(self, sb: FakeSandbox, pause: bool) -> None:
        f = self.fake
        with f.lock:
            if pause:
                if sb.paused:
                    raise ApiError(409, "conflict", f"sandbox {sb.id} cannot be paused: paused already")
                if any(e.final is None for e in sb.execs.values()):
                    raise ApiError(409, "conflict", f"sandbox {sb.id} cannot be paused: commands are running")
                sb.paused = True
                sb.log.append({"time": _rfc3339(_now()), "event": "paused"})
            else:
                if not sb.paused:
                    raise ApiError(409, "conflict", f"sandbox {sb.id} is not paused")
                self._admit(sb.owner, 1)
                sb.paused = False
                sb.expires = _now() + sb.timeout_s  # a new lifetime from now
                sb.last_activity = _now()
                sb.log.append({"time": _rfc3339(_now()), "event": "resumed"})
        self._send_json(200, sb.json())

    def _fork(self, sb: FakeSandbox) -> None:
        f = self.fake
        body = self._json_body()
        # the owner's, not a token holder's: checked first, as the daemon
        if self._peer_uid() != sb.owner:
            raise ApiError(403, "forbidden", f"only the owner of sandbox {sb.id} may fork it "
                                             "(its token grants that sandbox alone)")
        unknown = set(body) - {"count", "timeout_s"}
        if unknown:
            raise ApiError(400, "bad_request", f"body: unknown field {sorted(unknown)[0]}")
        count = body.get("count", 1)
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 8:
            raise ApiError(400, "bad_request", "count: must be an integer in 1..8")
        t = body.get("timeout_s", sb.timeout_s)
        if not isinstance(t, int) or isinstance(t, bool) or not 1 <= t <= f.max_timeout_s:
            raise ApiError(400, "bad_request", f"timeout_s: must be an integer in 1..{f.max_timeout_s}")
        with f.lock:
            if any(e.final is None for e in sb.execs.values()):
                raise ApiError(409, "conflict", f"sandbox {sb.id} cannot be forked: commands are running")
            self._admit(sb.owner, count)
            kids = []
            for _ in range(count):
                kid = FakeSandbox(f, sb.owner, {"template": sb.template, "timeout_s": t,
                                                "idle_timeout_s": sb.idle, "cpus": sb.cpus,
                                                "memory_mib": sb.memory, "metadata": sb.metadata,
                                                "envs": sb.envs, "secret_envs": sb.secret_envs}, parent=sb)
                f.sandboxes[kid.id] = kid
                kids.append(kid)
            sb.log.append({"time": _rfc3339(_now()), "event": "forked", "count": count})
        self._send_json(201, {"sandboxes": [{**k.json(), "access_token": k.token} for k in kids]})

    def _lookup(self, sid: str) -> FakeSandbox:
        f = self.fake
        with f.lock:
            sb = f.sandboxes.get(sid)
        auth = self.headers.get("Authorization") or ""
        if sb is not None:
            if auth.startswith("Bearer "):
                if secrets.compare_digest(auth[7:].strip(), sb.token):
                    return sb
            elif sb.owner == self._peer_uid():
                return sb
        raise ApiError(404, "sandbox_not_found", f"no sandbox {sid}")

    def _sandbox_route(self, method: str, sid: str, rest: List[str]) -> None:
        f = self.fake
        sb = self._lookup(sid)
        sb.last_activity = _now()
        if not rest:
            if method == "GET":
                return self._send_json(200, sb.json())
            if method == "DELETE":
                sb.end("killed")
                return self._send_json(204, None)
            raise ApiError(405, "method_not_allowed", f"{method} not allowed")
        if sb.state == "ended" and not (rest == ["logs"] and method == "GET"):
            raise ApiError(410, "sandbox_expired", f"sandbox {sid} has ended ({sb.end_reason})",
                           end_reason=sb.end_reason)
        if rest in (["pause"], ["resume"]) and method == "POST":
            return self._pause_resume(sb, rest[0] == "pause")
        if sb.paused and not (rest == ["logs"] and method == "GET"):
            raise ApiError(409, "conflict", f"sandbox {sid} is paused: POST /v1/sandboxes/{sid}/resume first")
        if rest == ["fork"] and method == "POST":
            return self._fork(sb)
        if rest == ["timeout"]:
            if method != "POST":
                raise ApiError(405, "method_not_allowed", f"{method} not allowed")
            body = self._json_body()
            t = body.get("timeout_s")
            if not isinstance(t, int) or isinstance(t, bool) or not 1 <= t:
                raise ApiError(400, "bad_request", "timeout_s: must be a positive integer")
            sb.expires = _now() + min(t, f.max_timeout_s)
            return self._send_json(200, {"expires_at": _rfc3339(sb.expires)})
        if rest == ["logs"]:
            self._start_chunked("application/x-ndjson")
            for rec in sb.log:
                self._chunk(json.dumps(rec).encode() + b"\n")
            return self._end_chunks()
        if rest == ["execs"]:
            if method != "POST":
                raise ApiError(405, "method_not_allowed", f"{method} not allowed")
            return self._exec(sb)
        if rest[0] == "execs" and len(rest) >= 2:
            ex = sb.execs.get(rest[1])
            if ex is None:
                raise ApiError(404, "exec_not_found", f"no exec {rest[1]}")
            if len(rest) == 2 and method == "GET":
                return self._send_json(200, {"exec_id": ex.id, "state": ex.state,
                                             "result": ex.result, "error": ex.error})
            if rest[2:] == ["events"] and method == "GET":
                try:
                    since = int(self.q("since") or 0)
                except ValueError:
                    raise ApiError(400, "bad_request", "since: must be an integer")
                return self._stream(ex, since)
            if rest[2:] in (["stdin"], ["signal"]) and method == "POST":
                if sb.state == "ended":
                    raise ApiError(410, "sandbox_expired", "sandbox ended", end_reason=sb.end_reason)
                if not f.support_stdin_signal:
                    list(self._body_chunks())
                    raise ApiError(501, "not_implemented", f"{rest[2]} of an exec is not implemented")
                if ex.final is not None or ex.proc is None:
                    list(self._body_chunks())
                    raise ApiError(409, "conflict", "the exec has ended")
                if rest[2] == "signal":
                    body = self._json_body()
                    s = body.get("signal")
                    if not isinstance(s, int) or not 1 <= s <= 64:
                        raise ApiError(400, "bad_request", "signal: must be a signal number")
                    try:
                        os.killpg(ex.proc.pid, s)
                    except OSError:
                        pass
                    return self._send_json(200, {})
                data = b"".join(self._body_chunks())
                try:
                    if data:
                        ex.proc.stdin.write(data)
                        ex.proc.stdin.flush()
                    if self.q("eof") in ("1", "true"):
                        ex.proc.stdin.close()
                except (OSError, ValueError):
                    raise ApiError(409, "conflict", "stdin is closed")
                return self._send_json(200, {})
            raise ApiError(405, "method_not_allowed", f"{method} not allowed")
        if rest == ["files"]:
            p = self.q("path")
            if not p:
                raise ApiError(400, "bad_request", "path: required")
            hp = sb.gpath(p)
            if method == "PUT":
                mode = self.q("mode") or "0644"
                try:
                    m = int(mode, 8)
                except ValueError:
                    raise ApiError(400, "bad_request", "mode: octal permission bits")
                os.makedirs(os.path.dirname(hp), exist_ok=True)
                if os.path.isdir(hp):
                    list(self._body_chunks())
                    raise ApiError(502, "guest_error", "is a directory")
                n = 0
                with open(hp, "wb") as out:
                    for b in self._body_chunks():
                        out.write(b)
                        n += len(b)
                os.chmod(hp, m)
                f.uploads.append({"path": p, "size": n, "chunked":
                                  "chunked" in (self.headers.get("Transfer-Encoding") or "").lower()})
                return self._send_json(201, {"path": p, "size": n})
            if method == "GET":
                if not os.path.isfile(hp):
                    raise ApiError(502, "guest_error", "no such file")
                with open(hp, "rb") as fh:
                    self._start_chunked("application/octet-stream")
                    while True:
                        b = fh.read(65536)
                        if not b:
                            break
                        self._chunk(b)
                return self._end_chunks()
            if method == "DELETE":
                if os.path.isdir(hp) and not os.path.islink(hp):
                    raise ApiError(502, "guest_error", "is a directory")
                try:
                    os.unlink(hp)
                except FileNotFoundError:
                    raise ApiError(502, "guest_error", "no such file")
                return self._send_json(204, None)
            raise ApiError(405, "method_not_allowed", f"{method} not allowed")
        if rest == ["fs", "list"] and method == "GET":
            p = self.q("path") or "/"
            hp = sb.gpath(p)
            if not os.path.isdir(hp):
                raise ApiError(502, "guest_error", "no such file or not a directory")
            entries = []
            for name in sorted(os.listdir(hp)):
                st = os.lstat(os.path.join(hp, name))
                import stat as _st
                t = ("symlink" if _st.S_ISLNK(st.st_mode) else "dir" if _st.S_ISDIR(st.st_mode)
                     else "file" if _st.S_ISREG(st.st_mode) else "other")
                entries.append({"name": name, "type": t, "size": st.st_size,
                                "mode": _st.S_IMODE(st.st_mode)})  # an integer, as openapi.json says
            return self._send_json(200, {"path": p, "entries": entries})
        raise ApiError(404, "not_found", "no such route")

    def _exec(self, sb: FakeSandbox) -> None:
        body = self._json_body()
        if ("cmd" in body) == ("shell" in body):
            raise ApiError(400, "bad_request", "cmd or shell: exactly one is required")
        if "cmd" in body and (not isinstance(body["cmd"], list) or not body["cmd"]
                              or not all(isinstance(a, str) for a in body["cmd"])):
            raise ApiError(400, "bad_request", "cmd: must be a non-empty array of strings")
        if "shell" in body and not isinstance(body["shell"], str):
            raise ApiError(400, "bad_request", "shell: must be a string")
        if body.get("user") not in (None, "sandbox", "root"):
            raise ApiError(400, "bad_request", "user: sandbox or root")
        for name, lo, hi in (("timeout_s", 0, 1 << 31), ("max_output_bytes", 0, 64 << 20),
                             ("memory_mib", 1, 1 << 20), ("pids_max", 1, 1 << 22)):
            v = body.get(name)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi):
                raise ApiError(400, "bad_request", f"{name}: must be an integer in {lo}..{hi}")
        bg = bool(body.get("background"))
        if body.get("stdin") is not None and not isinstance(body.get("stdin"), bool):
            raise ApiError(400, "bad_request", "stdin: true or false is expected")
        if body.get("stdin") and body.get("stdin_b64"):
            raise ApiError(400, "bad_request", "stdin: true not with stdin_b64")
        # as the daemon: stdin stays open only when asked ("stdin": true)
        keep_open = bool(body.get("stdin"))
        ex = self.fake.start_exec(sb, body, keep_open)
        if bg:
            return self._send_json(201, {"exec_id": ex.id})
        accept = self.headers.get("Accept") or "application/json"
        if "application/x-ndjson" in accept:
            return self._stream(ex, 0)
        with ex.cond:
            while ex.final is None:
                ex.cond.wait(1.0)
        if ex.result is not None:
            return self._send_json(200, ex.result)
        raise ApiError(410, "sandbox_expired", ex.error["message"], end_reason=sb.end_reason)

    def _stream(self, ex: Exec, since: int) -> None:
        self._start_chunked("application/x-ndjson")
        i = 0
        last = time.monotonic()
        while True:
            with ex.cond:
                while i >= len(ex.events) and ex.final is None:
                    if not ex.cond.wait(min(0.5, self.fake.keepalive_s)):
                        break
                batch = ex.events[i:]
                i = len(ex.events)
                final = ex.final if i >= len(ex.events) else None
            for ev in batch:
                if ev["type"] in ("stdout", "stderr"):
                    end = ev["offset"] + len(base64.b64decode(ev["data"]))
                    if end <= since:
                        continue
                self._chunk(json.dumps(ev).encode() + b"\n")
                last = time.monotonic()
            if final is not None:
                self._chunk(json.dumps(final).encode() + b"\n")
                return self._end_chunks()
            if time.monotonic() - last >= self.fake.keepalive_s:
                self._chunk(b'{"type":"keepalive"}\n')
                last = time.monotonic()


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else None
    d = FakeDaemon(path).start()
    print(f"TEST DOUBLE of tinyvmm serve listening on {d.socket_path}", flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: done.set())
    signal.signal(signal.SIGINT, lambda *a: done.set())
    done.wait()
    d.stop()
    if path and os.path.exists(path):
        os.unlink(path)


if __name__ == "__main__":
    main()
