"""Pause and resume of a long-lived VM (issue 17): `tinyvmm run --vsock-uds
PATH --pause-to DIR` saves the VM into DIR on SIGUSR1 and ends; `tinyvmm run
--snapshot DIR` resumes it with its files and processes as they were.

A file and a background counter in the guest must survive ten pause/resume
rounds in a row (two when jailed) (each round appends to the file), the VMM process must be
gone after each pause, and a pause that cannot be written leaves the VM
running. The VM is restored from the template, so each pause is a diff
against it: its memory file holds the pages changed since (at most twice
the private pages of guest RAM the VMM had just before the first pause,
and far below RAM), whatever the round. The guest's clock does not count
the time a pause was stored. Needs root and /dev/kvm (else
skipped); the guest as in test_run_json.py. Prints each diff's size.
Run: python3 -m unittest discover -s tests/batch
"""
import os
import re
import shutil
import struct
import signal
import socket
import subprocess
import tempfile
import time
import unittest

from test_run_json import CAN_RUN_VM, TINYVMM, env, setUpModule, tearDownModule  # noqa: F401 (the guest)

# Started in a session of its own; the exec waits until it counts (the
# agent ends the exec's process group with it, and setsid takes a moment).
COUNTER = "setsid sh -c 'n=0; while :; do n=$((n+1)); echo $n > /tmp/count; sleep 1; done' " \
          "</dev/null >/dev/null 2>&1 & while [ ! -e /tmp/count ]; do sleep 0.2; done"
RAM = 256 << 20  # the default --mem
STORED_S = 30  # a paused VM's time on disk: more than RCU's 21 s stall timeout


def diff_pages(snap):
    """The page count of the diff memory file in snap (its header)."""
    with open(os.path.join(snap, "mem"), "rb") as f:
        head = f.read(32)
    assert head[:8] == b"TVMDIFF\n", "%s/mem is not a diff: %r" % (snap, head[:8])
    return struct.unpack_from("<Q", head, 24)[0]


def guest_private_bytes(pid):
    """Private anonymous bytes of the VMM's guest RAM mapping (the pages
    written since the restore), from /proc/PID/smaps."""
    with open("/proc/%d/smaps" % pid) as f:
        text = f.read()
    for vma in re.split(r"\n(?=[0-9a-f]+-[0-9a-f]+ )", text):
        size = re.search(r"^Size:\s+(\d+) kB", vma, re.M)
        if size and int(size.group(1)) << 10 == RAM:
            return int(re.search(r"^Anonymous:\s+(\d+) kB", vma, re.M).group(1)) << 10
    raise AssertionError("no %d MiB mapping in /proc/%d/smaps" % (RAM >> 20, pid))


@unittest.skipUnless(CAN_RUN_VM, "needs root, /dev/kvm and TINYVMM_GUEST_DIR")
class PauseResume(unittest.TestCase):
    JAIL = False
    ROUNDS = 10
    
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="tinyvmm-pause-")
        self.sock = os.path.join(self.dir, "v.sock")
        self.vm = None

    def tearDown(self):
        if self.vm and self.vm.poll() is None:
            self.vm.kill()
            self.vm.wait()
        shutil.rmtree(self.dir, ignore_errors=True)

    def start(self, *args):
        argv = [TINYVMM, "run", *(["--jail"] if self.JAIL else []), "--vsock-uds", self.sock, *args]
        self.log = open(os.path.join(self.dir, "vmm.log"), "ab")
        self.vm = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log, env=env())
        self.log.close()
        deadline = time.monotonic() + 900  # the first run may make the template
        while not os.path.exists(self.sock):
            self.assertIsNone(self.vm.poll(), self.log_text())
            self.assertLess(time.monotonic(), deadline, "no socket: " + self.log_text())
            time.sleep(0.1)

    def log_text(self):
        with open(os.path.join(self.dir, "vmm.log"), "rb") as f:
            return f.read().decode(errors="replace")[-2000:]

    def sh(self, script):
        p = subprocess.run([TINYVMM, "exec", "--vsock-uds", self.sock, "--", "sh", "-c", script],
                           capture_output=True, timeout=300)
        self.assertEqual(p.returncode, 0, "%r: %r %r\n%s" % (script, p.stdout, p.stderr, self.log_text()))
        return p.stdout.decode()

    def count(self):
        return int(self.sh("cat /tmp/count").strip() or 0)

    def pause(self, into):
        self.vm.send_signal(signal.SIGUSR1)
        rc = self.vm.wait(120)
        self.assertEqual(rc, 0, self.log_text())
        self.assertIn("paused into " + into, self.log_text())
        # the VMM is gone: nobody serves its socket
        s = socket.socket(socket.AF_UNIX)
        with self.assertRaises(OSError):
            s.connect(self.sock)
        s.close()

    def test_files_and_processes_survive_ten_rounds(self):
        snap = os.path.join(self.dir, "p0")
        self.start("--pause-to", snap)
        self.sh("echo round0 > /tmp/data; " + COUNTER)
        deadline = time.monotonic() + 120
        while self.count() < 2:
            self.assertLess(time.monotonic(), deadline, "the counter does not count")
            time.sleep(0.5)
        lines = ["round0"]
        for i in range(1, self.ROUNDS + 1):
            before = self.count()
            # unjailed, Popen's child is the VMM (jailed, it is in a PID
            # namespace of its own below it)
            dirtied = None if self.JAIL or i > 1 else guest_private_bytes(self.vm.pid)
            self.pause(snap)
            mem = os.stat(os.path.join(snap, "mem"))
            pages = diff_pages(snap)
            print("\n  round %d: paused into a diff of %d pages (%.1f MiB, file %.1f MiB)%s"
                  % (i, pages, pages / 256, mem.st_size / (1 << 20),
                     "" if dirtied is None else ", guest RAM written %.1f MiB" % (dirtied / (1 << 20))), end="")
            self.assertLess(mem.st_size, RAM // 4, "round %d: the diff is not far below RAM" % i)
            if dirtied is not None:
                # what the VMM itself writes during the save (vsock rings) is a few pages
                self.assertLessEqual(pages * 4096, 2 * dirtied + (1 << 20))
            nxt = os.path.join(self.dir, "p%d" % i)
            self.start("--snapshot", snap, "--pause-to", nxt)
            out = self.sh("cat /tmp/data; echo round%d >> /tmp/data" % i)
            self.assertEqual(out.split(), lines, "round %d: the file" % i)
            lines.append("round%d" % i)
            # the counter goes on from where it was
            after = self.count()
            self.assertGreaterEqual(after, before, "round %d: the counter went back" % i)
            deadline = time.monotonic() + 60
            while self.count() <= after:
                self.assertLess(time.monotonic(), deadline, "round %d: the counter stopped" % i)
                time.sleep(0.5)
            shutil.rmtree(snap)  # the running VM maps nxt's memory, not this one's
            snap = nxt
        print()

    def test_a_pause_that_cannot_be_written_leaves_the_vm_running(self):
        blocked = os.path.join(self.dir, "file")
        open(blocked, "w").close()  # a file where the directory should be made
        self.start("--pause-to", blocked)
        self.sh("echo kept > /tmp/data")
        self.vm.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 60
        while "pause:" not in self.log_text():
            self.assertLess(time.monotonic(), deadline, self.log_text())
            time.sleep(0.2)
        self.assertIsNone(self.vm.poll())
        self.assertEqual(self.sh("cat /tmp/data"), "kept\n")
        self.assertEqual(len([ln for ln in self.log_text().splitlines() if "pause:" in ln]), 1)

    def test_the_guest_clock_does_not_count_the_time_paused(self):
        # On kvm_pvm the guest's TSC is the host's: a guest clocked by it
        # jumped by the time its snapshot was stored (RCU stall reports,
        # every timer due at once, a restored agent slow to answer).
        snap = os.path.join(self.dir, "p0")
        self.start("--pause-to", snap)
        t0 = time.monotonic()
        u0 = float(self.sh("cat /proc/uptime").split()[0])
        self.pause(snap)
        time.sleep(STORED_S)
        self.start("--snapshot", snap)
        u1 = float(self.sh("cat /proc/uptime").split()[0])
        host = time.monotonic() - t0
        print("\n  guest uptime %.1f s -> %.1f s over %.1f s on the host, %d s of them stored"
              % (u0, u1, host, STORED_S), end="")
        # it ran for host - STORED_S seconds at most; half the margin
        self.assertLess(u1 - u0, host - STORED_S / 2, "the guest's clock counted the time its snapshot was stored")

    def test_pause_to_needs_a_waiting_vm(self):
        p = subprocess.run([TINYVMM, "run", "--pause-to", os.path.join(self.dir, "x"), "--", "true"],
                           capture_output=True, env=env(), timeout=60)
        self.assertEqual(p.returncode, 64)
        self.assertIn("--pause-to belongs to", p.stderr.decode())


class PauseResumeJailed(PauseResume):
    JAIL = True
    ROUNDS = 2  # the jail's staging of the snapshot; ten rounds are the class above
    test_the_guest_clock_does_not_count_the_time_paused = None  # the VM's clock is the jail's alike

    def test_a_pause_that_cannot_be_written_leaves_the_vm_running(self):
        # jailed, DIR is made (or refused) before the VM starts
        blocked = os.path.join(self.dir, "file")
        open(blocked, "w").close()
        p = subprocess.run([TINYVMM, "run", "--jail", "--vsock-uds", self.sock, "--pause-to", blocked],
                           capture_output=True, env=env(), timeout=300)
        self.assertEqual(p.returncode, 125)
        self.assertEqual(p.stderr.decode().count("is not a directory"), 1, p.stderr)


if __name__ == "__main__":
    unittest.main()
