"""`tinyvmm image build`'s exit statuses, as its --help gives them: 0
built, 125 not built (the build script said why), 64 a wrong command line.
Only what fails before anything is built: no network, no debootstrap."""
import os
import subprocess
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINYVMM = os.environ.get("TINYVMM", os.path.join(ROOT, "tinyvmm"))


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

    def test_help_gives_the_table(self):
        p = self.build("--help")
        self.assertEqual(p.returncode, 0)
        self.assertIn(b"Exit status: 0 built, 125", p.stdout)


if __name__ == "__main__":
    unittest.main()
