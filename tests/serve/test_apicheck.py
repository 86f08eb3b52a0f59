"""Unit tests of apicheck.py and of the OpenAPI document itself (no daemon,
no VM). Each good sample must pass; each mutation of it must fail."""
import copy
import json
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import apicheck  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
DOC = os.path.join(ROOT, "vmm", "serve", "openapi.json")

SBX = "sbx_" + "0123456789abcdef" * 2
EID = "ex_0123456789abcdef"
TOKEN = "f" * 32

SANDBOX = {
    "id": SBX, "state": "running", "template": "default",
    "created_at": "2026-12-01T21:00:00Z", "expires_at": "2026-12-01T21:05:00Z",
    "ended_at": None, "end_reason": None, "cpus": 1, "memory_mib": 256,
    "idle_timeout_s": 0, "from_pool": False, "forked_from": None, "network": None, "metadata": {"k": "v"},
}
CREATED = dict(SANDBOX, access_token=TOKEN)
RESULT = {
    "exec_id": EID, "exit_code": 0, "signal": 0, "timed_out": False,
    "stdout": "hi\n", "stderr": "", "stdout_truncated": False,
    "stderr_truncated": False, "oom_killed": False, "pids_limited": False, "wall_ms": 12, "cpu_ms": 3, "max_rss_kib": 1234,
}
EXIT = {k: v for k, v in RESULT.items() if k not in ("stdout", "stderr")}
EXIT["type"] = "exit"


def mutated(obj, path, value=KeyError):
    """A deep copy of obj with path (list of keys) set to value, or deleted
    when value is KeyError."""
    o = copy.deepcopy(obj)
    node = o
    for k in path[:-1]:
        node = node[k]
    if value is KeyError:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return o


class DocumentTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        with open(DOC, encoding="utf-8") as f:
            cls.raw = json.load(f)
        cls.api = apicheck.ApiCheck(cls.raw)

    def test_openapi_version_and_refs_resolve(self):
        self.assertEqual(self.raw["openapi"], "3.0.3")
        refs = []

        def walk(n):
            if isinstance(n, dict):
                if "$ref" in n:
                    refs.append(n["$ref"])
                for v in n.values():
                    walk(v)
            elif isinstance(n, list):
                for v in n:
                    walk(v)
        walk(self.raw)
        self.assertTrue(refs)
        for r in refs:
            apicheck._resolve(self.raw, r)  # raises KeyError when dangling

    def test_every_route_of_api_md(self):
        want = {
            ("get", "/v1/health"), ("get", "/v1/version"), ("post", "/v1/sandboxes"),
            ("get", "/v1/sandboxes"), ("get", "/v1/sandboxes/{id}"), ("delete", "/v1/sandboxes/{id}"),
            ("post", "/v1/sandboxes/{id}/timeout"), ("post", "/v1/sandboxes/{id}/execs"),
            ("get", "/v1/sandboxes/{id}/execs/{eid}"), ("get", "/v1/sandboxes/{id}/execs/{eid}/events"),
            ("post", "/v1/sandboxes/{id}/execs/{eid}/stdin"), ("post", "/v1/sandboxes/{id}/execs/{eid}/signal"),
            ("put", "/v1/sandboxes/{id}/files"), ("get", "/v1/sandboxes/{id}/files"),
            ("delete", "/v1/sandboxes/{id}/files"), ("get", "/v1/sandboxes/{id}/fs/list"),
            ("get", "/v1/sandboxes/{id}/logs"), ("get", "/v1/templates/{name}/pool"),
            ("put", "/v1/templates/{name}/pool"), ("post", "/v1/sandboxes/{id}/pause"),
            ("post", "/v1/sandboxes/{id}/resume"), ("post", "/v1/sandboxes/{id}/fork"),
            ("get", "/v1/templates"), ("post", "/v1/templates"), ("get", "/v1/templates/{name}"),
            ("delete", "/v1/templates/{name}"),
        }
        have = {(m, p) for p, item in self.raw["paths"].items() for m in item if m != "parameters"}
        self.assertEqual(have, want)

    def test_objects_written_by_the_daemon_are_closed(self):
        schemas = self.raw["components"]["schemas"]
        for name, s in schemas.items():
            if s.get("type") == "object" and "properties" in s:
                self.assertIs(s.get("additionalProperties"), False, name)
        self.assertIn("ExecEvent", schemas)

    def test_every_error_status_has_an_error_body(self):
        for p, item in self.raw["paths"].items():
            for m, op in item.items():
                if m == "parameters":
                    continue
                for st, r in op["responses"].items():
                    if int(st) >= 400:
                        sch = r["content"]["application/json"]["schema"]["$ref"]
                        self.assertIn(sch.rsplit("/", 1)[1], ("Error", "SandboxExpiredError"), (m, p, st))
                    if st == "503":
                        self.assertTrue(r["headers"]["Retry-After"]["required"])


class ValidatorTest(unittest.TestCase):
    """The schema subset on its own."""

    def v(self, schema, inst):
        return apicheck.validate(schema, inst, {"components": {"schemas": {
            "S": {"type": "string"}}}})

    def test_types(self):
        self.assertEqual(self.v({"type": "integer"}, 3), [])
        self.assertTrue(self.v({"type": "integer"}, True))
        self.assertTrue(self.v({"type": "integer"}, 3.0))
        self.assertTrue(self.v({"type": "integer"}, "3"))
        self.assertEqual(self.v({"type": "number"}, 3.5), [])
        self.assertTrue(self.v({"type": "boolean"}, 0))
        self.assertTrue(self.v({"type": "string"}, None))
        self.assertEqual(self.v({"type": "string", "nullable": True}, None), [])
        self.assertTrue(self.v({"type": "array"}, {}))
        self.assertTrue(self.v({"type": "object"}, []))

    def test_keywords(self):
        self.assertTrue(self.v({"enum": ["a"]}, "b"))
        self.assertTrue(self.v({"type": "integer", "minimum": 1}, 0))
        self.assertTrue(self.v({"type": "integer", "maximum": 1}, 2))
        self.assertTrue(self.v({"type": "string", "pattern": "^a+$"}, "ab"))
        self.assertTrue(self.v({"type": "string", "minLength": 1}, ""))
        self.assertTrue(self.v({"type": "array", "items": {"type": "string"}}, ["a", 1]))
        self.assertTrue(self.v({"type": "array", "minItems": 1}, []))
        self.assertTrue(self.v({"type": "object", "maxProperties": 1}, {"a": 1, "b": 2}))
        self.assertTrue(self.v({"type": "object", "required": ["a"]}, {}))
        self.assertTrue(self.v({"type": "object", "properties": {}, "additionalProperties": False}, {"x": 1}))
        self.assertTrue(self.v({"type": "object", "additionalProperties": {"type": "string"}}, {"x": 1}))
        self.assertEqual(self.v({"$ref": "#/components/schemas/S"}, "x"), [])
        self.assertTrue(self.v({"$ref": "#/components/schemas/S"}, 1))
        self.assertTrue(self.v({"type": "string", "format": "date-time"}, "2026-13-01T00:00:00Z"))
        self.assertTrue(self.v({"type": "string", "format": "date-time"}, "yesterday"))
        self.assertEqual(self.v({"type": "string", "format": "date-time"}, "2026-12-01T00:00:00.5+01:00"), [])

    def test_one_of_needs_exactly_one(self):
        s = {"type": "object", "oneOf": [{"required": ["a"]}, {"required": ["b"]}]}
        self.assertEqual(self.v(s, {"a": 1}), [])
        self.assertTrue(self.v(s, {}))
        self.assertTrue(self.v(s, {"a": 1, "b": 2}))
        n = {"nullable": True, "oneOf": [{"$ref": "#/components/schemas/S"}]}
        self.assertEqual(self.v(n, None), [])
        self.assertTrue(self.v(n, 5))


class CheckTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.api = apicheck.load(DOC)

    def ok(self, errs):
        self.assertEqual(errs, [])

    def bad(self, errs):
        self.assertTrue(errs, "expected a failure")

    def resp(self, method, target, status, body, ct="application/json", headers=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        return self.api.check_response(method, target, status, body, ct, headers)

    def test_match_templates(self):
        tmpl, op, _, params = self.api.match("GET", "/v1/sandboxes/%s/execs/%s" % (SBX, EID))
        self.assertEqual(tmpl, "/v1/sandboxes/{id}/execs/{eid}")
        self.assertEqual(params, {"id": SBX, "eid": EID})
        tmpl, *_ = self.api.match("GET", "/v1/sandboxes/%s/execs/%s/events?since=5" % (SBX, EID))
        self.assertEqual(tmpl, "/v1/sandboxes/{id}/execs/{eid}/events")
        tmpl, *_ = self.api.match("GET", "/v1/sandboxes/%s/fs/list?path=/" % SBX)
        self.assertEqual(tmpl, "/v1/sandboxes/{id}/fs/list")
        self.assertEqual(self.api.match("GET", "/v1/sandboxes")[0], "/v1/sandboxes")

    def test_methods_of_a_path(self):
        # what a 405's Allow must list
        self.assertEqual(self.api.methods_of("/v1/health"), {"GET"})
        self.assertEqual(self.api.methods_of("/v1/sandboxes?state=running"), {"GET", "POST"})
        self.assertEqual(self.api.methods_of("/v1/sandboxes/%s/files?path=/x" % SBX), {"GET", "PUT", "DELETE"})
        self.assertEqual(self.api.methods_of("/v1/nothing"), set())

    def test_unknown_route_or_method_fails(self):
        self.bad(self.resp("GET", "/v1/nothing", 200, {}))
        self.bad(self.resp("PATCH", "/v1/health", 200, {"status": "ok", "sandboxes": 0}))
        self.bad(self.resp("GET", "/v1/sandboxes/%s/execs" % SBX, 200, {}))
        self.bad(self.api.check_request("GET", "/v2/health"))
        self.bad(self.api.check_request("GET", "/v1/sandboxes//logs"))

    def test_undocumented_status_fails(self):
        self.bad(self.resp("GET", "/v1/health", 201, {"status": "ok", "sandboxes": 0}))
        self.bad(self.resp("GET", "/v1/health", 404, {"code": 404, "error": "not_found", "message": "x"}))
        self.bad(self.resp("POST", "/v1/sandboxes", 200, CREATED))

    def test_health_version(self):
        self.ok(self.resp("GET", "/v1/health", 200, {"status": "ok", "sandboxes": 2, "problems": []}))
        self.ok(self.resp("GET", "/v1/health", 200, {"status": "degraded", "sandboxes": 0,
                                                     "problems": ["/dev/kvm: No such file or directory"]}))
        self.bad(self.resp("GET", "/v1/health", 200, {"status": "ok", "sandboxes": 2}))
        self.bad(self.resp("GET", "/v1/health", 200, {"status": "sick", "sandboxes": 0, "problems": []}))
        self.bad(self.resp("GET", "/v1/health", 200, {"status": "ok", "sandboxes": 0, "problems": [1]}))
        self.bad(self.resp("GET", "/v1/health", 200, {"status": "ok", "sandboxes": -1, "problems": []}))
        self.bad(self.resp("GET", "/v1/health", 200, {"status": "ok"}))
        self.bad(self.resp("GET", "/v1/health", 200, {"status": "ok", "sandboxes": 1, "x": 1}))
        self.bad(self.resp("GET", "/v1/health", 200, "not json"))
        self.bad(self.resp("GET", "/v1/health", 200, {"status": "ok", "sandboxes": 1}, ct="text/plain"))
        self.ok(self.resp("GET", "/v1/version", 200, {"version": "0.3.0", "api": "v1"}))
        self.bad(self.resp("GET", "/v1/version", 200, {"version": "0.3", "api": "v1"}))
        self.bad(self.resp("GET", "/v1/version", 200, {"version": "0.3.0", "api": "v2"}))

    def test_create(self):
        self.ok(self.api.check_request("POST", "/v1/sandboxes", json.dumps({})))
        self.ok(self.api.check_request("POST", "/v1/sandboxes", None))
        full = {"template": "default", "timeout_s": 300, "idle_timeout_s": 0, "cpus": 1,
                "memory_mib": 256, "envs": {"A": "1"}, "secret_envs": {"S": "x"},
                "metadata": {"k": "v"}, "network": {"enabled": False, "allow_out": [], "dns": []}}
        self.ok(self.api.check_request("POST", "/v1/sandboxes", json.dumps(full)))
        for path, val in ((["timeout_s"], "ten"), (["timeout_s"], 0), (["cpus"], 9),
                          (["memory_mib"], 32), (["envs", "A"], 1), (["network", "enabled"], "yes"),
                          (["surprise"], 1), (["metadata"], {str(i): "v" for i in range(33)})):
            self.bad(self.api.check_request("POST", "/v1/sandboxes", json.dumps(mutated(full, path, val))))
        self.bad(self.api.check_request("POST", "/v1/sandboxes", "{not json"))
        self.bad(self.api.check_request("POST", "/v1/sandboxes", "{}", "text/plain"))
        self.ok(self.resp("POST", "/v1/sandboxes", 201, CREATED))
        self.bad(self.resp("POST", "/v1/sandboxes", 201, SANDBOX))  # no token
        self.bad(self.resp("POST", "/v1/sandboxes", 201, mutated(CREATED, ["access_token"], "F" * 32)))
        self.bad(self.resp("POST", "/v1/sandboxes", 201, mutated(CREATED, ["id"], "sbx_123")))
        self.bad(self.resp("POST", "/v1/sandboxes", 201, mutated(CREATED, ["secret_envs"], {})))

    def test_sandbox_objects(self):
        tgt = "/v1/sandboxes/" + SBX
        self.ok(self.resp("GET", tgt, 200, SANDBOX))
        ended = dict(SANDBOX, state="ended", ended_at="2026-12-01T21:05:00Z", end_reason="expired")
        self.ok(self.resp("GET", tgt, 200, ended))
        self.bad(self.resp("GET", tgt, 200, CREATED))  # a GET never carries the token
        self.bad(self.resp("GET", tgt, 200, mutated(SANDBOX, ["state"], "starting")))
        self.bad(self.resp("GET", tgt, 200, mutated(ended, ["end_reason"], "bored")))
        self.bad(self.resp("GET", tgt, 200, mutated(SANDBOX, ["ended_at"])))
        self.bad(self.resp("GET", tgt, 200, mutated(SANDBOX, ["created_at"], "now")))
        self.bad(self.resp("GET", tgt, 200, mutated(SANDBOX, ["metadata", "k"], 5)))
        self.ok(self.resp("GET", "/v1/sandboxes?state=running&metadata.suite=x", 200,
                          {"sandboxes": [SANDBOX, ended]}))
        self.bad(self.resp("GET", "/v1/sandboxes", 200, {"sandboxes": [CREATED]}))
        self.bad(self.resp("GET", "/v1/sandboxes", 200, [SANDBOX]))
        self.ok(self.api.check_request("GET", "/v1/sandboxes?state=ended&metadata.a=b&metadata.c="))
        self.bad(self.api.check_request("GET", "/v1/sandboxes?state=gone"))
        self.bad(self.api.check_request("GET", "/v1/sandboxes?owner=1"))
        self.bad(self.api.check_request("GET", "/v1/sandboxes/sbx_short"))
        self.ok(self.resp("DELETE", tgt, 204, b"", ct=None))
        self.bad(self.resp("DELETE", tgt, 204, b"{}", ct="application/json"))
        self.ok(self.api.check_request("POST", tgt + "/timeout", json.dumps({"timeout_s": 60})))
        self.bad(self.api.check_request("POST", tgt + "/timeout", json.dumps({"timeout_s": "60"})))
        self.bad(self.api.check_request("POST", tgt + "/timeout", None))
        self.ok(self.resp("POST", tgt + "/timeout", 200, {"expires_at": "2026-12-01T21:05:00Z"}))

    def test_errors(self):
        tgt = "/v1/sandboxes/" + SBX
        e404 = {"code": 404, "error": "sandbox_not_found", "message": "no sandbox"}
        self.ok(self.resp("GET", tgt, 404, e404))
        self.bad(self.resp("GET", tgt, 404, mutated(e404, ["code"], 400)))
        self.bad(self.resp("GET", tgt, 404, mutated(e404, ["error"], "bad_request")))
        self.bad(self.resp("GET", tgt, 404, mutated(e404, ["error"], "nope")))
        self.bad(self.resp("GET", tgt, 404, mutated(e404, ["message"])))
        self.bad(self.resp("GET", tgt, 404, dict(e404, detail="x")))
        e410 = {"code": 410, "error": "sandbox_expired", "message": "ended", "end_reason": "idle"}
        self.ok(self.resp("POST", tgt + "/execs", 410, e410))
        self.bad(self.resp("POST", tgt + "/execs", 410, mutated(e410, ["end_reason"])))
        self.bad(self.resp("POST", tgt + "/execs", 410, mutated(e410, ["end_reason"], None)))
        self.bad(self.resp("GET", tgt, 410, e410))  # GET of an ended sandbox is a 200
        e503 = {"code": 503, "error": "capacity", "message": "full"}
        self.ok(self.resp("POST", "/v1/sandboxes", 503, e503, headers={"Retry-After": "5"}))
        self.bad(self.resp("POST", "/v1/sandboxes", 503, e503, headers={"Content-Type": "application/json"}))
        self.bad(self.resp("POST", "/v1/sandboxes", 503, e503, headers={"Retry-After": "soon"}))
        self.ok(self.resp("POST", "/v1/sandboxes", 429,
                          {"code": 429, "error": "quota_exceeded", "message": "4 running"}))
        # outside the routes
        self.ok(self.api.check_error(405, json.dumps({"code": 405, "error": "method_not_allowed", "message": "x"})))
        self.bad(self.api.check_error(405, json.dumps({"code": 404, "error": "method_not_allowed", "message": "x"})))
        self.bad(self.api.check_error(400, "<html>bad</html>"))
        hl = json.dumps({"code": 431, "error": "bad_request", "message": "head too large"})
        self.ok(self.api.check_error(431, hl, http_level=True))
        self.bad(self.api.check_error(431, hl))

    def test_exec_request(self):
        tgt = "/v1/sandboxes/%s/execs" % SBX
        good = {"cmd": ["echo", "hi"], "envs": {"A": "b"}, "cwd": "/tmp", "user": "root",
                "timeout_s": 0, "stdin_b64": "aGk=", "max_output_bytes": 1048576, "background": False}
        self.ok(self.api.check_request("POST", tgt, json.dumps(good)))
        self.ok(self.api.check_request("POST", tgt, json.dumps({"shell": "echo hi"})))
        self.bad(self.api.check_request("POST", tgt, json.dumps({})))
        self.bad(self.api.check_request("POST", tgt, json.dumps({"cmd": ["a"], "shell": "b"})))
        self.bad(self.api.check_request("POST", tgt, json.dumps({"cmd": "echo hi"})))
        self.bad(self.api.check_request("POST", tgt, json.dumps({"cmd": []})))
        self.bad(self.api.check_request("POST", tgt, json.dumps(dict(good, user="admin"))))
        self.bad(self.api.check_request("POST", tgt, json.dumps(dict(good, stdin_b64="not base64!"))))
        self.bad(self.api.check_request("POST", tgt, json.dumps(dict(good, max_output_bytes=2 ** 27))))
        self.bad(self.api.check_request("POST", tgt, json.dumps(dict(good, timeout_s=-1))))

    def test_exec_responses(self):
        tgt = "/v1/sandboxes/%s/execs" % SBX
        self.ok(self.resp("POST", tgt, 200, RESULT))
        self.ok(self.resp("POST", tgt, 200, dict(RESULT, exit_code=3, timed_out=True, signal=9)))
        for path, val in ((["exit_code"], KeyError), (["stdout"], None), (["timed_out"], "no"),
                          (["exec_id"], "ex_1"), (["wall_ms"], -1), (["host_timed_out"], False)):
            self.bad(self.resp("POST", tgt, 200, mutated(RESULT, path, val)))
        self.ok(self.resp("POST", tgt, 201, {"exec_id": EID}))
        self.bad(self.resp("POST", tgt, 201, {"exec_id": EID, "pid": 3}))
        e502 = {"code": 502, "error": "guest_error", "message": "no such file"}
        self.ok(self.resp("POST", tgt, 502, e502))
        st = "%s/%s" % (tgt, EID)
        self.ok(self.resp("GET", st, 200, {"exec_id": EID, "state": "running", "result": None, "error": None}))
        self.ok(self.resp("GET", st, 200, {"exec_id": EID, "state": "exited", "result": RESULT, "error": None}))
        self.ok(self.resp("GET", st, 200, {"exec_id": EID, "state": "failed", "result": None,
                                           "error": {"error": "sandbox_ended", "message": "x"}}))
        self.bad(self.resp("GET", st, 200, {"exec_id": EID, "state": "done", "result": None, "error": None}))
        self.bad(self.resp("GET", st, 200, {"exec_id": EID, "state": "exited", "result": {"exit_code": 0},
                                            "error": None}))
        self.bad(self.resp("GET", st, 200, {"exec_id": EID, "state": "running", "result": None}))
        self.ok(self.resp("GET", st, 404, {"code": 404, "error": "exec_not_found", "message": "x"}))

    def test_events(self):
        tgt = "/v1/sandboxes/%s/execs" % SBX
        lines = [{"type": "start", "exec_id": EID},
                 {"type": "stdout", "offset": 0, "data": "aGkK"},
                 {"type": "stderr", "offset": 3, "data": ""},
                 {"type": "keepalive"}, EXIT]
        body = "".join(json.dumps(x) + "\n" for x in lines)
        self.ok(self.resp("POST", tgt, 200, body, ct="application/x-ndjson"))
        self.ok(self.resp("GET", "%s/%s/events?since=3" % (tgt, EID), 200, body, ct="application/x-ndjson"))
        self.ok(self.resp("GET", "%s/%s/events?since=0" % (tgt, EID), 200,
                          json.dumps({"type": "error", "error": "sandbox_ended", "message": "x"}) + "\n",
                          ct="application/x-ndjson"))
        self.bad(self.api.check_request("GET", "%s/%s/events?since=-1" % (tgt, EID)))
        self.bad(self.api.check_request("GET", "%s/%s/events?since=abc" % (tgt, EID)))
        self.bad(self.api.check_request("GET", "%s/%s/events?from=1" % (tgt, EID)))
        schema = self.api.line_schema("POST", tgt, 200, "application/x-ndjson")
        self.assertEqual(schema, {"$ref": "#/components/schemas/ExecEvent"})
        for ev in ({"type": "start", "exec_id": EID, "pid": 1}, {"type": "stdout", "offset": 0},
                   {"type": "stdout", "offset": -1, "data": ""}, {"type": "stdout", "offset": 0, "data": "%%"},
                   {"type": "exit"}, dict(EXIT, stdout=""), {"type": "error", "error": "x"},
                   {"type": "bell"}, {"type": "keepalive", "at": 1}, []):
            self.bad(self.api.check_line(schema, json.dumps(ev)))
            self.bad(self.resp("POST", tgt, 200, body + json.dumps(ev) + "\n", ct="application/x-ndjson"))
        self.bad(self.api.check_line(schema, "{truncated"))
        with self.assertRaises(LookupError):
            self.api.line_schema("POST", tgt, 200, "application/json")

    def test_stdin_and_signal(self):
        base = "/v1/sandboxes/%s/execs/%s" % (SBX, EID)
        self.ok(self.api.check_request("POST", base + "/stdin", b"data", "application/octet-stream"))
        self.ok(self.api.check_request("POST", base + "/stdin?eof=1", None))
        self.bad(self.api.check_request("POST", base + "/stdin?eof=yes", b"x", "application/octet-stream"))
        self.bad(self.api.check_request("POST", base + "/stdin", b"{}", "application/json"))
        self.ok(self.resp("POST", base + "/stdin", 204, b"", ct=None))
        self.ok(self.resp("POST", base + "/stdin", 409, {"code": 409, "error": "conflict", "message": "ended"}))
        self.bad(self.resp("POST", base + "/stdin", 200, {}))
        for sig in (15, 1, 64, "SIGTERM", "TERM", "KILL", "SIGUSR1"):
            self.ok(self.api.check_request("POST", base + "/signal", json.dumps({"signal": sig})))
        for sig in (0, 65, "SIGFOO", "term", 1.5, None, True):
            self.bad(self.api.check_request("POST", base + "/signal", json.dumps({"signal": sig})))
        self.bad(self.api.check_request("POST", base + "/signal", json.dumps({})))
        self.ok(self.resp("POST", base + "/signal", 204, b"", ct=None))
        self.ok(self.resp("POST", base + "/signal", 409, {"code": 409, "error": "conflict", "message": "ended"}))
        self.bad(self.resp("POST", base + "/signal", 409, {"code": 409, "error": "sandbox_expired",
                                                           "message": "ended"}))
        tgt = "/v1/sandboxes/%s/execs" % SBX
        self.ok(self.api.check_request("POST", tgt, json.dumps({"cmd": ["cat"], "stdin": True,
                                                                "background": True})))
        self.bad(self.api.check_request("POST", tgt, json.dumps({"cmd": ["cat"], "stdin": "yes"})))

    def test_files(self):
        f = "/v1/sandboxes/%s/files" % SBX
        self.ok(self.api.check_request("PUT", f + "?path=/tmp/x&mode=0644", b"\x00\x01",
                                       "application/octet-stream"))
        self.ok(self.api.check_request("PUT", f + "?path=/tmp/x", b"abc", "application/octet-stream"))
        self.bad(self.api.check_request("PUT", f + "?mode=0644", b"abc", "application/octet-stream"))
        self.bad(self.api.check_request("PUT", f + "?path=/tmp/x&mode=rw", b"abc", "application/octet-stream"))
        self.bad(self.api.check_request("PUT", f + "?path=/tmp/x&mode=0999", b"abc", "application/octet-stream"))
        self.ok(self.resp("PUT", f + "?path=/tmp/x", 201, {"path": "/tmp/x", "size": 3}))
        self.bad(self.resp("PUT", f + "?path=/tmp/x", 201, {"path": "/tmp/x", "size": "3"}))
        self.bad(self.resp("PUT", f + "?path=/tmp/x", 200, {"path": "/tmp/x", "size": 3}))
        self.ok(self.resp("PUT", f + "?path=/tmp/x", 507,
                          {"code": 507, "error": "insufficient_storage", "message": "disk full"}))
        self.ok(self.resp("GET", f + "?path=/tmp/x", 200, b"\xff\x00", ct="application/octet-stream"))
        self.bad(self.resp("GET", f + "?path=/tmp/x", 200, b"\xff\x00", ct="text/plain"))
        self.ok(self.resp("DELETE", f + "?path=/tmp/x", 204, b"", ct=None))
        ls = "/v1/sandboxes/%s/fs/list?path=/tmp" % SBX
        good = {"path": "/tmp", "entries": [{"name": "x", "type": "file", "size": 3, "mode": 0o644},
                                            {"name": "d", "type": "dir", "size": 4096, "mode": 0o755}]}
        self.ok(self.resp("GET", ls, 200, good))
        self.bad(self.resp("GET", ls, 200, mutated(good, ["entries", 0, "type"], "fifo")))
        self.bad(self.resp("GET", ls, 200, mutated(good, ["entries", 0, "size"])))
        self.bad(self.resp("GET", ls, 200, mutated(good, ["entries", 0, "mode"], "0644")))
        self.bad(self.resp("GET", ls, 200, mutated(good, ["entries"], {})))

    def test_logs(self):
        lg = "/v1/sandboxes/%s/logs" % SBX
        self.ok(self.resp("GET", lg, 200, '{"event":"create"}\n{"event":"exec"}\n', ct="application/x-ndjson"))
        self.bad(self.resp("GET", lg, 200, '{"event":"create"}\nnot json\n', ct="application/x-ndjson"))
        self.bad(self.resp("GET", lg, 200, '[1]\n', ct="application/x-ndjson"))
        self.bad(self.resp("GET", lg, 200, '{"event":"create"}\n', ct="application/json"))


if __name__ == "__main__":
    unittest.main()
