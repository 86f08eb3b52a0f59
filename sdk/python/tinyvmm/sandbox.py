"""Sandboxes: create, connect, list, kill, extend, pause, resume, fork, save as a template; a context manager that kills."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Type, Union

from ._http import Client, SandboxNotFound, TinyvmmError
from .commands import Commands
from .files import Files

__all__ = ["Sandbox", "SandboxInfo"]


@dataclass
class SandboxInfo:
    """A sandbox as the service describes it (never carries the access token)."""

    id: str
    state: str
    template: Optional[str] = None
    created_at: Optional[str] = None
    expires_at: Optional[str] = None
    ended_at: Optional[str] = None
    end_reason: Optional[str] = None
    cpus: Optional[int] = None
    memory_mib: Optional[int] = None
    idle_timeout_s: Optional[int] = None
    from_pool: Optional[bool] = None  # its create took a sandbox of the daemon's warm pool
    forked_from: Optional[str] = None  # the id of the sandbox it was forked from (Sandbox.fork), or None
    # with network.enabled: {"tap", "host_address", "address"}: its TAP on the host,
    # the host's end of its /30 and its eth0's address; None without a network
    network: Optional[Dict[str, Optional[str]]] = None
    metadata: Dict[str, str] = field(default_factory=dict)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SandboxInfo":
        return cls(id=d["id"], state=d.get("state", ""), template=d.get("template"),
                   created_at=d.get("created_at"), expires_at=d.get("expires_at"),
                   ended_at=d.get("ended_at"), end_reason=d.get("end_reason"), cpus=d.get("cpus"),
                   memory_mib=d.get("memory_mib"), idle_timeout_s=d.get("idle_timeout_s"),
                   from_pool=d.get("from_pool"), forked_from=d.get("forked_from"),
                   network=dict(d["network"]) if d.get("network") else None,
                   metadata=dict(d.get("metadata") or {}),
                   raw={k: v for k, v in d.items() if k != "access_token"})


class _hybrid:
    """``Sandbox.kill(id)`` on the class, ``sb.kill()`` on an instance."""

    def __init__(self, inst: Callable[..., Any], cls_: Callable[..., Any]) -> None:
        self.inst, self.cls_ = inst, cls_
        functools.update_wrapper(self, inst)

    def __get__(self, obj: Any, owner: Any) -> Callable[..., Any]:
        if obj is None:
            return functools.partial(self.cls_, owner)
        return functools.partial(self.inst, obj)


def _secs(v: Optional[float]) -> Optional[int]:
    return None if v is None else int(math.ceil(v))


def _network(v: Union[bool, Mapping[str, Any], None]) -> Optional[Dict[str, Any]]:
    # True is the common case ({"enabled": True}: the default egress rules);
    # anything else that is not a mapping is refused here, by name, rather
    # than as a bare "object is not iterable" from dict().
    if v is None or v is False:
        return None
    if v is True:
        return {"enabled": True}
    if isinstance(v, Mapping):
        return dict(v) if v else None
    raise TypeError("network: expected True, False, None or a mapping "
                    "{\"enabled\": bool, \"allow_out\": [...], \"dns\": [...]}, not %s" % type(v).__name__)


class Sandbox:
    """A microVM sandbox of ``tinyvmm serve``.

    >>> with Sandbox.create(timeout=300) as sb:
    ...     sb.files.write("/tmp/task.py", "print(6*7)")
    ...     r = sb.commands.run("python3 /tmp/task.py", timeout=30)

    ``socket_path``: the daemon's Unix socket (else ``$TINYVMM_SOCKET``,
    else ``/run/tinyvmm/api.sock``).
    """

    def __init__(self, info: Mapping[str, Any], *, client: Client,
                 access_token: Optional[str] = None) -> None:
        self._info = SandboxInfo.from_json(info)
        self.id: str = self._info.id
        self.access_token: Optional[str] = access_token or info.get("access_token")
        self._client = client.with_token(self.access_token) if self.access_token else client
        self.commands = Commands(self)
        self.files = Files(self)

    def __repr__(self) -> str:
        return f"<Sandbox {self.id} {self._info.state}>"

    # -- class-level ------------------------------------------------------

    @classmethod
    def create(cls, template: Optional[str] = None, timeout: Optional[float] = 300,
               idle_timeout: Optional[float] = None, cpus: Optional[int] = None,
               memory_mib: Optional[int] = None, envs: Optional[Mapping[str, str]] = None,
               secret_envs: Optional[Mapping[str, str]] = None,
               metadata: Optional[Mapping[str, str]] = None,
               network: Union[bool, Mapping[str, Any], None] = None, *, socket_path: Optional[str] = None,
               request_timeout: Optional[float] = 300.0) -> "Sandbox":
        """Start a sandbox; answers once its guest agent is up.

        ``timeout``: its lifetime in seconds (``set_timeout`` to change);
        ``idle_timeout``: end it after that long without requests or running
        commands.  ``envs``/``secret_envs`` are in every command's environment
        (secret values never appear in logs or listings).  ``network``:
        ``True`` (a network with the default egress rules: anywhere but other
        sandboxes) or ``{"enabled": bool, "allow_out": [...], "dns": [...]}``.
        """
        body: Dict[str, Any] = {}
        for k, v in (("template", template), ("timeout_s", _secs(timeout)),
                     ("idle_timeout_s", _secs(idle_timeout)), ("cpus", cpus), ("memory_mib", memory_mib),
                     ("envs", dict(envs) if envs else None),
                     ("secret_envs", dict(secret_envs) if secret_envs else None),
                     ("metadata", dict(metadata) if metadata else None),
                     ("network", _network(network))):
            if v is not None:
                body[k] = v
        client = Client(socket_path)
        d = client.call("POST", "/sandboxes", json_body=body, timeout=request_timeout)
        return cls(d, client=client)

    @classmethod
    def connect(cls, sandbox_id: str, access_token: Optional[str] = None, *,
                socket_path: Optional[str] = None) -> "Sandbox":
        """Attach to an existing sandbox (yours, or any with its access token)."""
        client = Client(socket_path, access_token=access_token)
        d = client.call("GET", f"/sandboxes/{sandbox_id}")
        return cls(d, client=client, access_token=access_token)

    @classmethod
    def list(cls, state: Optional[str] = None, metadata: Optional[Mapping[str, str]] = None, *,
             socket_path: Optional[str] = None) -> List[SandboxInfo]:
        """Your sandboxes, optionally only ``state="running"|"paused"|"ended"`` and those
        whose metadata has every given key/value."""
        q: List[Any] = []
        if state:
            q.append(("state", state))
        for k, v in (metadata or {}).items():
            q.append((f"metadata.{k}", v))
        d = Client(socket_path).call("GET", "/sandboxes", query=q)
        return [SandboxInfo.from_json(s) for s in d.get("sandboxes", [])]

    # -- instance ---------------------------------------------------------

    def get_info(self) -> SandboxInfo:
        """The sandbox's current description (state, expires_at, end_reason...)."""
        self._info = SandboxInfo.from_json(self._client.call("GET", f"/sandboxes/{self.id}"))
        return self._info

    @property
    def info(self) -> SandboxInfo:
        """The last known description (see :meth:`get_info`)."""
        return self._info

    def is_running(self) -> bool:
        try:
            return self.get_info().state == "running"
        except SandboxNotFound:
            return False

    def _kill_inst(self) -> bool:
        """End the sandbox. True if it was there to kill (ended ones count), False if unknown."""
        try:
            self._client.call("DELETE", f"/sandboxes/{self.id}")
        except SandboxNotFound:
            return False
        return True

    def _kill_cls(cls, sandbox_id: str, access_token: Optional[str] = None, *,
                  socket_path: Optional[str] = None) -> bool:
        try:
            Client(socket_path, access_token=access_token).call("DELETE", f"/sandboxes/{sandbox_id}")
        except SandboxNotFound:
            return False
        return True

    kill = _hybrid(_kill_inst, _kill_cls)
    """``sb.kill()`` or ``Sandbox.kill(sandbox_id, access_token=None)``: end a sandbox."""

    def set_timeout(self, timeout: float) -> str:
        """End the sandbox ``timeout`` seconds from now (may shorten; capped by the
        server). Returns the new ``expires_at``."""
        d = self._client.call("POST", f"/sandboxes/{self.id}/timeout", json_body={"timeout_s": _secs(timeout)})
        self._info.expires_at = d.get("expires_at")
        return self._info.expires_at or ""

    def pause(self, *, request_timeout: Optional[float] = 300.0) -> SandboxInfo:
        """Save the sandbox (files, processes, memory) and end its VM: it uses no
        CPU nor memory and its lifetime stops until :meth:`resume`.  Commands must
        have ended first.  :class:`Conflict` (409) while commands run or when paused
        already.  Returns (and keeps as :attr:`info`) the
        sandbox, ``state == "paused"``."""
        self._info = SandboxInfo.from_json(self._client.call("POST", f"/sandboxes/{self.id}/pause",
                                                             timeout=request_timeout))
        return self._info

    def resume(self, *, request_timeout: Optional[float] = 300.0) -> SandboxInfo:
        """Restore a paused sandbox (its files and processes as they were) with a new
        lifetime of its timeout from now.  :class:`Conflict` (409) if it is not
        paused; :class:`QuotaExceeded` / :class:`ServiceUnavailable` as a create.
        Returns (and keeps as :attr:`info`) the sandbox, ``state == "running"``."""
        self._info = SandboxInfo.from_json(self._client.call("POST", f"/sandboxes/{self.id}/resume",
                                                             timeout=request_timeout))
        return self._info

    def fork(self, count: int = 1, timeout: Optional[float] = None, *,
             request_timeout: Optional[float] = 300.0) -> List["Sandbox"]:
        """``count`` (1..8) new sandboxes that start from this one's files and
        running processes now (the parent is paused for the copy and runs on).
        Each has its own id, access token and lifetime (``timeout`` seconds,
        default the parent's); ``info.forked_from`` is this sandbox's id.  Only the
        owner may fork (a token holder gets :class:`Forbidden`); :class:`Conflict`
        (409) while commands run; a paused sandbox is forked from its snapshot
        and stays paused; all or nothing."""
        body: Dict[str, Any] = {"count": count}
        if timeout is not None:
            body["timeout_s"] = _secs(timeout)
        d = self._client.call("POST", f"/sandboxes/{self.id}/fork", json_body=body, timeout=request_timeout)
        # each child gets a client of its own: this one may carry the parent's token,
        # which does not open a child; the child's own access_token (in its answer) does
        base = self._client.with_token(None)
        return [type(self)(s, client=base) for s in d.get("sandboxes", [])]

    def save_as_template(self, name: str, *, request_timeout: Optional[float] = 300.0) -> Dict[str, Any]:
        """Save this sandbox (its files and running processes) as the custom
        template ``name`` (1 to 63 of ``a-z 0-9 - _ .``, a letter or digit first,
        not ``default``); ``Sandbox.create(template=name)`` then starts from it,
        with the template's ``cpus`` and ``memory_mib``.  The sandbox is paused
        for the copy and runs on.  Returns the template ``{"name", "created_at",
        "from_sandbox", "cpus", "memory_mib", "memory_kib", "network"}``
        (``network``: saved from a networked sandbox, so every create from it
        needs ``network={"enabled": True}``).

        Only the owner's uid may (holding the access token does not do:
        :class:`SandboxNotFound`); :class:`BadRequest` for a bad name;
        :class:`Conflict` (409) if the name exists, while commands run or when
        paused; :class:`QuotaExceeded` past 64 templates."""
        # ownership is by uid: the token (if any) is not sent, it would not count
        return self._client.with_token(None).call("POST", "/templates",
                                                  json_body={"name": name, "from_sandbox": self.id},
                                                  timeout=request_timeout)

    def logs(self) -> Iterator[Dict[str, Any]]:
        """The sandbox's audit log, one record per item."""
        return self._client.open("GET", f"/sandboxes/{self.id}/logs",
                                 accept="application/x-ndjson").iter_ndjson()

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException], tb: Any) -> None:
        try:
            self.kill()
        except TinyvmmError:
            if exc_type is None:
                raise  # don't hide the body's own exception behind a failed kill
