"""tinyvmm: the Python SDK of ``tinyvmm serve`` (microVM sandboxes).

>>> from tinyvmm import Sandbox
>>> with Sandbox.create(timeout=300) as sb:
...     sb.files.write("/tmp/task.py", "import json; print(json.dumps({'total': 25}))")
...     r = sb.commands.run("python3 /tmp/task.py", timeout=30)
...     print(r.exit_code, r.stdout)

Standard library only; talks HTTP/1.1 + JSON to the daemon's Unix socket
(argument ``socket_path``, else ``$TINYVMM_SOCKET``, else
``/run/tinyvmm/api.sock``).
"""
from ._http import (DEFAULT_SOCKET, BadRequest, Client, CommandExitError, Conflict, ExecNotFound,
                    GuestError, InsufficientStorage, NotFound, NotImplementedByServer, PayloadTooLarge,
                    QuotaExceeded, SandboxExpired, SandboxNotFound, ServiceUnavailable, TimeoutError,
                    TinyvmmError, resolve_socket_path)
from .commands import CommandHandle, CommandResult, Commands
from .files import EntryInfo, Files, ReadStream, WriteInfo
from .sandbox import Sandbox, SandboxInfo

__version__ = "0.1.0"

__all__ = [
    "Sandbox", "SandboxInfo", "Commands", "CommandResult", "CommandHandle", "Files", "EntryInfo",
    "WriteInfo", "ReadStream", "Client", "DEFAULT_SOCKET", "resolve_socket_path",
    "TinyvmmError", "BadRequest", "NotFound", "SandboxNotFound", "ExecNotFound", "Conflict",
    "SandboxExpired", "PayloadTooLarge", "QuotaExceeded", "ServiceUnavailable",
    "NotImplementedByServer", "GuestError", "InsufficientStorage", "TimeoutError",
    "CommandExitError", "health", "version",
]


def health(socket_path: "str | None" = None) -> dict:
    """``GET /v1/health``: ``{"status": "ok", "sandboxes": N}``."""
    return Client(socket_path).call("GET", "/health")


def version(socket_path: "str | None" = None) -> dict:
    """``GET /v1/version``: ``{"version": "x.y.z", "api": "v1"}``."""
    return Client(socket_path).call("GET", "/version")
