"""Commands in a sandbox: ``sb.commands.run(...)``, background handles, reconnect."""
from __future__ import annotations

import codecs
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Sequence, Union

from ._http import (CommandExitError, Conflict, GuestError, NotImplementedByServer, SandboxExpired,
                    SandboxNotFound, TimeoutError, TinyvmmError, b64decode, b64encode)

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox

OutputCallback = Callable[[str], Any]

__all__ = ["CommandResult", "CommandHandle", "Commands", "OutputCallback"]


@dataclass
class CommandResult:
    """What a command did.  A non-zero exit or a timeout is a result, not an error.

    ``truncated`` is true when either stream was capped (``max_output_bytes``);
    ``duration`` is the wall time in seconds measured in the guest;
    ``oom_killed`` and ``pids_limited`` say the command hit its ``memory_mib``
    or ``pids_max`` limit.
    """

    exit_code: int
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    duration: float = 0.0
    signal: int = 0
    exec_id: Optional[str] = None
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    wall_ms: int = 0
    cpu_ms: int = 0
    max_rss_kib: int = 0
    oom_killed: bool = False
    pids_limited: bool = False
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        """Exit code 0, no signal, no timeout."""
        return self.exit_code == 0 and not self.signal and not self.timed_out

    @classmethod
    def from_json(cls, d: Mapping[str, Any], stdout: Optional[str] = None,
                  stderr: Optional[str] = None) -> "CommandResult":
        so_t = bool(d.get("stdout_truncated", False))
        se_t = bool(d.get("stderr_truncated", False))
        wall = int(d.get("wall_ms") or 0)
        return cls(
            exit_code=int(d.get("exit_code") if d.get("exit_code") is not None else -1),
            stdout=d.get("stdout", "") if stdout is None else stdout,
            stderr=d.get("stderr", "") if stderr is None else stderr,
            timed_out=bool(d.get("timed_out", False)),
            truncated=so_t or se_t,
            duration=wall / 1000.0,
            signal=int(d.get("signal") or 0),
            exec_id=d.get("exec_id"),
            stdout_truncated=so_t,
            stderr_truncated=se_t,
            wall_ms=wall,
            cpu_ms=int(d.get("cpu_ms") or 0),
            max_rss_kib=int(d.get("max_rss_kib") or 0),
            oom_killed=bool(d.get("oom_killed", False)),
            pids_limited=bool(d.get("pids_limited", False)),
            raw=dict(d),
        )


class _Collector:
    """Turns output events into text, callbacks and an offset to resume from."""

    def __init__(self, on_stdout: Optional[OutputCallback], on_stderr: Optional[OutputCallback],
                 since: int = 0) -> None:
        self.on = {"stdout": on_stdout, "stderr": on_stderr}
        self.dec = {k: codecs.getincrementaldecoder("utf-8")("replace") for k in ("stdout", "stderr")}
        self.parts: Dict[str, List[str]] = {"stdout": [], "stderr": []}
        self.offset = since  # output bytes (both streams) seen so far

    def feed(self, ev: Mapping[str, Any]) -> None:
        kind = ev.get("type")
        data = b64decode(ev.get("data", ""))
        off = int(ev.get("offset", self.offset))
        end = off + len(data)
        if end <= self.offset:
            return  # already seen (replay)
        if off < self.offset:
            data = data[self.offset - off:]  # the first replayed event may begin before since
        self.offset = end
        self._emit(kind, self.dec[kind].decode(data))

    def _emit(self, kind: Any, text: str) -> None:
        if not text:
            return
        self.parts[kind].append(text)
        cb = self.on.get(kind)
        if cb is not None:
            cb(text)

    def finish(self) -> None:
        for k in ("stdout", "stderr"):
            self._emit(k, self.dec[k].decode(b"", final=True))

    def text(self, kind: str) -> str:
        return "".join(self.parts[kind])


def _stream_error(sandbox: "Sandbox", ev: Mapping[str, Any]) -> TinyvmmError:
    err = str(ev.get("error") or "error")
    msg = str(ev.get("message") or err)
    if err in ("sandbox_ended", "sandbox_expired"):
        reason = ev.get("end_reason")
        if reason is None:
            try:
                reason = sandbox.get_info().end_reason
            except TinyvmmError:
                reason = None
        return SandboxExpired(msg, end_reason=reason, status=410, error=err, body=dict(ev))
    if err == "guest_error":
        return GuestError(msg, status=502, error=err, body=dict(ev))
    return TinyvmmError(msg, error=err, body=dict(ev))


def _timeout_s(timeout: Optional[float]) -> Optional[int]:
    if timeout is None:
        return None
    if timeout <= 0:
        return 0
    return int(math.ceil(timeout))


class CommandHandle:
    """A command running in the background (``run(..., background=True)`` or
    ``commands.connect(exec_id)``).  It outlives this process: keep
    ``exec_id`` and reconnect later without missing output."""

    def __init__(self, sandbox: "Sandbox", exec_id: str, *, on_stdout: Optional[OutputCallback] = None,
                 on_stderr: Optional[OutputCallback] = None, since: int = 0) -> None:
        self.sandbox = sandbox
        self.exec_id = exec_id
        self._col = _Collector(on_stdout, on_stderr, since)
        self._result: Optional[CommandResult] = None

    def __repr__(self) -> str:
        return f"<CommandHandle {self.exec_id} of {self.sandbox.id}>"

    @property
    def _base(self) -> str:
        return f"/sandboxes/{self.sandbox.id}/execs/{self.exec_id}"

    @property
    def stdout(self) -> str:
        """The stdout received so far by this handle."""
        return self._col.text("stdout")

    @property
    def stderr(self) -> str:
        """The stderr received so far by this handle."""
        return self._col.text("stderr")

    def status(self) -> Dict[str, Any]:
        """``GET .../execs/{eid}``: ``{"exec_id","state","result","error"}``."""
        return self.sandbox._client.call("GET", self._base)

    def is_running(self) -> bool:
        return self.status().get("state") == "running"

    def events(self, since: Optional[int] = None, timeout: Optional[float] = None) -> Iterator[Dict[str, Any]]:
        """The raw event stream (``events?since=N``), replay first then live."""
        s = self._col.offset if since is None else since
        r = self.sandbox._client.open("GET", self._base + "/events", query={"since": s},
                                      accept="application/x-ndjson", timeout=timeout)
        return r.iter_ndjson()

    def wait(self, timeout: Optional[float] = None, *, on_stdout: Optional[OutputCallback] = None,
             on_stderr: Optional[OutputCallback] = None, check: bool = False) -> CommandResult:
        """Follow the output until the command ends; return its result.

        ``timeout`` (seconds) bounds this wait only (raises
        :class:`~tinyvmm.TimeoutError`; the command keeps running).
        Callbacks given here replace those given at start.
        """
        if on_stdout is not None:
            self._col.on["stdout"] = on_stdout
        if on_stderr is not None:
            self._col.on["stderr"] = on_stderr
        if self._result is None:
            self._result = self._follow(timeout)
        if check and not self._result.ok:
            raise CommandExitError(self._result)
        return self._result

    def _follow(self, timeout: Optional[float]) -> CommandResult:
        deadline = None if timeout is None else time.monotonic() + timeout
        drops = 0
        while True:
            remaining = None
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"exec {self.exec_id} still running after {timeout} s")
            # keepalives come every 10 s, so a socket timeout above that means trouble
            sock_t = 60.0 if remaining is None else min(max(remaining, 0.05), 60.0)
            exit_ev: Optional[Dict[str, Any]] = None
            try:
                for ev in self.events(timeout=sock_t):
                    t = ev.get("type")
                    if t in ("stdout", "stderr"):
                        self._col.feed(ev)
                    elif t == "exit":
                        exit_ev = ev
                        break
                    elif t == "error":
                        self._col.finish()
                        raise _stream_error(self.sandbox, ev)
                    if deadline is not None and time.monotonic() >= deadline:
                        raise TimeoutError(f"exec {self.exec_id} still running after {timeout} s")
            except TimeoutError:
                if deadline is not None and time.monotonic() >= deadline - 0.01:
                    raise TimeoutError(f"exec {self.exec_id} still running after {timeout} s") from None
                exit_ev = None  # a stalled connection: reconnect below
            if exit_ev is not None:
                self._col.finish()
                return self._final(exit_ev)
            # the stream ended without an exit event: ask, then reconnect
            st = self.status()
            if st.get("state") != "running":
                self._col.finish()
                if st.get("result"):
                    return self._final(st["result"], authoritative=True)
                err = st.get("error") or {"error": "failed", "message": "exec failed"}
                raise _stream_error(self.sandbox, err)
            drops += 1
            time.sleep(min(0.05 * drops, 1.0))

    def _final(self, ev: Mapping[str, Any], authoritative: bool = False) -> CommandResult:
        if not authoritative:
            # the exit event has no stdout/stderr: the server's result has the full text
            try:
                st = self.status()
                if st.get("result"):
                    return CommandResult.from_json(st["result"])
            except TinyvmmError:
                pass
        d = dict(ev)
        d.setdefault("exec_id", self.exec_id)
        if "stdout" in d:
            return CommandResult.from_json(d)
        return CommandResult.from_json(d, stdout=self.stdout, stderr=self.stderr)

    def kill(self, signal: int = 9) -> None:
        """Send ``signal`` (default SIGKILL) to the command.

        Raises :class:`~tinyvmm.NotImplementedByServer` if this daemon
        cannot signal an exec (501); ``sandbox.kill()`` always works.
        """
        try:
            self.sandbox._client.call("POST", self._base + "/signal", json_body={"signal": int(signal)})
        except NotImplementedByServer as e:
            raise NotImplementedByServer(
                f"this tinyvmm serve cannot signal exec {self.exec_id} (501: {e.message}); "
                "kill the sandbox instead", status=e.status, error=e.error, body=e.body) from None

    def send_stdin(self, data: Union[str, bytes]) -> None:
        """Write to the command's stdin (``POST .../stdin``)."""
        self._stdin(data.encode("utf-8") if isinstance(data, str) else bytes(data), eof=False)

    def close_stdin(self) -> None:
        """Close the command's stdin (``POST .../stdin?eof=1``); a no-op once it has ended."""
        try:
            self._stdin(b"", eof=True)
        except Conflict:
            pass  # the command has ended: its stdin is gone anyway

    def _stdin(self, data: bytes, eof: bool) -> None:
        try:
            self.sandbox._client.call("POST", self._base + "/stdin", query={"eof": 1} if eof else None,
                                      data=data)
        except NotImplementedByServer as e:
            raise NotImplementedByServer(
                f"this tinyvmm serve does not accept stdin for a running exec (501: {e.message}); "
                "pass stdin= to commands.run instead", status=e.status, error=e.error, body=e.body) from None


class Commands:
    """``sb.commands``: run commands in the sandbox."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    def run(self, cmd: Union[str, Sequence[str]], *, args: Optional[Sequence[str]] = None,
            envs: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
            user: Optional[str] = None, timeout: Optional[float] = None,
            stdin: Union[None, bool, str, bytes] = None, on_stdout: Optional[OutputCallback] = None,
            on_stderr: Optional[OutputCallback] = None, background: bool = False,
            check: bool = False, max_output_bytes: Optional[int] = None,
            memory_mib: Optional[int] = None, pids_max: Optional[int] = None,
            request_timeout: Optional[float] = None) -> Any:
        """Run a command and wait for it (or start it in the background).

        ``cmd``: a shell command line (``/bin/sh -c``), or with ``args`` (or
        as a list) an argv run without a shell.  ``user``: ``"sandbox"``
        (uid 1000, the default) or ``"root"``.  ``timeout``: seconds, ended
        by the guest (``result.timed_out``); None: no limit.  ``on_stdout``
        and ``on_stderr`` get text as it comes.  ``stdin``: text or bytes
        given to the command, then end of file; or ``True`` (with
        ``background=True``): stdin stays open for the handle's
        ``send_stdin()`` and ``close_stdin()``.  ``check=True`` raises
        :class:`~tinyvmm.CommandExitError` for a failed command.
        ``memory_mib`` and ``pids_max`` limit the command's own cgroup in the
        guest (``result.oom_killed``, ``result.pids_limited``).

        Returns a :class:`CommandResult`, or with ``background=True`` a
        :class:`CommandHandle` at once.
        """
        body: Dict[str, Any] = {}
        if isinstance(cmd, (list, tuple)):
            body["cmd"] = [str(c) for c in cmd] + [str(a) for a in (args or [])]
        elif args is not None:
            body["cmd"] = [cmd] + [str(a) for a in args]
        else:
            body["shell"] = cmd
        if envs:
            body["envs"] = {str(k): str(v) for k, v in envs.items()}
        if cwd is not None:
            body["cwd"] = cwd
        if user is not None:
            body["user"] = user
        ts = _timeout_s(timeout)
        if ts is not None:
            body["timeout_s"] = ts
        if stdin is True:
            # stdin stays open for handle.send_stdin() / close_stdin()
            body["stdin"] = True
        elif stdin is not None and stdin is not False:
            body["stdin_b64"] = b64encode(stdin.encode("utf-8") if isinstance(stdin, str) else bytes(stdin))
        if max_output_bytes is not None:
            body["max_output_bytes"] = int(max_output_bytes)
        if memory_mib is not None:
            body["memory_mib"] = int(memory_mib)
        if pids_max is not None:
            body["pids_max"] = int(pids_max)
        path = f"/sandboxes/{self._sb.id}/execs"
        client = self._sb._client
        if background:
            body["background"] = True
            d = client.call("POST", path, json_body=body)
            return CommandHandle(self._sb, d["exec_id"], on_stdout=on_stdout, on_stderr=on_stderr)
        # the guest ends the command at its timeout; leave room for that answer
        rt = request_timeout if request_timeout is not None else (None if not ts else ts + 60.0)
        if on_stdout is None and on_stderr is None:
            result = CommandResult.from_json(client.call("POST", path, json_body=body, timeout=rt))
        else:
            result = self._run_streamed(path, body, on_stdout, on_stderr, rt)
        if check and not result.ok:
            raise CommandExitError(result)
        return result

    def _run_streamed(self, path: str, body: Dict[str, Any], on_stdout: Optional[OutputCallback],
                      on_stderr: Optional[OutputCallback], rt: Optional[float]) -> CommandResult:
        col = _Collector(on_stdout, on_stderr)
        # keepalives every 10 s: a silent minute means a dead daemon
        sock_t = 60.0 if rt is None else max(rt, 60.0)
        r = self._sb._client.open("POST", path, json_body=body, accept="application/x-ndjson", timeout=sock_t)
        exec_id = None
        for ev in r.iter_ndjson():
            t = ev.get("type")
            if t == "start":
                exec_id = ev.get("exec_id")
            elif t in ("stdout", "stderr"):
                col.feed(ev)
            elif t == "exit":
                col.finish()
                d = dict(ev)
                d.setdefault("exec_id", exec_id)
                return CommandResult.from_json(d, stdout=col.text("stdout"), stderr=col.text("stderr"))
            elif t == "error":
                col.finish()
                raise _stream_error(self._sb, ev)
        col.finish()
        if exec_id:  # the connection dropped: the exec may still be there
            return CommandHandle(self._sb, exec_id, on_stdout=on_stdout, on_stderr=on_stderr,
                                 since=col.offset).wait()
        raise TinyvmmError("the exec stream ended before the command started")

    def connect(self, exec_id: str, *, on_stdout: Optional[OutputCallback] = None,
                on_stderr: Optional[OutputCallback] = None) -> CommandHandle:
        """Reattach to a background command; ``wait()`` replays its kept output from the start."""
        h = CommandHandle(self._sb, exec_id, on_stdout=on_stdout, on_stderr=on_stderr)
        h.status()  # raises ExecNotFound / SandboxNotFound now rather than later
        return h

    def kill(self, exec_id: str, signal: int = 9) -> None:
        """Signal a background command by id (see :meth:`CommandHandle.kill`)."""
        CommandHandle(self._sb, exec_id).kill(signal)

    def send_stdin(self, exec_id: str, data: Union[str, bytes]) -> None:
        """Write to a background command's stdin by id."""
        CommandHandle(self._sb, exec_id).send_stdin(data)

    def close_stdin(self, exec_id: str) -> None:
        CommandHandle(self._sb, exec_id).close_stdin()
