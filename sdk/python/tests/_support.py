"""Shared test set-up: import the SDK from this tree, start the fake daemon (a TEST DOUBLE)."""
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PKG_ROOT = os.path.dirname(HERE)
if PKG_ROOT not in sys.path:
    sys.path.insert(0, PKG_ROOT)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from fake_server import FakeDaemon  # noqa: E402


class FakeDaemonTest(unittest.TestCase):
    """Each test gets a fresh fake daemon; ``self.sock`` is its socket path."""

    def setUp(self) -> None:
        self.fake = FakeDaemon().start()
        self.sock = self.fake.socket_path
        self.addCleanup(self.fake.stop)
