"""SDK tests against the fake daemon (tests/fake_server.py, a test double)."""
import builtins
import io
import json
import os
import threading
import time
import unittest

from _support import FakeDaemonTest

import tinyvmm
from tinyvmm import (BadRequest, CommandExitError, GuestError, NotImplementedByServer, QuotaExceeded,
                     Sandbox, SandboxExpired, SandboxNotFound, ServiceUnavailable, TinyvmmError)
from tinyvmm._http import error_from_response
from tinyvmm.commands import _Collector

TASK = "import json\nprint(json.dumps({'total': sum([3, 4, 5, 6, 7])}))\n"


class ErrorMapping(unittest.TestCase):
    def m(self, status, body, headers=None):
        return error_from_response(status, json.dumps(body).encode(), headers)

    def test_codes(self):
        e = self.m(404, {"code": 404, "error": "sandbox_not_found", "message": "no sandbox x"})
        self.assertIsInstance(e, SandboxNotFound)
        self.assertEqual(e.message, "no sandbox x")
        e = self.m(410, {"code": 410, "error": "sandbox_expired", "message": "gone", "end_reason": "idle"})
        self.assertIsInstance(e, SandboxExpired)
        self.assertEqual(e.end_reason, "idle")
        self.assertIsInstance(self.m(429, {"error": "quota_exceeded", "message": "m"}), QuotaExceeded)
        e = self.m(429, {"error": "quota_exceeded", "message": "budget"}, {"Retry-After": "3600"})
        self.assertEqual(e.retry_after, 3600.0)
        e = self.m(403, {"error": "forbidden", "message": "m"})
        self.assertIsInstance(e, tinyvmm.Forbidden)
        self.assertIsInstance(e, PermissionError)
        e = self.m(503, {"error": "capacity", "message": "m"}, {"Retry-After": "7"})
        self.assertIsInstance(e, ServiceUnavailable)
        self.assertEqual(e.retry_after, 7.0)
        e = self.m(501, {"error": "not_implemented", "message": "m"})
        self.assertIsInstance(e, NotImplementedByServer)
        self.assertIsInstance(e, NotImplementedError)
        self.assertIsInstance(self.m(502, {"error": "guest_error", "message": "no such file"}), GuestError)
        e = self.m(404, {"code": 404, "error": "template_not_found", "message": "no template \"py\""})
        self.assertIsInstance(e, tinyvmm.TemplateNotFound)
        self.assertIsInstance(e, tinyvmm.NotFound)
        self.assertNotIsInstance(e, SandboxNotFound)
        self.assertIsInstance(self.m(400, {"error": "bad_request", "message": "cpus"}), ValueError)
        e = error_from_response(500, b"not json")
        self.assertIsInstance(e, TinyvmmError)
        self.assertEqual(e.status, 500)
        self.assertIn("not json", e.message)

    def test_version_is_the_projects(self):
        # one version for the daemon, the binary and its SDKs (a bug report names one)
        h = os.path.join(os.path.dirname(__file__), "..", "..", "..", "vmm", "core", "version.h")
        with open(h) as f:
            want = [ln.split('"')[1] for ln in f if ln.startswith("#define TVM_VERSION ")][0]
        self.assertEqual(tinyvmm.__version__, want)
        with open(os.path.join(os.path.dirname(__file__), "..", "pyproject.toml")) as f:
            self.assertIn('\nversion = "%s"\n' % want, f.read())

    def test_public_names_say_tinyvmm(self):
        # a traceback names the class as it is imported, not tinyvmm._http's
        for name in ("ServiceUnavailable", "TinyvmmError", "Sandbox", "CommandResult"):
            self.assertEqual(getattr(tinyvmm, name).__module__, "tinyvmm", name)
        self.assertEqual(str(type(self.m(503, {"error": "unavailable", "message": "m"}))),
                         "<class 'tinyvmm.ServiceUnavailable'>")

    def test_timeout_error_is_builtin(self):
        self.assertTrue(issubclass(tinyvmm.TimeoutError, builtins.TimeoutError))
        self.assertTrue(issubclass(tinyvmm.TimeoutError, TinyvmmError))

    def test_collector_trims_replay(self):
        import base64
        got = []
        c = _Collector(got.append, None, since=3)
        c.feed({"type": "stdout", "offset": 0, "data": base64.b64encode(b"abcdef").decode()})
        c.feed({"type": "stdout", "offset": 0, "data": base64.b64encode(b"abcdef").decode()})  # dup
        c.feed({"type": "stdout", "offset": 6, "data": base64.b64encode("\u00e9".encode()[:1]).decode()})
        c.feed({"type": "stdout", "offset": 7, "data": base64.b64encode("\u00e9".encode()[1:]).decode()})
        c.finish()
        self.assertEqual("".join(got), "def\u00e9")
        self.assertEqual(c.offset, 8)

    def test_no_daemon(self):
        with self.assertRaises(ServiceUnavailable) as cm:
            Sandbox.create(socket_path="/nonexistent/dir/api.sock")
        self.assertIn("/nonexistent/dir/api.sock", str(cm.exception))

    def test_socket_from_env(self):
        old = os.environ.get("TINYVMM_SOCKET")
        os.environ["TINYVMM_SOCKET"] = "/x/y.sock"
        try:
            self.assertEqual(tinyvmm.resolve_socket_path(), "/x/y.sock")
            self.assertEqual(tinyvmm.resolve_socket_path("/a.sock"), "/a.sock")
        finally:
            if old is None:
                del os.environ["TINYVMM_SOCKET"]
            else:
                os.environ["TINYVMM_SOCKET"] = old
        if old is None:
            self.assertEqual(tinyvmm.resolve_socket_path(), "/run/tinyvmm/api.sock")


class SandboxLifecycle(FakeDaemonTest):
    def test_health_version(self):
        self.assertEqual(tinyvmm.health(self.sock)["status"], "ok")
        self.assertEqual(tinyvmm.version(self.sock)["api"], "v1")

    def test_pool(self):
        self.assertEqual(tinyvmm.pool(socket_path=self.sock)["size"], 0)
        p = tinyvmm.set_pool(3, socket_path=self.sock)
        self.assertEqual((p["size"], p["template"]), (3, "default"))
        self.assertEqual(tinyvmm.pool("default", self.sock)["size"], 3)
        with self.assertRaises(tinyvmm.BadRequest):
            tinyvmm.set_pool(-1, socket_path=self.sock)
        with self.assertRaises(tinyvmm.NotFound):
            tinyvmm.pool("other/x", self.sock)

    def test_create_list_connect_kill(self):
        sb = Sandbox.create(timeout=60, metadata={"job": "a"}, envs={"X": "1"}, socket_path=self.sock)
        self.assertRegex(sb.id, r"^sbx_[0-9a-f]{32}$")
        self.assertRegex(sb.access_token, r"^[0-9a-f]{32}$")
        other = Sandbox.create(metadata={"job": "b"}, socket_path=self.sock)
        ids = [i.id for i in Sandbox.list(socket_path=self.sock)]
        self.assertCountEqual(ids, [sb.id, other.id])
        self.assertEqual([i.id for i in Sandbox.list(metadata={"job": "a"}, socket_path=self.sock)], [sb.id])
        self.assertNotIn("access_token", Sandbox.list(socket_path=self.sock)[0].raw)
        c = Sandbox.connect(sb.id, socket_path=self.sock)
        self.assertEqual(c.info.metadata, {"job": "a"})
        self.assertTrue(c.is_running())
        self.assertTrue(sb.kill())
        self.assertEqual(sb.get_info().end_reason, "killed")
        self.assertTrue(sb.kill())  # an ended one: 204 again
        self.assertEqual([i.id for i in Sandbox.list(state="running", socket_path=self.sock)], [other.id])
        self.assertTrue(Sandbox.kill(other.id, socket_path=self.sock))
        self.assertFalse(Sandbox.kill("sbx_" + "0" * 32, socket_path=self.sock))

    def test_ended_sandbox_is_expired(self):
        sb = Sandbox.create(socket_path=self.sock)
        sb.kill()
        with self.assertRaises(SandboxExpired) as cm:
            sb.commands.run("true")
        self.assertEqual(cm.exception.end_reason, "killed")
        self.assertEqual(cm.exception.status, 410)

    def test_timeout_expiry_and_set_timeout(self):
        sb = Sandbox.create(timeout=1, socket_path=self.sock)
        exp = sb.set_timeout(30)
        self.assertTrue(exp.endswith("Z"))
        sb.set_timeout(1)
        time.sleep(1.6)
        with self.assertRaises(SandboxExpired) as cm:
            sb.files.list("/")
        self.assertEqual(cm.exception.end_reason, "expired")

    def test_not_found_and_tokens(self):
        with self.assertRaises(SandboxNotFound):
            Sandbox.connect("sbx_" + "1" * 32, socket_path=self.sock)
        sb = Sandbox.create(socket_path=self.sock)
        with self.assertRaises(SandboxNotFound):
            Sandbox.connect(sb.id, access_token="f" * 32, socket_path=self.sock)
        c = Sandbox.connect(sb.id, access_token=sb.access_token, socket_path=self.sock)
        self.assertEqual(c.commands.run("echo hi").stdout, "hi\n")

    def test_context_manager_kills_after_exception(self):
        with self.assertRaises(ZeroDivisionError):
            with Sandbox.create(socket_path=self.sock) as sb:
                sid = sb.id
                1 / 0
        self.assertEqual(Sandbox.list(state="running", socket_path=self.sock), [])
        self.assertEqual(Sandbox.connect(sid, socket_path=self.sock).info.end_reason, "killed")

    def test_errors_quota_capacity_badrequest(self):
        self.fake.quota = 1
        Sandbox.create(socket_path=self.sock)
        with self.assertRaises(QuotaExceeded) as cm:
            Sandbox.create(socket_path=self.sock)
        self.assertIn("at most 1", cm.exception.message)
        self.fake.quota = 10
        self.fake.capacity_full = True
        with self.assertRaises(ServiceUnavailable) as cm:
            Sandbox.create(socket_path=self.sock)
        self.assertEqual(cm.exception.retry_after, 1.0)
        self.fake.capacity_full = False
        with self.assertRaises(BadRequest) as cm:
            Sandbox.create(cpus=99, socket_path=self.sock)
        self.assertIn("cpus", cm.exception.message)

    def test_logs(self):
        with Sandbox.create(socket_path=self.sock) as sb:
            sb.commands.run("true")
            events = [r.get("event") for r in sb.logs()]
        self.assertIn("exec", events)


class PauseResumeFork(FakeDaemonTest):
    def test_pause_resume(self):
        sb = Sandbox.create(timeout=60, socket_path=self.sock)
        sb.files.write("/tmp/keep.txt", "kept")
        self.assertIsNone(sb.info.forked_from)
        info = sb.pause()
        self.assertEqual(info.state, "paused")
        self.assertIs(sb.info, info)
        self.assertEqual(sb.get_info().state, "paused")
        self.assertEqual([i.id for i in Sandbox.list(state="paused", socket_path=self.sock)], [sb.id])
        self.assertFalse(sb.is_running())
        with self.assertRaises(tinyvmm.Conflict) as cm:  # paused already
            sb.pause()
        self.assertEqual((cm.exception.status, cm.exception.error), (409, "conflict"))
        with self.assertRaises(tinyvmm.Conflict) as cm:  # the VM's routes: resume first
            sb.commands.run("true")
        self.assertIn("resume", cm.exception.message)
        with self.assertRaises(tinyvmm.Conflict):
            sb.files.read("/tmp/keep.txt")
        info = sb.resume()
        self.assertEqual((info.state, sb.info.state), ("running", "running"))
        self.assertEqual(sb.files.read("/tmp/keep.txt"), "kept")
        with self.assertRaises(tinyvmm.Conflict):  # not paused
            sb.resume()
        # by token, as any route of the sandbox
        c = Sandbox.connect(sb.id, access_token=sb.access_token, socket_path=self.sock)
        self.assertEqual(c.pause().state, "paused")
        self.assertEqual(c.resume().state, "running")
        sb.kill()
        with self.assertRaises(SandboxExpired):
            sb.pause()

    def test_pause_with_a_running_command_is_a_conflict(self):
        with Sandbox.create(socket_path=self.sock) as sb:
            h = sb.commands.run("sleep 0.5", background=True)
            with self.assertRaises(tinyvmm.Conflict):
                sb.pause()
            h.wait(timeout=10)
            self.assertEqual(sb.pause().state, "paused")

    def test_resume_admitted_as_a_create(self):
        self.fake.quota = 1
        sb = Sandbox.create(socket_path=self.sock)
        sb.pause()  # a paused sandbox does not count against the limit
        Sandbox.create(socket_path=self.sock)
        with self.assertRaises(QuotaExceeded):
            sb.resume()
        self.fake.quota = 10
        self.fake.capacity_full = True
        with self.assertRaises(ServiceUnavailable) as cm:
            sb.resume()
        self.assertEqual(cm.exception.retry_after, 1.0)
        self.fake.capacity_full = False
        self.assertEqual(sb.resume().state, "running")

    def test_fork(self):
        sb = Sandbox.create(timeout=60, metadata={"job": "f"}, envs={"X": "1"}, socket_path=self.sock)
        sb.files.write("/tmp/state.txt", "parent")
        kids = sb.fork(count=3, timeout=120)
        self.assertEqual(len(kids), 3)
        self.assertEqual(len({k.id for k in kids} | {sb.id}), 4)
        self.assertEqual(len({k.access_token for k in kids} | {sb.access_token}), 4)
        for k in kids:
            self.assertIsInstance(k, Sandbox)
            self.assertRegex(k.access_token, r"^[0-9a-f]{32}$")
            self.assertEqual(k.info.forked_from, sb.id)
            self.assertEqual(k.info.state, "running")
            self.assertEqual(k.info.metadata, {"job": "f"})
            self.assertNotIn("access_token", k.info.raw)
            # its own token on its own client (the parent's token does not open a child)
            self.assertEqual(k._client.access_token, k.access_token)
            self.assertEqual(k._client.socket_path, self.sock)
            self.assertEqual(k.files.read("/tmp/state.txt"), "parent")
            self.assertEqual(k.commands.run("echo $X").stdout, "1\n")
            self.assertEqual(k.get_info().forked_from, sb.id)
        kids[0].files.write("/tmp/state.txt", "child 0")  # copies: a write is seen by no other
        self.assertEqual(sb.files.read("/tmp/state.txt"), "parent")
        self.assertEqual(kids[1].files.read("/tmp/state.txt"), "parent")
        self.assertEqual(sb.get_info().state, "running")  # the parent runs on
        self.assertIsNone(sb.info.forked_from)
        listed = {i.id: i.forked_from for i in Sandbox.list(socket_path=self.sock)}
        self.assertEqual(listed, {sb.id: None, **{k.id: sb.id for k in kids}})
        # defaults: one child, the parent's timeout
        (one,) = sb.fork()
        self.assertEqual(self.fake.json_bodies[-1][2], {"count": 1})
        self.assertEqual(one.info.forked_from, sb.id)
        # a child's child
        (grand,) = one.fork(timeout=30)
        self.assertEqual(self.fake.json_bodies[-1][2], {"count": 1, "timeout_s": 30})
        self.assertEqual(grand.info.forked_from, one.id)

    def test_fork_errors(self):
        sb = Sandbox.create(socket_path=self.sock)
        for n in (0, 9):
            with self.assertRaises(BadRequest) as cm:
                sb.fork(count=n)
            self.assertIn("count", cm.exception.message)
        # a caller who only holds the token (another uid in the fake's eyes): 403
        self.fake.sandboxes[sb.id].owner = os.getuid() + 1
        holder = Sandbox.connect(sb.id, access_token=sb.access_token, socket_path=self.sock)
        with self.assertRaises(tinyvmm.Forbidden) as cm:
            holder.fork()
        self.assertEqual((cm.exception.status, cm.exception.error), (403, "forbidden"))
        self.assertIsInstance(cm.exception, PermissionError)
        self.fake.sandboxes[sb.id].owner = os.getuid()
        sb.pause()
        with self.assertRaises(tinyvmm.Conflict):  # paused: resume first
            sb.fork()
        sb.resume()
        h = sb.commands.run("sleep 0.5", background=True)
        with self.assertRaises(tinyvmm.Conflict):  # commands running
            sb.fork()
        h.wait(timeout=10)
        self.fake.quota = 2
        with self.assertRaises(QuotaExceeded):  # room for count more
            sb.fork(count=2)
        self.fake.quota = 20
        self.fake.capacity_full = True
        with self.assertRaises(ServiceUnavailable):
            sb.fork()
        self.fake.capacity_full = False
        self.assertEqual(len(Sandbox.list(socket_path=self.sock)), 1)  # all or nothing: no child kept
        self.assertEqual(len(sb.fork(count=8)), 8)


class Templates(FakeDaemonTest):
    def test_build_from_a_warmup(self):
        cmd = "mkdir -p /tmp/w && echo ready > /tmp/w/f"
        t = tinyvmm.build_template("warm", cmd, memory_mib=512, timeout=30, socket_path=self.sock)
        self.assertEqual(self.fake.json_bodies[-1][1:],
                         ("/v1/templates", {"name": "warm", "warmup": cmd, "memory_mib": 512, "timeout_s": 30}))
        self.assertEqual((t["name"], t["cpus"], t["memory_mib"]), ("warm", 1, 512))
        # the warm-up's sandbox has ended; a create from the template has its files
        self.assertEqual(Sandbox.connect(t["from_sandbox"], socket_path=self.sock).info.state, "ended")
        kid = Sandbox.create(template="warm", socket_path=self.sock)
        self.assertEqual(kid.files.read("/tmp/w/f"), "ready\n")
        with self.assertRaises(tinyvmm.WarmupFailed) as cm:
            tinyvmm.build_template("bad", "echo no-such-package >&2; exit 4", socket_path=self.sock)
        self.assertEqual((cm.exception.status, cm.exception.error), (422, "warmup_failed"))
        self.assertIn("exited with 4", str(cm.exception))
        self.assertIn("no-such-package", str(cm.exception))
        self.assertEqual([x["name"] for x in tinyvmm.templates(self.sock)], ["warm"])  # nothing saved
        with self.assertRaises(tinyvmm.Conflict):
            tinyvmm.build_template("warm", "true", socket_path=self.sock)
        with self.assertRaises(BadRequest):
            tinyvmm.build_template("x", "", socket_path=self.sock)
        # a networked warm-up (network=True is {"enabled": True}) makes a networked template
        t = tinyvmm.build_template("net", "true", network=True, socket_path=self.sock)
        self.assertEqual(self.fake.json_bodies[-1][2]["network"], {"enabled": True})
        self.assertIs(t["network"], True)
        with self.assertRaises(BadRequest):
            Sandbox.create(template="net", socket_path=self.sock)
        Sandbox.create(template="net", network=True, socket_path=self.sock).kill()

    def test_save_list_get_create_delete(self):
        self.assertEqual(tinyvmm.templates(self.sock), [])
        sb = Sandbox.create(timeout=60, cpus=2, memory_mib=512, socket_path=self.sock)
        sb.files.write("/tmp/warm.txt", "warmed up")
        t = sb.save_as_template("py-3.12")
        self.assertEqual(self.fake.json_bodies[-1][1:], ("/v1/templates", {"name": "py-3.12", "from_sandbox": sb.id}))
        self.assertEqual((t["name"], t["from_sandbox"], t["cpus"], t["memory_mib"]), ("py-3.12", sb.id, 2, 512))
        self.assertTrue(t["created_at"].endswith("Z"))
        self.assertIsInstance(t["memory_kib"], int)
        self.assertEqual(sb.get_info().state, "running")  # the sandbox runs on
        self.assertEqual(tinyvmm.templates(self.sock), [t])
        self.assertEqual(tinyvmm.get_template("py-3.12", socket_path=self.sock), t)
        # a create from it: its files, its shape (left out, or equal), a sandbox of its own
        sb.files.write("/tmp/warm.txt", "changed after the save")
        for kw in ({}, {"cpus": 2, "memory_mib": 512}):
            kid = Sandbox.create(template="py-3.12", socket_path=self.sock, **kw)
            self.assertNotEqual(kid.id, sb.id)
            self.assertEqual((kid.info.template, kid.info.cpus, kid.info.memory_mib), ("py-3.12", 2, 512))
            self.assertIsNone(kid.info.forked_from)
            self.assertEqual(kid.files.read("/tmp/warm.txt"), "warmed up")
            kid.files.write("/tmp/warm.txt", "kid")  # a copy: the template is not changed
        self.assertEqual(Sandbox.create(template="py-3.12", socket_path=self.sock).files.read("/tmp/warm.txt"),
                         "warmed up")
        # by token only (not by uid): not found, as the daemon
        holder = Sandbox.connect(sb.id, access_token=sb.access_token, socket_path=self.sock)
        self.assertIsNone(self.fake.json_bodies[-1][2].get("access_token"))
        t2 = holder.save_as_template("second")  # same uid: the token is not needed
        self.assertEqual(t2["from_sandbox"], sb.id)
        self.assertEqual([x["name"] for x in tinyvmm.templates(self.sock)], ["py-3.12", "second"])
        self.assertTrue(tinyvmm.delete_template("py-3.12", socket_path=self.sock))
        self.assertFalse(tinyvmm.delete_template("py-3.12", socket_path=self.sock))  # twice: False, like kill
        self.assertEqual([x["name"] for x in tinyvmm.templates(self.sock)], ["second"])
        with self.assertRaises(tinyvmm.TemplateNotFound):
            tinyvmm.get_template("py-3.12", socket_path=self.sock)
        with self.assertRaises(BadRequest) as cm:  # a create from a deleted one
            Sandbox.create(template="py-3.12", socket_path=self.sock)
        self.assertIn("py-3.12", cm.exception.message)
        self.assertTrue(kid.is_running())  # sandboxes made from it run on

    def test_save_errors(self):
        sb = Sandbox.create(socket_path=self.sock)
        for bad in ("", "default", "Py", "-x", ".x", "a/b", "a b", "x" * 64, "ü"):
            with self.assertRaises(BadRequest, msg=bad) as cm:
                sb.save_as_template(bad)
            self.assertEqual((cm.exception.status, cm.exception.error), (400, "bad_request"))
            self.assertIn("name", cm.exception.message)
        self.assertEqual(sb.save_as_template("x" * 63)["name"], "x" * 63)
        self.assertEqual(sb.save_as_template("0a._-")["name"], "0a._-")
        sb.save_as_template("py")
        with self.assertRaises(tinyvmm.Conflict) as cm:  # the name exists
            sb.save_as_template("py")
        self.assertEqual((cm.exception.status, cm.exception.error), (409, "conflict"))
        self.assertIn("exists", cm.exception.message)
        sb.pause()
        with self.assertRaises(tinyvmm.Conflict):  # paused
            sb.save_as_template("paused")
        sb.resume()
        h = sb.commands.run("sleep 0.5", background=True)
        with self.assertRaises(tinyvmm.Conflict):  # commands running
            sb.save_as_template("busy")
        h.wait(timeout=10)
        # from a networked sandbox: its creates need a network, others cannot have one
        # (network=True is {"enabled": True}; a value of another type is a TypeError, sent nowhere)
        sent = len(self.fake.json_bodies)
        with self.assertRaises(TypeError) as te:
            Sandbox.create(network="yes", socket_path=self.sock)
        self.assertIn("network: expected True", str(te.exception))
        self.assertEqual(len(self.fake.json_bodies), sent)
        net = Sandbox.create(network=True, socket_path=self.sock)
        self.assertEqual(self.fake.json_bodies[-1][2]["network"], {"enabled": True})
        self.assertIs(net.save_as_template("net")["network"], True)
        with self.assertRaises(tinyvmm.BadRequest) as cm:
            Sandbox.create(template="net", socket_path=self.sock)
        self.assertIn("network.enabled true is required", cm.exception.message)
        Sandbox.create(template="net", network={"enabled": True}, socket_path=self.sock).kill()
        # another uid's sandbox (held by token only): sandbox_not_found
        self.fake.sandboxes[sb.id].owner = os.getuid() + 1
        holder = Sandbox.connect(sb.id, access_token=sb.access_token, socket_path=self.sock)
        with self.assertRaises(SandboxNotFound) as cm:
            holder.save_as_template("theirs")
        self.assertEqual(cm.exception.error, "sandbox_not_found")
        self.fake.sandboxes[sb.id].owner = os.getuid()
        self.fake.template_quota = 3  # 64 per uid in the daemon; it has 3
        with self.assertRaises(QuotaExceeded):
            sb.save_as_template("one-too-many")
        self.fake.template_quota = 64
        sb.kill()
        with self.assertRaises(SandboxExpired):
            sb.save_as_template("ended")
        self.assertEqual(sorted(t["name"] for t in tinyvmm.templates(self.sock)), ["0a._-", "net", "py", "x" * 63])

    def test_missing_and_other_uids_templates(self):
        with self.assertRaises(tinyvmm.TemplateNotFound) as cm:
            tinyvmm.get_template("nope", socket_path=self.sock)
        self.assertEqual((cm.exception.status, cm.exception.error), (404, "template_not_found"))
        self.assertFalse(tinyvmm.delete_template("nope", socket_path=self.sock))
        sb = Sandbox.create(socket_path=self.sock)
        sb.save_as_template("py")
        # the same name under another uid is another template: the caller's is not there
        uid = os.getuid()
        self.fake.templates[(uid + 1, "py")] = self.fake.templates.pop((uid, "py"))
        self.assertEqual(tinyvmm.templates(self.sock), [])
        with self.assertRaises(tinyvmm.TemplateNotFound):
            tinyvmm.get_template("py", socket_path=self.sock)
        self.assertFalse(tinyvmm.delete_template("py", socket_path=self.sock))
        with self.assertRaises(BadRequest):  # a create from another uid's: unknown
            Sandbox.create(template="py", socket_path=self.sock)
        self.assertEqual(sb.save_as_template("py")["name"], "py")  # the caller's own, no conflict
        self.assertIn((uid + 1, "py"), self.fake.templates)

    def test_create_from_template_shape_and_network(self):
        sb = Sandbox.create(cpus=1, memory_mib=256, socket_path=self.sock)
        sb.save_as_template("small")
        for kw in ({"memory_mib": 512}, {"cpus": 2}):
            with self.assertRaises(BadRequest) as cm:
                Sandbox.create(template="small", socket_path=self.sock, **kw)
            self.assertIn("leave them out", cm.exception.message)
        with self.assertRaises(BadRequest) as cm:
            Sandbox.create(template="small", network={"enabled": True}, socket_path=self.sock)
        self.assertIn("network", cm.exception.message)
        with self.assertRaises(BadRequest):
            Sandbox.create(template="never-saved", socket_path=self.sock)
        self.assertEqual(Sandbox.create(template="default", memory_mib=512, socket_path=self.sock).info.memory_mib,
                         512)
        self.assertEqual(len(Sandbox.list(socket_path=self.sock)), 2)  # the failed creates made none


class Commands(FakeDaemonTest):
    def setUp(self):
        super().setUp()
        self.sb = Sandbox.create(socket_path=self.sock)
        self.addCleanup(self.sb.kill)

    def test_seed_flow(self):
        self.sb.files.write("/tmp/task.py", TASK)
        r = self.sb.commands.run("python3 /tmp/task.py", timeout=30, user="sandbox")
        self.assertEqual(r.exit_code, 0, r.stderr)
        self.assertFalse(r.truncated)
        self.assertFalse(r.timed_out)
        self.assertEqual(json.loads(r.stdout), {"total": 25})
        self.assertTrue(r.ok)
        self.assertGreaterEqual(r.duration, 0)

    def test_failure_is_a_result_and_check_raises(self):
        self.sb.files.write("/tmp/bad.py", "def f():\n    raise ValueError('boom')\nf()\n")
        r = self.sb.commands.run("python3 /tmp/bad.py", timeout=30)
        self.assertEqual(r.exit_code, 1)
        self.assertIn("Traceback", r.stderr)
        self.assertIn("ValueError: boom", r.stderr)
        with self.assertRaises(CommandExitError) as cm:
            self.sb.commands.run("python3 /tmp/bad.py", timeout=30, check=True)
        self.assertEqual(cm.exception.result.exit_code, 1)
        self.assertIn("ValueError: boom", cm.exception.result.stderr)
        self.assertIn("ValueError: boom", str(cm.exception))

    def test_argv_env_cwd_stdin(self):
        r = self.sb.commands.run("python3", args=["-c", "import os,sys; print(os.environ['A'], sys.stdin.read())"],
                                 envs={"A": "x y"}, stdin="in put")
        self.assertEqual(r.stdout, "x y in put\n")
        r = self.sb.commands.run(["sh", "-c", "pwd"], cwd="/tmp")
        self.assertTrue(r.stdout.strip().endswith("/tmp"))
        self.assertEqual(self.sb.commands.run("exit 3").exit_code, 3)

    def test_command_timeout_is_result(self):
        r = self.sb.commands.run("sleep 5", timeout=1)
        self.assertTrue(r.timed_out)
        self.assertFalse(r.ok)
        with self.assertRaises(CommandExitError):
            self.sb.commands.run("sleep 5", timeout=1, check=True)

    def test_truncation(self):
        r = self.sb.commands.run("head -c 5000 /dev/zero", max_output_bytes=1000)
        self.assertTrue(r.truncated)
        self.assertTrue(r.stdout_truncated)
        self.assertEqual(len(r.stdout), 1000)

    def test_job_limits_reach_the_daemon(self):
        r = self.sb.commands.run("echo ok", memory_mib=64, pids_max=16)
        self.assertEqual(r.stdout, "ok\n")
        self.assertEqual((r.oom_killed, r.pids_limited), (False, False))
        # the daemon checks them (here the fake, as the real one): they were sent
        with self.assertRaises(BadRequest) as cm:
            self.sb.commands.run("true", pids_max=0)
        self.assertIn("pids_max", str(cm.exception))
        r = tinyvmm.commands.CommandResult.from_json({"exit_code": 137, "signal": 9, "oom_killed": True, "pids_limited": True})
        self.assertEqual((r.oom_killed, r.pids_limited, r.ok), (True, True, False))

    def test_streaming_callbacks(self):
        got, times = [], []
        t0 = time.monotonic()

        def out(s):
            got.append(("out", s))
            times.append(time.monotonic() - t0)
        r = self.sb.commands.run("echo a; sleep 0.6; echo b >&2; echo c", on_stdout=out,
                                 on_stderr=lambda s: got.append(("err", s)))
        self.assertEqual(r.stdout, "a\nc\n")
        self.assertEqual(r.stderr, "b\n")
        self.assertEqual("".join(s for k, s in got if k == "out"), "a\nc\n")
        self.assertIn(("err", "b\n"), got)
        self.assertLess(times[0], 0.5)  # "a" came before the command ended
        self.assertEqual(r.exit_code, 0)

    def test_background_and_reconnect(self):
        h = self.sb.commands.run("for i in $(seq 1 20); do echo line$i; sleep 0.05; done; echo done >&2",
                                 background=True)
        self.assertTrue(h.exec_id.startswith("ex_"))
        time.sleep(0.3)
        del h  # the client goes away; the exec lives on
        # a new client: another Sandbox object, by id and token
        sb2 = Sandbox.connect(self.sb.id, access_token=self.sb.access_token, socket_path=self.sock)
        lines = []
        h2 = sb2.commands.connect(self.sb.commands._sb and self._last_exec(), on_stdout=lines.append)
        r = h2.wait(timeout=20)
        expect = "".join(f"line{i}\n" for i in range(1, 21))
        self.assertEqual(r.stdout, expect)
        self.assertEqual("".join(lines), expect)
        self.assertEqual(r.stderr, "done\n")
        self.assertEqual(h2.wait(), r)  # cached

    def _last_exec(self):
        return list(self.fake.sandboxes[self.sb.id].execs)[-1]

    def test_events_since(self):
        h = self.sb.commands.run("printf 0123456789", background=True)
        h.wait(timeout=10)
        data = b"".join(__import__("base64").b64decode(e["data"]) for e in h.events(since=4)
                        if e["type"] == "stdout")
        self.assertTrue(data.endswith(b"456789"))
        h3 = tinyvmm.CommandHandle(self.sb, h.exec_id, since=4)
        self.assertEqual(h3.wait(timeout=10).stdout, "0123456789")  # the result is the server's

    def test_wait_timeout_client_side(self):
        h = self.sb.commands.run("sleep 3", background=True)
        with self.assertRaises(tinyvmm.TimeoutError):
            h.wait(timeout=0.5)
        h.kill()
        r = h.wait(timeout=10)
        self.assertEqual(r.signal, 9)

    def test_stdin_and_signal(self):
        h = self.sb.commands.run("read a; read b; echo got $a $b", background=True, stdin=True)
        h.send_stdin("one\n")
        h.send_stdin(b"two\n")
        h.close_stdin()
        self.assertEqual(h.wait(timeout=10).stdout, "got one two\n")
        # without stdin=True the command's stdin is closed from the start
        h = self.sb.commands.run("cat; echo eof", background=True)
        self.assertEqual(h.wait(timeout=10).stdout, "eof\n")
        with self.assertRaises(tinyvmm.TinyvmmError):
            h.send_stdin("late")
        h = self.sb.commands.run("cat", background=True, stdin=True)
        self.sb.commands.close_stdin(h.exec_id)
        self.assertEqual(h.wait(timeout=10).exit_code, 0)

    def test_stdin_signal_not_implemented(self):
        self.fake.support_stdin_signal = False
        h = self.sb.commands.run("sleep 2", background=True, stdin=True)
        with self.assertRaises(NotImplementedByServer) as cm:
            h.kill()
        self.assertIn("cannot signal", str(cm.exception))
        self.assertIsInstance(cm.exception, NotImplementedError)
        with self.assertRaises(NotImplementedByServer) as cm:
            h.send_stdin("x")
        self.assertIn("stdin", str(cm.exception))
        with self.assertRaises(NotImplementedByServer):
            h.close_stdin()

    def test_kill_sandbox_during_exec(self):
        h = self.sb.commands.run("sleep 10", background=True)
        threading.Timer(0.3, self.sb.kill).start()
        with self.assertRaises(SandboxExpired) as cm:
            h.wait(timeout=10)
        self.assertEqual(cm.exception.end_reason, "killed")

    def test_unknown_exec(self):
        with self.assertRaises(tinyvmm.ExecNotFound):
            self.sb.commands.connect("ex_" + "0" * 16)

    def test_missing_program(self):
        with self.assertRaises(GuestError):
            self.sb.commands.run(["/no/such/program"])


class Files(FakeDaemonTest):
    def setUp(self):
        super().setUp()
        self.sb = Sandbox.create(socket_path=self.sock)
        self.addCleanup(self.sb.kill)

    def test_write_kinds(self):
        f = self.sb.files
        self.assertEqual(f.write("/tmp/a.txt", "h\u00e9").size, 3)
        self.assertEqual(f.read("/tmp/a.txt"), "h\u00e9")
        f.write("/tmp/b.bin", b"\x00\xff")
        self.assertEqual(f.read("/tmp/b.bin", format="bytes"), b"\x00\xff")
        f.write("/tmp/c.txt", io.StringIO("text \u00e9 file"))
        self.assertEqual(f.read("/tmp/c.txt"), "text \u00e9 file")
        f.write("/tmp/d.bin", iter([b"ab", b"", b"cd"]))
        self.assertEqual(f.read("/tmp/d.bin", format="bytes"), b"abcd")
        self.assertEqual([u["chunked"] for u in self.fake.uploads], [False, False, True, True])
        f.write("/tmp/run.sh", "#!/bin/sh\necho ran\n", mode=0o755)
        self.assertEqual({e.name: e.mode for e in f.list("/tmp")}["run.sh"], 0o755)
        self.assertEqual(self.sb.commands.run("/tmp/run.sh").stdout, "ran\n")

    def test_20mib_round_trip_streamed(self):
        blob = os.urandom(20 << 20)
        w = self.sb.files.write("/tmp/big.bin", io.BytesIO(blob))
        self.assertEqual(w.size, len(blob))
        self.assertTrue(self.fake.uploads[-1]["chunked"])
        with self.sb.files.read("/tmp/big.bin", format="stream") as s:
            back = b"".join(s.iter_chunks())
        self.assertEqual(back, blob)
        self.assertEqual(self.sb.files.read("/tmp/big.bin", format="bytes"), blob)

    def test_early_error_answer_during_upload(self):
        # the server answers 410 and closes without reading the body: the
        # client must report the answer, not a broken pipe
        self.sb.kill()
        for _ in range(3):
            with self.assertRaises(SandboxExpired) as cm:
                self.sb.files.write("/tmp/big.bin", io.BytesIO(bytes(8 << 20)))
            self.assertEqual(cm.exception.end_reason, "killed")
            with self.assertRaises(SandboxExpired):
                self.sb.files.write("/tmp/big.bin", bytes(8 << 20))

    def test_list_remove_missing(self):
        f = self.sb.files
        f.write("/tmp/x/y.txt", "1")
        entries = {e.name: e for e in f.list("/tmp")}
        self.assertEqual(entries["x"].type, "dir")
        self.assertEqual(f.list("/tmp/x")[0].path, "/tmp/x/y.txt")
        self.assertTrue(f.exists("/tmp/x/y.txt"))
        f.remove("/tmp/x/y.txt")
        self.assertFalse(f.exists("/tmp/x/y.txt"))
        with self.assertRaises(GuestError) as cm:
            f.read("/tmp/x/y.txt")
        self.assertIn("no such file", cm.exception.message)
        with self.assertRaises(GuestError):
            f.remove("/tmp/x/y.txt")
        with self.assertRaises(ValueError):
            f.read("/tmp/x", format="xml")


if __name__ == "__main__":
    unittest.main()
