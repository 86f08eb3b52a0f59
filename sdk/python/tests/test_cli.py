"""``python3 -m tinyvmm`` against the fake daemon (a test double)."""
import json
import os
import subprocess
import sys
import tempfile

from _support import PKG_ROOT, FakeDaemonTest


class Cli(FakeDaemonTest):
    def cli(self, *args, input=None):
        env = dict(os.environ, PYTHONPATH=PKG_ROOT, TINYVMM_SOCKET=self.sock)
        return subprocess.run([sys.executable, "-m", "tinyvmm", *args], input=input, capture_output=True,
                              env=env, timeout=60)

    def test_create_with_a_network(self):
        bodies = self.fake.json_bodies
        for args, want in ((["--network"], {"enabled": True}),
                           (["--allow-out", "10.0.0.0/8:443/tcp", "--dns", "10.0.0.53"],
                            {"enabled": True, "allow_out": ["10.0.0.0/8:443/tcp"], "dns": ["10.0.0.53"]}),
                           (["--deny-out"], {"enabled": True, "allow_out": [], "dns": []}),
                           ([], None)):
            p = self.cli("create", *args)
            self.assertEqual(p.returncode, 0, p.stderr)
            body = [b for m, path, b in bodies if (m, path) == ("POST", "/v1/sandboxes")][-1]
            self.assertEqual(body.get("network"), want, args)
        p = self.cli("create", "--deny-out", "--dns", "10.0.0.53")
        self.assertEqual(p.returncode, 64)
        self.assertIn(b"--deny-out: lets nothing out", p.stderr)

    def test_wrong_command_lines_are_64(self):
        # as tinyvmm's own (argparse says 2)
        for args, said in ((["nope"], b"invalid choice"), (["create", "--timeout", "x"], b"invalid int value"),
                           (["create", "-e", "novalue"], b"-e wants KEY=VALUE"),
                           (["exec", "sbx_" + "0" * 32], b"exec needs a command"),
                           (["cp", "/etc/hostname", "sb_nope:/tmp/x"], b"'sb_nope' is not a sandbox id")):
            p = self.cli(*args)
            self.assertEqual(p.returncode, 64, (args, p.stderr))
            self.assertTrue(p.stderr.startswith(b"tinyvmm: "), p.stderr)
            self.assertIn(said, p.stderr)

    def test_health_and_version(self):
        p = self.cli("health")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertTrue(p.stdout.startswith(b"ok: "), p.stdout)
        p = self.cli("version")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, rb"^tinyvmm serve [0-9][^ ]* \(API v1\)\n$")

    def test_no_daemon_names_its_own_flag(self):
        p = self.cli("--socket", os.path.join(tempfile.gettempdir(), "no-such-tinyvmm.sock"), "create")
        self.assertEqual(p.returncode, 125)
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        self.assertIn(b"is the daemon running? set TINYVMM_SOCKET or give --socket)", p.stderr)

    def test_flow(self):
        p = self.cli("create", "--timeout", "60", "--metadata", "k=v")
        self.assertEqual(p.returncode, 0, p.stderr)
        sid = p.stdout.decode().strip()
        self.assertTrue(sid.startswith("sbx_"))
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
            f.write("import sys\nprint('out'); print('err', file=sys.stderr); sys.exit(4)\n")
        self.addCleanup(os.unlink, f.name)
        p = self.cli("cp", f.name, f"{sid}:/tmp/job.py")
        self.assertEqual(p.returncode, 0, p.stderr)
        p = self.cli("exec", sid, "--", "python3", "/tmp/job.py")
        self.assertEqual((p.returncode, p.stdout, p.stderr), (4, b"out\n", b"err\n"))
        p = self.cli("exec", sid, "--json", "echo hi | tr a-z A-Z")
        self.assertEqual(json.loads(p.stdout)["stdout"], "HI\n")
        p = self.cli("exec", sid, "--timeout", "1", "sleep 5")
        self.assertEqual(p.returncode, 124)
        p = self.cli("cp", "-", f"{sid}:/tmp/in.txt", input=b"piped")
        self.assertEqual(p.returncode, 0, p.stderr)
        p = self.cli("cp", f"{sid}:/tmp/in.txt", "-")
        self.assertEqual(p.stdout, b"piped")
        p = self.cli("ls", sid, "/tmp")
        self.assertIn(b"job.py", p.stdout)
        self.assertIn(b"in.txt", p.stdout)
        p = self.cli("list")
        self.assertIn(sid.encode(), p.stdout)
        self.assertIn(b"k=v", p.stdout)
        self.assertEqual(self.cli("kill", sid).returncode, 0)
        p = self.cli("exec", sid, "true")
        self.assertEqual(p.returncode, 125)
        self.assertIn(b"sandbox_expired", p.stderr)
        p = self.cli("list", "--state", "running", "--json")
        self.assertEqual(json.loads(p.stdout), [])
        p = self.cli("kill", "sbx_" + "0" * 32)
        self.assertEqual(p.returncode, 125)  # as exec's on a missing sandbox
        self.assertIn(b"sandbox_not_found (404)", p.stderr)
