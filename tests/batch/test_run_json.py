"""The batch contract of `tinyvmm run --json` (issue 16): exactly one JSON
object on every exit path, valid against vmm/cli/run-result.schema.json, and
the exit-status table of README.md ("Exit status") case by case.

Needs root and /dev/kvm for the cases that start a VM (else they skip); the
wrong-command-line cases run anywhere. The guest: $TINYVMM_GUEST_DIR/vmlinux
and $TINYVMM_ROOTFS (as the C integration tests), given to tinyvmm through
$TINYVMM_DATA_DIR, so each run restores the template snapshot of that
kernel and image (made by the first run that needs it).
Run: python3 -m unittest discover -s tests/batch
"""
import base64
import glob
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "serve"))
import apicheck  # noqa: E402  (the same validator checks the service's OpenAPI)

TINYVMM = os.environ.get("TINYVMM", os.path.join(ROOT, "tinyvmm"))
with open(os.path.join(ROOT, "vmm", "cli", "run-result.schema.json")) as f:
    SCHEMA = json.load(f)
CAN_RUN_VM = os.geteuid() == 0 and os.access("/dev/kvm", os.W_OK) and os.environ.get("TINYVMM_GUEST_DIR")
STOP_GRACE_S = 30  # Slurm's default KillWait: SIGTERM to SIGKILL


def setUpModule():
    global DATA
    DATA = tempfile.mkdtemp(prefix="tinyvmm-batch-")
    # (without /dev/kvm too: a run refused before its VM still finds them)
    if os.environ.get("TINYVMM_GUEST_DIR") and os.environ.get("TINYVMM_ROOTFS"):
        os.symlink(os.path.realpath(os.path.join(os.environ["TINYVMM_GUEST_DIR"], "vmlinux")),
                   os.path.join(DATA, "vmlinux"))
        os.symlink(os.path.realpath(os.environ["TINYVMM_ROOTFS"]), os.path.join(DATA, "rootfs.ext4"))


def tearDownModule():
    shutil.rmtree(DATA, ignore_errors=True)


def env(**extra):
    e = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    e["TINYVMM_DATA_DIR"] = DATA
    e.update(extra)
    return e


def reading_stdin(pid):
    """Whether a thread of pid, or of a process below it, is in read(0, ...)."""
    pids, found = {pid}, True
    while found:  # the descendants of pid
        found = False
        for d in glob.glob("/proc/[0-9]*/stat"):
            try:
                with open(d) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            child = int(d.split("/")[2])
            if int(fields[1]) in pids and child not in pids:
                pids.add(child)
                found = True
    for q in pids:
        for t in glob.glob("/proc/%d/task/*/syscall" % q):
            try:
                with open(t) as f:
                    if f.read().startswith("0 0x0 "):
                        return True
            except OSError:
                pass
    return False


class Base(unittest.TestCase):
    JAIL = False  # run's VM jailed (--jail) in the subclass that says so

    def argv(self, *args):
        if self.JAIL and args[0] == "run":
            return [TINYVMM, "run", "--jail", *args[1:]]
        return [TINYVMM, *args]

    def run_json(self, *args, environ=None, timeout=600):
        p = subprocess.run(self.argv(*args), capture_output=True, env=environ or env(), timeout=timeout)
        return p.returncode, self.one_object(p.stdout, p.stderr), p.stderr.decode(errors="replace")

    def one_object(self, out, err=b""):
        text = out.decode()
        self.assertTrue(text.endswith("\n") and text.count("\n") == 1,
                        "want exactly one line of JSON, got %r (stderr %r)" % (text[:300], err[-300:]))
        obj = json.loads(text)
        errs = apicheck.validate(SCHEMA, obj, SCHEMA)
        self.assertEqual(errs, [], "not valid against run-result.schema.json: %s" % errs)
        return obj

    def check_status(self, rc, obj, want):
        self.assertEqual(rc, want)
        self.assertEqual(obj["status"], want)


class Contract(Base):
    """No VM needed."""

    def test_wrong_command_line_is_64_with_an_object(self):
        for args, words in [
            (["run", "--json", "--mem", "12abc", "--", "true"], "--mem: '12abc' is not a number"),
            (["run", "--json", "--bogus", "--", "true"], "unknown option --bogus"),
            (["run", "--json", "--output-encoding", "hex", "--", "true"], "is not utf8 or base64"),
            (["run", "--json"], "--json reports a job"),
            (["exec", "--json", "--", "true"], "exec needs --vsock-uds"),
            (["run", "--json", "--put", "/etc/hostname:rel/x", "--", "true"], "must be absolute"),
        ]:
            with self.subTest(args=args):
                rc, obj, err = self.run_json(*args)
                self.check_status(rc, obj, 64)
                self.assertFalse(obj["ok"])
                self.assertEqual(obj["error"]["stage"], "args")
                self.assertIn(words, obj["error"]["message"])
                self.assertIn(words, err)  # said on stderr too, once
                self.assertEqual(err.count("\n"), 1)
                self.assertIsNone(obj["exit_code"])
                self.assertIsNone(obj["config"])
                self.assertEqual(obj["command"], args[0])

    def test_without_json_a_wrong_command_line_prints_nothing_on_stdout(self):
        p = subprocess.run([TINYVMM, "run", "--mem", "x"], capture_output=True, env=env())
        self.assertEqual((p.returncode, p.stdout), (64, b""))
        # an unknown option or a missing value first: no long option was
        # found, so getopt_long's index is not one (it crashed)
        for args in (["run", "--bogus"], ["run", "-ix"], ["run", "--kernel"], ["run", "-e"]):
            p = subprocess.run([TINYVMM, *args], capture_output=True, env=env())
            self.assertEqual((p.returncode, p.stdout, p.stderr.count(b"\n")), (64, b"", 1), args)
        p = subprocess.run([TINYVMM, "runn"], capture_output=True, env=env())
        self.assertEqual((p.returncode, p.stdout), (64, b""))

    def test_id_from_flag_slurm_or_random(self):
        _, obj, _ = self.run_json("run", "--json", "--id", "exp-7", "--mem", "x", "--", "true")
        self.assertEqual(obj["id"], "exp-7")
        _, obj, _ = self.run_json("run", "--json", "--mem", "x", "--", "true",
                                  environ=env(SLURM_ARRAY_JOB_ID="812", SLURM_ARRAY_TASK_ID="3"))
        self.assertEqual(obj["id"], "812-3")
        ids = {self.run_json("run", "--json", "--mem", "x", "--", "true")[1]["id"] for _ in range(2)}
        self.assertEqual(len(ids), 2)
        self.assertTrue(all(len(i) == 16 for i in ids))

    def test_json_out_file_and_empty_stdout(self):
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            p = subprocess.run([TINYVMM, "run", "--json-out", out, "--mem", "x", "--", "true"],
                               capture_output=True, env=env())
            self.assertEqual((p.returncode, p.stdout), (64, b""))
            with open(out, "rb") as f:
                obj = self.one_object(f.read())
            self.assertEqual(obj["error"]["stage"], "args")
            self.assertEqual(os.listdir(d), ["r.json"])  # no temporary left

    def test_sigterm_before_the_vm_still_gives_the_object(self):
        # --env-file of a FIFO without a writer blocks the command line's
        # parsing: a deterministic point before any VM exists.
        with tempfile.TemporaryDirectory() as d:
            fifo = os.path.join(d, "envs")
            os.mkfifo(fifo)
            p = subprocess.Popen([TINYVMM, "run", "--json", "--env-file", fifo, "--", "true"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
            for _ in range(100):  # until it waits in open(2) on the FIFO
                time.sleep(0.1)
                try:
                    with open("/proc/%d/syscall" % p.pid) as f:
                        if f.read().split()[0] == "257":  # openat
                            break
                except (OSError, IndexError):
                    pass
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=STOP_GRACE_S)
            obj = self.one_object(out, err)
            self.check_status(p.returncode, obj, 128 + signal.SIGTERM)
            self.assertEqual(obj["error"], {"stage": "args", "message": "stopped by signal 15 (SIGTERM)"})

    def test_unwritable_json_out_falls_back_to_stdout(self):
        out = "/nonexistent-dir/r.json"
        rc, obj, err = self.run_json("run", "--mem", "x", "--json-out", out, "--", "true")
        self.check_status(rc, obj, 64)  # the run's own error stays
        self.assertIn("--mem", obj["error"]["message"])
        self.assertIn("--json-out %s: No such file or directory: the object goes to stdout" % out, err)

    def test_json_out_that_cannot_be_written_is_refused_at_once(self):
        # said before anything runs (it used to be found after the run)
        d = tempfile.mkdtemp()
        try:
            for out, why in (("/nonexistent-dir/r.json", "its folder /nonexistent-dir: No such file or directory"),
                             (d, "a directory, not a file")):
                rc, obj, err = self.run_json("run", "--json-out", out, "--", "true")
                self.check_status(rc, obj, 64)
                self.assertEqual(obj["error"], {"stage": "args", "message": "--json-out %s: %s" % (out, why)})
                # one line: not a second one on the same file (helper-66)
                self.assertEqual(err, "tinyvmm: --json-out %s: %s\n" % (out, why))
        finally:
            os.rmdir(d)

    def test_unreadable_put_is_125_at_stage_setup(self):
        rc, obj, _ = self.run_json("run", "--json", "--put", "/no/such/local:/tmp/x", "--", "true")
        self.check_status(rc, obj, 125)
        self.assertEqual(obj["error"]["stage"], "setup")
        self.assertIn("/no/such/local", obj["error"]["message"])
        # its own entry says why, not "not attempted"
        self.assertEqual(obj["files"][0]["error"], "--put /no/such/local: No such file or directory")

    def test_abbreviated_report_options_are_refused(self):
        # getopt_long takes "--json-o F" for --json-out, but the report
        # reads argv itself: it saw no --json-out and wrote no object.
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "r.json")
            p = subprocess.run([TINYVMM, "run", "--json-o", out, "--mem", "x", "--", "true"],
                               capture_output=True, env=env())
            self.assertEqual(p.returncode, 64)
            self.assertIn(b"--json-out", p.stderr)
        rc, obj, err = self.run_json("run", "--json", "--output-enc", "base64", "--", "true")
        self.check_status(rc, obj, 64)
        self.assertIn("--output-encoding", obj["error"]["message"])

    def test_json_out_through_a_symlink_or_a_fifo(self):
        with tempfile.TemporaryDirectory() as d:
            # A symlink: the file it names gets the object, the link stays.
            target, link = os.path.join(d, "target.json"), os.path.join(d, "link")
            os.symlink(target, link)
            with open(target, "w") as f:
                f.write("old")
            p = subprocess.run([TINYVMM, "run", "--json-out", link, "--mem", "x", "--", "true"],
                               capture_output=True, env=env())
            self.assertEqual(p.returncode, 64)
            self.assertTrue(os.path.islink(link))
            with open(target, "rb") as f:
                self.one_object(f.read())
            # A FIFO (a pipe to a collector): its reader gets the object and
            # the FIFO is still one.
            fifo = os.path.join(d, "fifo")
            os.mkfifo(fifo)
            p = subprocess.Popen([TINYVMM, "run", "--json-out", fifo, "--mem", "x", "--", "true"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
            with open(fifo, "rb") as f:
                got = f.read()
            p.communicate(timeout=30)
            self.assertEqual(p.returncode, 64)
            self.one_object(got)
            self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))

    def test_get_into_a_missing_folder_is_125_before_any_vm(self):
        rc, obj, _ = self.run_json("run", "--json", "--get", "/etc/hostname:/no/such/dir/h", "--", "true")
        self.check_status(rc, obj, 125)
        self.assertEqual(obj["error"]["stage"], "setup")
        self.assertIn("cannot write into /no/such/dir", obj["error"]["message"])
        self.assertIsNone(obj["timings"]["vm_ms"])

    def test_a_cache_others_may_write_is_not_used(self):
        # A template is what every later guest becomes: a cache another
        # user may write (one made first in the world-writable /var/tmp)
        # is refused in one line and the run boots cold (here it then
        # fails, on a kernel of zeros); with the cache made private, the
        # same run takes the template's lock (if KVM could make one).
        with tempfile.TemporaryDirectory() as d:
            cache = os.path.join(d, "cache")
            with open(os.path.join(d, "vmlinux"), "wb") as f:
                f.write(bytes(4096))
            with open(os.path.join(d, "root.ext4"), "wb") as f:
                f.truncate(1 << 20)
            os.mkdir(cache)
            os.chmod(cache, 0o777)
            args = ("run", "--json", "--kernel", os.path.join(d, "vmlinux"), "--rootfs", os.path.join(d, "root.ext4"),
                    "--", "true")
            rc, obj, err = self.run_json(*args, environ=env(TINYVMM_CACHE=cache))
            self.check_status(rc, obj, 125)
            self.assertIn("template snapshots: %s: Operation not permitted" % cache, err)
            self.assertEqual(glob.glob(os.path.join(cache, "templates", "*")), [], "a template was tried")
            # nor a symlink (a trailing slash would follow it), nor a
            # folder under one that others may write and is not sticky
            link = os.path.join(d, "link")
            os.symlink(cache, link)
            rc, obj, err = self.run_json(*args, environ=env(TINYVMM_CACHE=link + "/"))
            self.assertIn("template snapshots: %s: Not a directory" % link, err)
            os.chmod(cache, 0o755)
            os.chmod(d, 0o777)
            rc, obj, err = self.run_json(*args, environ=env(TINYVMM_CACHE=cache))
            self.assertIn("template snapshots: %s: Operation not permitted" % d, err)
            os.chmod(d, 0o700)
            rc, obj, err = self.run_json(*args, environ=env(TINYVMM_CACHE=cache))
            self.assertNotIn("Operation not permitted", err)
            # where no template can be made (no usable /dev/kvm) no lock
            # file is left either
            kvm = os.access("/dev/kvm", os.R_OK | os.W_OK)
            self.assertEqual(len(glob.glob(os.path.join(cache, "templates", "*.lock"))), 1 if kvm else 0, err)

    def test_vm_failure_is_125_at_stage_vm(self):
        rc, obj, err = self.run_json("run", "--json", "--kernel", "/nonexistent/vmlinux", "--", "true")
        self.check_status(rc, obj, 125)
        # with KVM or without (the files are checked before KVM is opened)
        self.assertEqual(obj["error"]["stage"], "vm")
        # said once: no template is tried for a kernel that is not there
        self.assertEqual(err.count("/nonexistent/vmlinux"), 1, err)
        self.assertEqual(obj["error"]["message"], "kernel /nonexistent/vmlinux: No such file or directory")
        self.assertEqual(obj["config"]["kernel"], "/nonexistent/vmlinux")
        self.assertEqual(obj["config"]["argv"], ["true"])
        # no VM was made: it did not start, by boot or otherwise (it said "boot")
        self.assertIsNone(obj["started"])


@unittest.skipUnless(CAN_RUN_VM, "needs root, /dev/kvm and TINYVMM_GUEST_DIR/TINYVMM_ROOTFS")
class WithVM(Base):
    def test_job_exit_0_binary_output_exact_in_base64(self):
        rc, obj, _ = self.run_json("run", "--json", "--output-encoding", "base64", "--", "sh", "-c",
                                   r"printf '\377\376ok\000'; printf 'e\n' >&2")
        self.check_status(rc, obj, 0)
        self.assertTrue(obj["ok"])
        self.assertIsNone(obj["error"])
        self.assertEqual(base64.b64decode(obj["stdout"]), b"\xff\xfeok\x00")
        self.assertEqual(base64.b64decode(obj["stderr"]), b"e\n")
        self.assertEqual(obj["output_encoding"], "base64")
        self.assertEqual(obj["started"], "restore")
        t = obj["timings"]
        self.assertTrue(t["vm_ms"] <= t["agent_ms"] <= t["job_ms"] <= t["job_end_ms"] <= t["total_ms"], t)

    def test_job_failure_is_its_own_status_not_an_error(self):
        rc, obj, _ = self.run_json("run", "--json", "--", "sh", "-c", "echo out; exit 3")
        self.check_status(rc, obj, 3)
        self.assertFalse(obj["ok"])
        self.assertIsNone(obj["error"])
        self.assertEqual((obj["exit_code"], obj["signal"], obj["stdout"]), (3, 0, "out\n"))

    def test_unwritable_json_out_of_a_good_run_is_125_on_stdout(self):
        # its folder there at the start (checked then), gone by the end:
        # removed while the run waits for its stdin (after its VM started)
        d = tempfile.mkdtemp()
        p = subprocess.Popen(self.argv("run", "-i", "--json-out", d + "/r.json", "--", "cat"), env=env(),
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 600
            while not reading_stdin(p.pid) and p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            os.rmdir(d)
            out, err = p.communicate(b"in", timeout=600)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        obj = self.one_object(out, err)
        self.check_status(p.returncode, obj, 125)
        self.assertEqual((obj["exit_code"], obj["stdout"]), (0, "in"))
        self.assertIn("the object goes to stdout", obj["error"]["message"])

    def test_timeout_is_124(self):
        rc, obj, _ = self.run_json("run", "--json", "--timeout", "1", "--", "sleep", "60")
        self.check_status(rc, obj, 124)
        self.assertTrue(obj["timed_out"])
        self.assertIsNone(obj["error"])

    def test_not_found_127_and_cannot_run_126(self):
        for cmd, want in [("/no/such/cmd", 127), ("/etc/hostname", 126)]:
            with self.subTest(cmd=cmd):
                rc, obj, _ = self.run_json("run", "--json", "--", cmd)
                self.check_status(rc, obj, want)
                self.assertIsNone(obj["exit_code"])
                self.assertEqual(obj["error"]["stage"], "job")
                self.assertIn(cmd, obj["error"]["message"])

    def test_failed_get_is_125_with_the_job_result_and_each_file(self):
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "in.txt")
            with open(src, "w") as f:
                f.write("12345")
            rc, obj, _ = self.run_json(
                "run", "--json", "--put", src + ":/tmp/in.txt", "--get", "/tmp/in.txt:" + os.path.join(d, "back"),
                "--get", "/no/such/file:" + os.path.join(d, "never"), "--", "true")
            self.check_status(rc, obj, 125)
            self.assertEqual(obj["exit_code"], 0)  # the job itself worked
            self.assertFalse(obj["ok"])
            self.assertEqual(obj["error"]["stage"], "get")
            self.assertIn("/no/such/file", obj["error"]["message"])
            files = obj["files"]
            self.assertEqual([(f["direction"], f["ok"], f["bytes"]) for f in files],
                             [("put", True, 5), ("get", True, 5), ("get", False, None)])
            self.assertIn("/no/such/file", files[2]["error"])
            with open(os.path.join(d, "back")) as f:
                self.assertEqual(f.read(), "12345")
            self.assertFalse(os.path.exists(os.path.join(d, "never")))

    def test_sigterm_ends_the_run_with_an_object_within_the_grace(self):
        p = subprocess.Popen(self.argv("run", "--json", "--", "sh", "-c", "echo started; sleep 300"),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
        # The job has started once the guest's agent answered: wait for
        # tinyvmm's job stage by the restore's usual lines, bounded.
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and p.poll() is None:
            time.sleep(1)
            if os.path.exists("/proc/%d" % p.pid) and self._job_running(p.pid):
                break
        time.sleep(1)
        p.send_signal(signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            self.fail("tinyvmm still running %d s after SIGTERM" % STOP_GRACE_S)
        obj = self.one_object(out, err)
        self.check_status(p.returncode, obj, 128 + signal.SIGTERM)
        self.assertIn("stopped by signal 15 (SIGTERM)", obj["error"]["message"])

    def test_sigterm_while_the_template_is_made_still_gives_the_object(self):
        # A fresh cache: this run makes the template, with fd 1 pointed at
        # /dev/null meanwhile; the object must still reach our stdout.
        with tempfile.TemporaryDirectory() as cache:
            p = subprocess.Popen([TINYVMM, "run", "--json", "--", "true"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env(TINYVMM_CACHE=cache))
            templates = os.path.join(cache, "templates")
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not (
                    os.path.isdir(templates) and any(n.endswith(".lock") for n in os.listdir(templates))):
                time.sleep(0.2)
            time.sleep(3)  # the lock is taken: the template's VM boots
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=STOP_GRACE_S)
            obj = self.one_object(out, err)
            self.check_status(p.returncode, obj, 128 + signal.SIGTERM)
            self.assertEqual(obj["error"]["stage"], "template")

    def test_a_few_mib_of_output_escaped_does_not_outgrow_the_cgroup(self):
        # NUL bytes escape 6 times (\u0000): three pre-rendered stop
        # objects of 2 x 6 MiB output were over 400 MiB, beyond the VM's
        # cgroup (guest RAM + 64 MiB): tinyvmm was OOM-killed, no object.
        n = 6 << 20
        rc, obj, err = self.run_json("run", "--json", "--output-cap", str(n), "--timeout", "400", "--", "sh", "-c",
                                     "head -c %d /dev/zero >&2 & head -c %d /dev/zero; wait" % (n, n))
        self.check_status(rc, obj, 0)
        self.assertEqual((len(obj["stdout"]), len(obj["stderr"])), (n, n))

    @staticmethod
    def _job_running(pid):
        # tinyvmm's threads (or, jailed, its child's) include the vCPU and
        # the event loop once the VM runs; the job runs shortly after the
        # agent connects. Good enough as a start signal: the test only needs
        # SIGTERM to land while the VM runs.
        try:
            with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
                pids = [pid] + [int(c) for c in f.read().split()]
            return max(len(os.listdir("/proc/%d/task" % p)) for p in pids) >= 3
        except (OSError, ValueError):
            return False

    def test_jailed_run_reports_through_the_jail(self):
        # The jailed child runs the job; the object comes from the process
        # that started tinyvmm, with the paths the user gave (the jail
        # rewrites its own copies) and the files the parent moved out.
        with tempfile.TemporaryDirectory() as d:
            src = os.path.join(d, "in")
            with open(src, "w") as f:
                f.write("abc")
            rc, obj, _ = self.run_json("run", "--json", "--jail", "--put", src + ":/tmp/in",
                                       "--get", "/tmp/in:" + os.path.join(d, "h"),
                                       "--", "sh", "-c", "echo jailed; exit 5")
            self.check_status(rc, obj, 5)
            self.assertEqual((obj["stdout"], obj["exit_code"]), ("jailed\n", 5))
            self.assertEqual([(f["local"], f["ok"], f["bytes"]) for f in obj["files"]],
                             [(src, True, 3), (os.path.join(d, "h"), True, 3)])
            self.assertEqual(obj["config"]["kernel"], os.path.join(DATA, "vmlinux"))
            with open(os.path.join(d, "h")) as f:
                self.assertEqual(f.read(), "abc")


@unittest.skipUnless(CAN_RUN_VM, "needs root, /dev/kvm and TINYVMM_GUEST_DIR/TINYVMM_ROOTFS")
class WithVMJailed(WithVM):
    """Every case above again with the VM jailed: the job runs in the
    jailed child, the object comes from the process outside."""
    JAIL = True


if __name__ == "__main__":
    unittest.main()
