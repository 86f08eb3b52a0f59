"""The issue-15 acceptance flows against a REAL ``tinyvmm serve``.

Skipped unless TINYVMM_SERVE_SOCKET names the daemon's socket, e.g.
    TINYVMM_SERVE_SOCKET=/run/tinyvmm/api.sock python3 -m unittest discover -s sdk/python/tests -p test_live.py
Every sandbox made here is killed (context managers / cleanups).
"""
import io
import json
import os
import subprocess
import sys
import time
import unittest

from _support import PKG_ROOT

from tinyvmm import CommandExitError, Sandbox, SandboxNotFound, health

SOCK = os.environ.get("TINYVMM_SERVE_SOCKET")
TASK = "import json\nprint(json.dumps({'total': sum([3, 4, 5, 6, 7])}))\n"
FAILING = "def load():\n    return {}['missing']\n\nload()\n"


@unittest.skipUnless(SOCK, "set TINYVMM_SERVE_SOCKET to run against a real tinyvmm serve")
class Live(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        h = health(socket_path=SOCK)
        if h["status"] != "ok":  # it says why no sandbox can start: not this test's failure
            raise unittest.SkipTest("the daemon at %s is degraded: %s" % (SOCK, "; ".join(h["problems"])))
        cls.sb = Sandbox.create(timeout=600, metadata={"test": "sdk-python-live"}, socket_path=SOCK)

    @classmethod
    def tearDownClass(cls):
        cls.sb.kill()

    def test_1_seed_flow(self):
        self.sb.files.write("/tmp/task.py", TASK)
        r = self.sb.commands.run("python3 /tmp/task.py", timeout=30)
        self.assertEqual(r.exit_code, 0, r.stderr)
        self.assertFalse(r.timed_out)
        self.assertFalse(r.truncated)
        self.assertEqual(json.loads(r.stdout), {"total": 25})
        who = self.sb.commands.run("id -u", timeout=30)
        self.assertEqual(who.stdout.strip(), "1000")  # the unprivileged user by default

    def test_2_failing_script_is_a_result(self):
        self.sb.files.write("/tmp/fail.py", FAILING)
        r = self.sb.commands.run("python3 /tmp/fail.py", timeout=30)
        self.assertEqual(r.exit_code, 1)
        self.assertIn("Traceback (most recent call last)", r.stderr)
        self.assertIn("KeyError: 'missing'", r.stderr)

    def test_3_check_raises_with_result(self):
        self.sb.files.write("/tmp/fail.py", FAILING)
        with self.assertRaises(CommandExitError) as cm:
            self.sb.commands.run("python3 /tmp/fail.py", timeout=30, check=True)
        self.assertEqual(cm.exception.result.exit_code, 1)
        self.assertIn("KeyError", cm.exception.result.stderr)

    def test_4_background_and_reconnect(self):
        h = self.sb.commands.run("for i in $(seq 1 30); do echo line$i; sleep 0.1; done", background=True,
                                 timeout=120)
        eid = h.exec_id
        time.sleep(1.0)
        del h
        again = Sandbox.connect(self.sb.id, access_token=self.sb.access_token, socket_path=SOCK)
        seen = []
        r = again.commands.connect(eid, on_stdout=seen.append).wait(timeout=120)
        expect = "".join(f"line{i}\n" for i in range(1, 31))
        self.assertEqual(r.exit_code, 0)
        self.assertEqual(r.stdout, expect)
        self.assertEqual("".join(seen), expect)  # nothing missed in the replay

    def test_4b_stdin_and_kill(self):
        h = self.sb.commands.run("read a; read b; echo got $a $b", background=True, stdin=True, timeout=120)
        h.send_stdin("one\n")
        h.send_stdin(b"two\n")
        h.close_stdin()
        self.assertEqual(h.wait(timeout=120).stdout, "got one two\n")
        h = self.sb.commands.run("sleep 600", background=True, timeout=900)
        h.kill(15)
        r = h.wait(timeout=120)
        self.assertEqual((r.signal, r.exit_code), (15, 143))

    def test_5_20mib_round_trip(self):
        blob = os.urandom(20 << 20)
        w = self.sb.files.write("/tmp/big.bin", io.BytesIO(blob))
        self.assertEqual(w.size, len(blob))
        with self.sb.files.read("/tmp/big.bin", format="stream") as s:
            back = b"".join(s.iter_chunks())
        self.assertEqual(len(back), len(blob))
        self.assertTrue(back == blob, "20 MiB round trip differs")
        r = self.sb.commands.run("sha256sum /tmp/big.bin", timeout=60)
        import hashlib
        self.assertEqual(r.stdout.split()[0], hashlib.sha256(blob).hexdigest())
        self.sb.files.remove("/tmp/big.bin")

    def test_6_with_block_after_exception_leaves_nothing(self):
        sid = None
        with self.assertRaises(RuntimeError):
            with Sandbox.create(timeout=120, metadata={"test": "with-block"}, socket_path=SOCK) as sb:
                sid = sb.id
                raise RuntimeError("the body failed")
        running = [i.id for i in Sandbox.list(state="running", socket_path=SOCK)]
        self.assertNotIn(sid, running)
        for i in Sandbox.list(metadata={"test": "with-block"}, socket_path=SOCK):
            self.assertEqual(i.state, "ended")  # kept a while after the end, as API.md says

    def test_7_errors(self):
        with self.assertRaises(SandboxNotFound):
            Sandbox.connect("sbx_" + "0" * 32, socket_path=SOCK)

    def test_8_mcp_run_code(self):
        env = dict(os.environ, PYTHONPATH=PKG_ROOT)
        p = subprocess.Popen([sys.executable, "-m", "tinyvmm.mcp", "--socket", SOCK], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, env=env, text=True)
        msgs = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "live", "version": "0"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "run_code", "arguments": {"code": "print(6*7)", "language": "python"}}},
        ]
        out, _ = p.communicate("".join(json.dumps(m) + "\n" for m in msgs), timeout=300)
        answers = {a["id"]: a for a in map(json.loads, out.splitlines())}
        self.assertEqual(answers[1]["result"]["protocolVersion"], "2025-06-18")
        self.assertIn("42", answers[2]["result"]["content"][0]["text"])
        self.assertFalse(answers[2]["result"]["isError"])


if __name__ == "__main__":
    unittest.main()
