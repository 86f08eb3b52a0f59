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
import urllib.parse
from typing import Any, Mapping

from ._http import (DEFAULT_SOCKET, BadRequest, Client, CommandExitError, Conflict, ExecNotFound,
                    Forbidden, GuestError, InsufficientStorage, NotFound, NotImplementedByServer, PayloadTooLarge,
                    QuotaExceeded, SandboxExpired, SandboxNotFound, ServiceUnavailable, TemplateNotFound,
                    TimeoutError, TinyvmmError, WarmupFailed, resolve_socket_path)
from .commands import CommandHandle, CommandResult, Commands
from .files import EntryInfo, Files, ReadStream, WriteInfo
from .sandbox import Sandbox, SandboxInfo, _network

__version__ = "0.3.0"  # the project's (vmm/core/version.h): test_sdk checks

__all__ = [
    "Sandbox", "SandboxInfo", "Commands", "CommandResult", "CommandHandle", "Files", "EntryInfo",
    "WriteInfo", "ReadStream", "Client", "DEFAULT_SOCKET", "resolve_socket_path",
    "TinyvmmError", "BadRequest", "Forbidden", "NotFound", "SandboxNotFound", "ExecNotFound", "TemplateNotFound", "Conflict",
    "SandboxExpired", "PayloadTooLarge", "WarmupFailed", "QuotaExceeded", "ServiceUnavailable",
    "NotImplementedByServer", "GuestError", "InsufficientStorage", "TimeoutError",
    "CommandExitError", "health", "version", "pool", "set_pool", "templates", "get_template",
    "delete_template", "build_template",
]

# The public names say where to import them from: a traceback reads
# tinyvmm.ServiceUnavailable, not the private tinyvmm._http one.
for _name in __all__:
    _obj = globals().get(_name)
    if isinstance(_obj, type) and _obj.__module__.startswith("tinyvmm."):
        _obj.__module__ = "tinyvmm"
del _name, _obj


def health(socket_path: "str | None" = None) -> dict:
    """``GET /v1/health``: ``{"status": "ok", "sandboxes": N, "problems": []}``;
    ``"status": "degraded"`` with one line per reason in ``problems`` when
    no sandbox can start (no usable ``/dev/kvm``, the daemon's helper gone)."""
    return Client(socket_path).call("GET", "/health")


def version(socket_path: "str | None" = None) -> dict:
    """``GET /v1/version``: ``{"version": "x.y.z", "api": "v1"}``."""
    return Client(socket_path).call("GET", "/version")


def pool(template: str = "default", socket_path: "str | None" = None) -> dict:
    """``GET /v1/templates/{template}/pool``: the warm pool (``size``,
    ``ready``, ``starting``, ``hits``, ``misses``, ``problems`` (why it
    cannot fill now, as :func:`health` says; empty when it can),
    ``create_latency``, and ``pause_time``/``pause_size`` of the
    template's sandboxes' pauses)."""
    return Client(socket_path).call("GET", "/templates/%s/pool" % urllib.parse.quote(template, safe=""))


def set_pool(size: int, template: str = "default", socket_path: "str | None" = None) -> dict:
    """``PUT /v1/templates/{template}/pool``: keep ``size`` sandboxes
    restored ahead of creates (root or the daemon's uid; else
    :class:`Forbidden`). Returns the pool as :func:`pool` does."""
    return Client(socket_path).call("PUT", "/templates/%s/pool" % urllib.parse.quote(template, safe=""),
                                    json_body={"size": size})


def templates(socket_path: "str | None" = None) -> list:
    """``GET /v1/templates``: the caller's custom templates (``default`` always
    exists and is not listed), each ``{"name", "created_at", "from_sandbox",
    "cpus", "memory_mib", "memory_kib", "network", "create_latency",
    "pause_time", "pause_size"}`` (the figures as :func:`pool` has them).  Make one with
    :meth:`Sandbox.save_as_template`; start from one with
    ``Sandbox.create(template=name)``."""
    return Client(socket_path).call("GET", "/templates").get("templates", [])


def build_template(name: str, warmup: str, *, cpus: "int | None" = None, memory_mib: "int | None" = None,
                   timeout: "int | None" = None, network: "bool | Mapping[str, Any] | None" = None,
                   socket_path: "str | None" = None, request_timeout: "float | None" = None) -> dict:
    """``POST /v1/templates {name, warmup}``: the daemon runs ``sh -c warmup``
    as root in a new sandbox of the default template (``cpus``, ``memory_mib``;
    no network unless ``network``, as :meth:`Sandbox.create`'s: then the
    template is networked and every create from it needs ``network=True``
    too), and once it exits 0 saves that sandbox as the template ``name``
    and ends it.  ``timeout``: the warm-up's, in seconds (the
    daemon's default: 600); ``request_timeout`` (default ``timeout`` + 900 s)
    bounds the wait for the answer.  The warm-up runs as root in ``/root``:
    ``chown`` what the sandbox user should own, and wait in it until a
    server it starts answers.  Returns the template as :func:`get_template`.

    :class:`WarmupFailed` (422) when the warm-up exits non-zero or times out
    (nothing is saved); :class:`Conflict` if the name exists or is being
    built; :class:`BadRequest`, :class:`QuotaExceeded` and
    :class:`ServiceUnavailable` as for a create."""
    if request_timeout is None:  # the warm-up's, a create and the save
        request_timeout = (timeout or 600) + 900.0
    body = {"name": name, "warmup": warmup}
    for k, v in (("cpus", cpus), ("memory_mib", memory_mib), ("timeout_s", timeout),
                 ("network", _network(network))):
        if v is not None:
            body[k] = v
    return Client(socket_path).call("POST", "/templates", json_body=body, timeout=request_timeout)


def get_template(name: str, socket_path: "str | None" = None) -> dict:
    """``GET /v1/templates/{name}``: one of the caller's templates, else
    :class:`TemplateNotFound` (another uid's is not found either)."""
    return Client(socket_path).call("GET", "/templates/%s" % urllib.parse.quote(name, safe=""))


def delete_template(name: str, socket_path: "str | None" = None) -> bool:
    """``DELETE /v1/templates/{name}``: True if it was there, False if the caller
    has no template by that name.  Sandboxes made from it run on."""
    try:
        Client(socket_path).call("DELETE", "/templates/%s" % urllib.parse.quote(name, safe=""))
    except TemplateNotFound:
        return False
    return True
