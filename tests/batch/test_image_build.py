"""`tinyvmm image build`'s exit statuses, as its --help gives them: 0
built, 125 not built (the build script said why), 64 a wrong command line.
Only what fails before anything is built: no network, no debootstrap."""
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINYVMM = os.environ.get("TINYVMM", os.path.join(ROOT, "tinyvmm"))


def running(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            return "zombie" not in f.read()
    except OSError:
        return False


class ImageBuildStatus(unittest.TestCase):
    def build(self, *args):
        return subprocess.run([TINYVMM, "image", "build", *args], capture_output=True, timeout=120)

    def test_a_build_that_fails_is_125(self):
        # the script's own status (1) used to be tinyvmm's: not in the table
        with tempfile.TemporaryDirectory() as d:
            p = self.build("--out", os.path.join(d, "i.ext4"), "--copy", "/nonexistent-tvm:/x")
            self.assertEqual(p.returncode, 125, p.stderr)
            self.assertIn(b"/nonexistent-tvm", p.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "i.ext4")))

    def test_a_wrong_command_line_is_64(self):
        p = self.build("--packages", "jq")
        self.assertEqual(p.returncode, 64, p.stderr)
        self.assertIn(b"needs --out FILE", p.stderr)

    def test_a_stop_signal_ends_the_build_too(self):
        # a fake build tree: tinyvmm, tools/build-rootfs.sh (writes its pid,
        # then waits), build/guest/tinyvmm-agent
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "tools"))
            os.makedirs(os.path.join(d, "build", "guest"))
            shutil.copy(TINYVMM, os.path.join(d, "tinyvmm"))
            open(os.path.join(d, "build", "guest", "tinyvmm-agent"), "w").close()
            pidf = os.path.join(d, "script.pid")
            with open(os.path.join(d, "tools", "build-rootfs.sh"), "w") as f:
                f.write("echo $$ > %s.tmp; mv %s.tmp %s; exec sleep 600\n" % (pidf, pidf, pidf))
            for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGTERM):
                with self.subTest(sig=sig):
                    p = subprocess.Popen([os.path.join(d, "tinyvmm"), "image", "build", "--out",
                                          os.path.join(d, "i.ext4")], stderr=subprocess.PIPE)
                    deadline = time.monotonic() + 60
                    while not os.path.exists(pidf) and time.monotonic() < deadline:
                        time.sleep(0.02)
                    with open(pidf) as f:
                        script = int(f.read())
                    os.unlink(pidf)
                    p.send_signal(sig)
                    self.assertEqual(p.wait(60), 128 + sig, p.stderr.read())
                    p.stderr.close()
                    # the script got it too: no build left running as root
                    while running(script) and time.monotonic() < deadline:
                        time.sleep(0.02)
                    self.assertFalse(running(script), "the script runs on")

    def test_help_gives_the_table(self):
        p = self.build("--help")
        self.assertEqual(p.returncode, 0)
        self.assertIn(b"Exit status: 0 built, 125", p.stdout)


if __name__ == "__main__":
    unittest.main()
