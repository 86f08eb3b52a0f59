"""The MCP server spoken to like a client, over pipes (python3 -m tinyvmm.mcp),
against the fake daemon (a test double)."""
import json
import os
import shutil
import subprocess
import sys
import unittest

from _support import PKG_ROOT, FakeDaemonTest

from tinyvmm import Sandbox

_TYPES = {"object", "string", "integer", "number", "boolean", "array", "null"}


def check_schema(testcase, s, where="schema"):
    """A small structural check of a JSON Schema (draft 2020-12 keywords used by the tools)."""
    testcase.assertIsInstance(s, dict, where)
    if "type" in s:
        testcase.assertIn(s["type"], _TYPES, where)
    for k in ("properties",):
        if k in s:
            testcase.assertIsInstance(s[k], dict, where)
            for name, sub in s[k].items():
                check_schema(testcase, sub, f"{where}.{name}")
    if "required" in s:
        testcase.assertIsInstance(s["required"], list)
        for r in s["required"]:
            testcase.assertIn(r, s.get("properties", {}), f"{where}: required {r} not a property")
    if "enum" in s:
        testcase.assertIsInstance(s["enum"], list)
        testcase.assertTrue(s["enum"])
    if isinstance(s.get("additionalProperties"), dict):
        check_schema(testcase, s["additionalProperties"], where + ".additionalProperties")
    for k in ("minimum", "maximum"):
        if k in s:
            testcase.assertIsInstance(s[k], (int, float))
    json.dumps(s)


class McpClient:
    def __init__(self, sock):
        env = dict(os.environ, PYTHONPATH=PKG_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
        self.p = subprocess.Popen([sys.executable, "-m", "tinyvmm.mcp", "--socket", sock],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  env=env, cwd="/", text=True, bufsize=1)
        self.n = 0

    def send_raw(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def recv(self):
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError("server closed stdout; stderr: " + self.p.stderr.read())
        return json.loads(line)

    def request(self, method, params=None):
        self.n += 1
        msg = {"jsonrpc": "2.0", "id": self.n, "method": method}
        if params is not None:
            msg["params"] = params
        self.send_raw(json.dumps(msg))
        resp = self.recv()
        assert resp.get("id") == self.n, resp
        return resp

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send_raw(json.dumps(msg))

    def call(self, name, args):
        resp = self.request("tools/call", {"name": name, "arguments": args})
        assert "result" in resp, resp
        return resp["result"]

    def close(self):
        self.p.stdin.close()
        rc = self.p.wait(30)
        self.p.stdout.close()
        self.p.stderr.close()
        return rc


class McpTest(FakeDaemonTest):
    def setUp(self):
        super().setUp()
        self.c = McpClient(self.sock)
        self.addCleanup(lambda: self.c.p.poll() is None and self.c.close())
        r = self.c.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                          "clientInfo": {"name": "test", "version": "0"}})
        self.init = r["result"]
        self.c.notify("notifications/initialized")

    def test_initialize_and_tools_list(self):
        self.assertEqual(self.init["protocolVersion"], "2025-06-18")
        self.assertIn("tools", self.init["capabilities"])
        self.assertEqual(self.init["serverInfo"]["name"], "tinyvmm")
        tools = self.c.request("tools/list")["result"]["tools"]
        names = {t["name"] for t in tools}
        self.assertEqual(names, {"run_code", "sandbox_create", "exec", "write_file", "read_file",
                                 "list_files", "sandbox_kill", "sandbox_pause", "sandbox_resume",
                                 "sandbox_fork", "sandbox_save_template"})
        for t in tools:
            self.assertEqual(t["inputSchema"]["type"], "object")
            check_schema(self, t["inputSchema"], t["name"])
            self.assertTrue(t["description"])
        rc = next(t for t in tools if t["name"] == "run_code")
        self.assertEqual(rc["inputSchema"]["properties"]["language"]["enum"], ["python", "bash", "node"])
        self.assertEqual(self.c.request("ping")["result"], {})

    def test_run_code_python_42(self):
        r = self.c.call("run_code", {"code": "print(6*7)", "language": "python", "timeout_s": 30})
        self.assertFalse(r["isError"])
        self.assertIn("42", r["content"][0]["text"])
        self.assertEqual(r["content"][0]["type"], "text")
        self.assertEqual(r["structuredContent"]["exit_code"], 0)
        self.assertEqual(r["structuredContent"]["stdout"], "42\n")
        # a fresh sandbox per call, gone afterwards
        self.assertEqual(Sandbox.list(state="running", socket_path=self.sock), [])

    def test_run_code_bash_and_failure(self):
        r = self.c.call("run_code", {"code": "echo $((40+2)); exit 3", "language": "bash"})
        self.assertIn("42", r["content"][0]["text"])
        self.assertEqual(r["structuredContent"]["exit_code"], 3)
        r = self.c.call("run_code", {"code": "raise SystemExit('bad thing')"})
        self.assertIn("bad thing", r["structuredContent"]["stderr"])
        self.assertIn("exit_code: 1", r["content"][0]["text"])

    @unittest.skipUnless(shutil.which("node"), "node not installed")
    def test_run_code_node(self):
        r = self.c.call("run_code", {"code": "console.log(6*7)", "language": "node"})
        self.assertIn("42", r["content"][0]["text"])

    def test_protocol_errors_keep_serving(self):
        self.c.send_raw("{this is not json")
        r = self.c.recv()
        self.assertEqual(r["error"]["code"], -32700)
        self.assertIsNone(r["id"])
        self.c.send_raw(json.dumps({"jsonrpc": "1.0", "id": 99, "method": "ping"}))
        self.assertEqual(self.c.recv()["error"]["code"], -32600)
        self.c.send_raw(json.dumps([1, 2]))
        self.assertEqual(self.c.recv()["error"]["code"], -32600)
        self.assertEqual(self.c.request("no/such/method")["error"]["code"], -32601)
        r = self.c.request("tools/call", {"name": "format_disk", "arguments": {}})
        self.assertEqual(r["error"]["code"], -32602)
        self.assertIn("format_disk", r["error"]["message"])
        r = self.c.request("tools/call", {"name": "exec", "arguments": {"command": "ls"}})
        self.assertEqual(r["error"]["code"], -32602)
        r = self.c.request("tools/call", {"name": "run_code", "arguments": {"code": "1", "language": "cobol"}})
        self.assertEqual(r["error"]["code"], -32602)
        self.c.notify("no/such/notification")  # no answer to a notification
        r = self.c.call("run_code", {"code": "print(42)"})
        self.assertIn("42", r["content"][0]["text"])

    def test_tool_errors(self):
        r = self.c.call("exec", {"sandbox_id": "sbx_" + "0" * 32, "command": "ls"})
        self.assertTrue(r["isError"])
        self.assertIn("sandbox_not_found", r["content"][0]["text"])
        self.fake.capacity_full = True
        r = self.c.call("run_code", {"code": "print(1)"})
        self.assertTrue(r["isError"])
        self.assertIn("capacity", r["content"][0]["text"])

    def test_session_tools_and_cleanup_at_exit(self):
        r = self.c.call("sandbox_create", {"timeout_s": 120, "metadata": {"who": "mcp"}})
        sid = r["structuredContent"]["sandbox_id"]
        self.assertIn(sid, r["content"][0]["text"])
        r = self.c.call("write_file", {"sandbox_id": sid, "path": "/tmp/t.py", "content": "print('hi')"})
        self.assertFalse(r["isError"])
        r = self.c.call("exec", {"sandbox_id": sid, "command": "python3 /tmp/t.py", "timeout_s": 30})
        self.assertEqual(r["structuredContent"]["stdout"], "hi\n")
        r = self.c.call("run_code", {"code": "import os; print(os.path.exists('/tmp/t.py'))",
                                     "sandbox_id": sid})
        self.assertFalse(r["isError"])
        r = self.c.call("read_file", {"sandbox_id": sid, "path": "/tmp/t.py"})
        self.assertEqual(r["structuredContent"]["content"], "print('hi')")
        r = self.c.call("read_file", {"sandbox_id": sid, "path": "/tmp/none"})
        self.assertTrue(r["isError"])
        r = self.c.call("write_file", {"sandbox_id": sid, "path": "/tmp/b", "content": "AAEC",
                                       "encoding": "base64"})
        self.assertIn("3 bytes", r["content"][0]["text"])
        r = self.c.call("list_files", {"sandbox_id": sid, "path": "/tmp"})
        names = [e["name"] for e in r["structuredContent"]["entries"]]
        self.assertIn("t.py", names)
        self.assertIn("b", names)
        r = self.c.call("sandbox_create", {})
        sid2 = r["structuredContent"]["sandbox_id"]
        self.assertNotIn("network", self.fake.json_bodies[-1][2])
        r = self.c.call("sandbox_create", {"network": True})
        self.assertEqual(self.fake.json_bodies[-1][2]["network"], {"enabled": True})
        self.c.call("sandbox_kill", {"sandbox_id": r["structuredContent"]["sandbox_id"]})
        r = self.c.call("sandbox_kill", {"sandbox_id": sid})
        self.assertFalse(r["isError"])
        self.assertEqual([i.id for i in Sandbox.list(state="running", socket_path=self.sock)], [sid2])
        self.assertEqual(self.c.close(), 0)
        self.assertEqual(Sandbox.list(state="running", socket_path=self.sock), [])

    def test_pause_resume_fork(self):
        sid = self.c.call("sandbox_create", {"timeout_s": 120})["structuredContent"]["sandbox_id"]
        self.c.call("write_file", {"sandbox_id": sid, "path": "/tmp/s.txt", "content": "parent"})
        r = self.c.call("sandbox_pause", {"sandbox_id": sid})
        self.assertEqual(r["structuredContent"]["state"], "paused")
        r = self.c.call("sandbox_pause", {"sandbox_id": sid})
        self.assertTrue(r["isError"])
        self.assertIn("conflict", r["content"][0]["text"])
        r = self.c.call("exec", {"sandbox_id": sid, "command": "true"})
        self.assertTrue(r["isError"])
        r = self.c.call("sandbox_resume", {"sandbox_id": sid})
        self.assertEqual(r["structuredContent"]["state"], "running")
        r = self.c.call("sandbox_fork", {"sandbox_id": sid, "count": 2})
        self.assertFalse(r["isError"])
        kids = r["structuredContent"]["sandbox_ids"]
        self.assertEqual(len(set(kids) - {sid}), 2)
        for k in kids:
            self.assertIn(k, r["content"][0]["text"])
            got = self.c.call("read_file", {"sandbox_id": k, "path": "/tmp/s.txt"})
            self.assertEqual(got["structuredContent"]["content"], "parent")
        r = self.c.request("tools/call", {"name": "sandbox_fork", "arguments": {"sandbox_id": sid, "count": 9}})
        self.assertEqual(r["error"]["code"], -32602)
        self.assertEqual(len(Sandbox.list(state="running", socket_path=self.sock)), 3)
        self.assertEqual(self.c.close(), 0)  # the children are this session's: killed at exit
        self.assertEqual(Sandbox.list(state="running", socket_path=self.sock), [])

    def test_save_template_and_create_from_it(self):
        sid = self.c.call("sandbox_create", {"timeout_s": 120})["structuredContent"]["sandbox_id"]
        self.c.call("write_file", {"sandbox_id": sid, "path": "/tmp/deps.txt", "content": "installed"})
        r = self.c.call("sandbox_save_template", {"sandbox_id": sid, "name": "warm"})
        self.assertFalse(r["isError"])
        t = r["structuredContent"]["template"]
        self.assertEqual((t["name"], t["from_sandbox"]), ("warm", sid))
        self.assertIn("warm", r["content"][0]["text"])
        r = self.c.call("sandbox_save_template", {"sandbox_id": sid, "name": "warm"})
        self.assertTrue(r["isError"])  # the name exists
        self.assertIn("conflict", r["content"][0]["text"])
        r = self.c.call("sandbox_save_template", {"sandbox_id": sid, "name": "Bad Name"})
        self.assertTrue(r["isError"])
        self.assertIn("bad_request", r["content"][0]["text"])
        r = self.c.request("tools/call", {"name": "sandbox_save_template", "arguments": {"sandbox_id": sid}})
        self.assertEqual(r["error"]["code"], -32602)  # name is required
        kid = self.c.call("sandbox_create", {"template": "warm"})["structuredContent"]["sandbox_id"]
        got = self.c.call("read_file", {"sandbox_id": kid, "path": "/tmp/deps.txt"})
        self.assertEqual(got["structuredContent"]["content"], "installed")
        r = self.c.call("sandbox_create", {"template": "warm", "memory_mib": 1024})
        self.assertTrue(r["isError"])
        self.assertEqual(self.c.close(), 0)
        self.assertEqual(Sandbox.list(state="running", socket_path=self.sock), [])


class McpInProcess(FakeDaemonTest):
    """McpServer driven directly: the --reuse session sandbox, and a crash-proof handle()."""

    def test_reuse_session_sandbox(self):
        from tinyvmm.mcp import McpServer
        srv = McpServer(self.sock, reuse=True)
        call = lambda args: srv.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                        "params": {"name": "run_code", "arguments": args}})["result"]
        r1 = call({"code": "open('/tmp/keep.txt', 'w').write('kept')"})
        r2 = call({"code": "print(open('/tmp/keep.txt').read())"})
        self.assertEqual(r2["structuredContent"]["stdout"], "kept\n")
        self.assertEqual(r1["structuredContent"]["sandbox_id"], r2["structuredContent"]["sandbox_id"])
        self.assertEqual(len(Sandbox.list(state="running", socket_path=self.sock)), 1)
        srv.close()
        self.assertEqual(Sandbox.list(state="running", socket_path=self.sock), [])

    def test_no_daemon_names_the_servers_option(self):
        from tinyvmm.mcp import McpServer
        srv = McpServer(self.sock + ".none")
        r = srv.handle({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                        "params": {"name": "run_code", "arguments": {"code": "1"}}})["result"]
        self.assertTrue(r["isError"])
        text = r["content"][0]["text"]
        self.assertIn("--socket", text)
        self.assertNotIn("socket_path", text)  # the SDK's keyword, not this server's

    def test_handle_never_raises(self):
        from tinyvmm.mcp import McpServer
        srv = McpServer(self.sock)
        for msg in (None, 5, "x", [], {"jsonrpc": "2.0"}, {"jsonrpc": "2.0", "id": {}, "method": "ping"},
                    {"jsonrpc": "2.0", "id": 1, "method": 7}, {"jsonrpc": "2.0", "id": 2, "method": "tools/call"},
                    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": []},
                    {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "exec", "arguments": 5}}):
            r = srv.handle(msg)
            if r is not None:
                self.assertIn("error", r, msg)
        self.assertIsNone(srv.handle({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        self.assertIsNone(srv.handle({"jsonrpc": "2.0", "id": 9, "result": {}}))  # a response: ignored


if __name__ == "__main__":
    unittest.main()
