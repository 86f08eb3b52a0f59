"""Transport for the ``tinyvmm serve`` API: HTTP/1.1 + JSON over a Unix socket.

Standard library only.  One connection per request (a streamed answer keeps
its own connection open until it is read to the end or closed), so a
:class:`Client` is safe to share between threads.
"""
from __future__ import annotations

import base64
import builtins
import http.client
import io
import json
import os
import socket
import urllib.parse
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

DEFAULT_SOCKET = "/run/tinyvmm/api.sock"
API_PREFIX = "/v1"
UPLOAD_CHUNK = 256 * 1024

__all__ = [
    "DEFAULT_SOCKET", "resolve_socket_path", "Client", "Response",
    "TinyvmmError", "BadRequest", "NotFound", "SandboxNotFound", "ExecNotFound", "TemplateNotFound",
    "Conflict", "SandboxExpired", "PayloadTooLarge", "QuotaExceeded",
    "ServiceUnavailable", "NotImplementedByServer", "GuestError",
    "InsufficientStorage", "TimeoutError", "CommandExitError",
]


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------

class TinyvmmError(Exception):
    """Base of every error raised by the SDK.

    ``status`` is the HTTP status (0 when no answer was received), ``error``
    the API's error code (e.g. ``"sandbox_not_found"``) and ``message`` the
    server's one-line message, kept verbatim.
    """

    def __init__(self, message: str, *, status: int = 0, error: str = "",
                 body: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error = error
        self.body: Dict[str, Any] = dict(body or {})

    def __str__(self) -> str:
        if self.error:
            return f"{self.error} ({self.status}): {self.message}"
        return self.message


class BadRequest(TinyvmmError, ValueError):
    """400 ``bad_request``: a malformed request or a field out of range."""


class NotFound(TinyvmmError):
    """404 ``not_found``: no such route or resource."""


class SandboxNotFound(NotFound):
    """404 ``sandbox_not_found``: no such sandbox (or not yours, or a wrong token)."""


class ExecNotFound(NotFound):
    """404 ``exec_not_found``: no such exec in this sandbox."""


class TemplateNotFound(NotFound):
    """404 ``template_not_found``: none of the caller's templates by that name
    (another uid's template is not found either)."""


class Conflict(TinyvmmError):
    """409 ``conflict``."""


class SandboxExpired(TinyvmmError):
    """410 ``sandbox_expired``: the sandbox has ended; ``end_reason`` says why
    (``killed``, ``expired``, ``idle``, ``crashed``, ``oom``)."""

    def __init__(self, message: str, *, end_reason: Optional[str] = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.end_reason = end_reason


class WarmupFailed(TinyvmmError):
    """422 ``warmup_failed``: a template's warm-up command exited non-zero
    or timed out; the message ends with the end of its stderr."""


class PayloadTooLarge(TinyvmmError):
    """413 ``payload_too_large``."""


class Forbidden(TinyvmmError, PermissionError):
    """403 ``forbidden``: e.g. sizing the warm pool as a uid other than
    root or the daemon's."""


class QuotaExceeded(TinyvmmError):
    """429 ``quota_exceeded``: the owner's sandbox limit is reached, or its
    daily CPU budget is spent (then ``retry_after``: seconds until it
    renews, from ``Retry-After``)."""

    def __init__(self, message: str, *, retry_after: Optional[float] = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ServiceUnavailable(TinyvmmError):
    """503 ``capacity`` (``retry_after`` seconds, from ``Retry-After``),
    ``unavailable`` (no sandbox can start on the daemon's host now: its
    ``health()`` lists why), or
    the daemon's socket cannot be reached at all (``status`` 0)."""

    def __init__(self, message: str, *, retry_after: Optional[float] = None, **kw: Any) -> None:
        super().__init__(message, **kw)
        self.retry_after = retry_after


class NotImplementedByServer(TinyvmmError, NotImplementedError):
    """501 ``not_implemented``: this daemon does not offer the operation
    (e.g. stdin or signals of a background exec)."""


class GuestError(TinyvmmError):
    """502 ``guest_error``: the guest agent refused; the message is the
    agent's (e.g. ``"no such file"``)."""


class InsufficientStorage(TinyvmmError):
    """507 ``insufficient_storage``: the guest's disk is full."""


class TimeoutError(TinyvmmError, builtins.TimeoutError):  # noqa: A001 - deliberate name
    """A client-side wait ran out (socket timeout, ``handle.wait(timeout=)``).

    Also an instance of the built-in :class:`TimeoutError`.  A command that
    hits its own ``timeout`` is *not* an error: its result has
    ``timed_out=True``.
    """


class CommandExitError(TinyvmmError):
    """Raised by ``commands.run(..., check=True)`` (and ``handle.wait(check=True)``)
    when the command exited non-zero, was killed by a signal or timed out.
    ``result`` is the full :class:`~tinyvmm.commands.CommandResult`."""

    def __init__(self, result: Any) -> None:
        if getattr(result, "timed_out", False):
            what = "timed out"
        elif getattr(result, "signal", 0):
            what = f"was killed by signal {result.signal}"
        else:
            what = f"exited with code {result.exit_code}"
        tail = (getattr(result, "stderr", "") or "").strip().splitlines()[-3:]
        msg = f"command {what}" + (": " + " | ".join(tail) if tail else "")
        super().__init__(msg, error="command_exit")
        self.result = result


_BY_ERROR = {
    "bad_request": BadRequest,
    "not_found": NotFound,
    "forbidden": Forbidden,
    "sandbox_not_found": SandboxNotFound,
    "exec_not_found": ExecNotFound,
    "template_not_found": TemplateNotFound,
    "conflict": Conflict,
    "sandbox_expired": SandboxExpired,
    "payload_too_large": PayloadTooLarge,
    "warmup_failed": WarmupFailed,
    "quota_exceeded": QuotaExceeded,
    "capacity": ServiceUnavailable,
    "unavailable": ServiceUnavailable,
    "not_implemented": NotImplementedByServer,
    "guest_error": GuestError,
    "insufficient_storage": InsufficientStorage,
}
_BY_STATUS = {400: BadRequest, 403: Forbidden, 404: NotFound, 409: Conflict, 410: SandboxExpired,
              413: PayloadTooLarge, 422: WarmupFailed, 429: QuotaExceeded, 501: NotImplementedByServer,
              502: GuestError, 503: ServiceUnavailable, 507: InsufficientStorage}


def error_from_response(status: int, raw: bytes, headers: Optional[Mapping[str, str]] = None) -> TinyvmmError:
    """Map an error answer (``{"code","error","message"}``) to an exception."""
    body: Dict[str, Any] = {}
    try:
        parsed = json.loads(raw.decode("utf-8", "replace")) if raw else {}
        if isinstance(parsed, dict):
            body = parsed
    except ValueError:
        pass
    error = str(body.get("error") or "")
    message = str(body.get("message") or (raw.decode("utf-8", "replace").strip()[:500] if raw and not body else "")
                  or http.client.responses.get(status, "error"))
    cls = _BY_ERROR.get(error) or _BY_STATUS.get(status) or TinyvmmError
    kw: Dict[str, Any] = {"status": status, "error": error, "body": body}
    if cls is SandboxExpired:
        return SandboxExpired(message, end_reason=body.get("end_reason"), **kw)
    if cls in (ServiceUnavailable, QuotaExceeded):
        ra = None
        if headers is not None:
            val = headers.get("Retry-After")
            try:
                ra = float(val) if val is not None else None
            except ValueError:
                ra = None
        return cls(message, retry_after=ra, **kw)
    return cls(message, **kw)


# --------------------------------------------------------------------------
# Transport
# --------------------------------------------------------------------------

def resolve_socket_path(path: Optional[str] = None) -> str:
    """The socket: the argument, else ``$TINYVMM_SOCKET``, else the default."""
    return path or os.environ.get("TINYVMM_SOCKET") or DEFAULT_SOCKET


class _UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, socket_path: str, timeout: Optional[float]) -> None:
        super().__init__("localhost", timeout=timeout)
        self._socket_path = socket_path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._socket_path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class Response:
    """An answer whose body has not been read yet (for streams)."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self._conn = conn
        self._resp = resp
        self.status = resp.status
        self.headers = resp.headers

    def read(self, n: int = -1) -> bytes:
        try:
            return self._resp.read(n) if n >= 0 else self._resp.read()
        except socket.timeout as e:
            raise TimeoutError(f"timed out reading the answer: {e}") from None

    def iter_chunks(self, size: int = 64 * 1024) -> Iterator[bytes]:
        try:
            while True:
                b = self.read(size)
                if not b:
                    return
                yield b
        finally:
            self.close()

    def iter_ndjson(self) -> Iterator[Dict[str, Any]]:
        """One JSON object per line; blank lines skipped."""
        try:
            while True:
                try:
                    line = self._resp.readline()
                except socket.timeout as e:
                    raise TimeoutError(f"timed out waiting for events: {e}") from None
                if not line:
                    return
                line = line.strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line.decode("utf-8"))
                except ValueError as e:
                    raise TinyvmmError(f"malformed ndjson line from server: {line[:200]!r}") from e
                if isinstance(obj, dict):
                    yield obj
        finally:
            self.close()

    def json(self) -> Any:
        try:
            raw = self.read()
        finally:
            self.close()
        if not raw:
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except ValueError as e:
            raise TinyvmmError(f"malformed JSON answer from server (HTTP {self.status}): {raw[:200]!r}",
                               status=self.status) from e

    def close(self) -> None:
        try:
            self._resp.close()
        finally:
            self._conn.close()

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


Body = Union[None, bytes, bytearray, str, Iterable[bytes], io.IOBase, Any]
Query = Union[None, Mapping[str, Any], Sequence[Tuple[str, Any]]]


def _iter_upload(data: Any, chunk: int = UPLOAD_CHUNK) -> Iterator[bytes]:
    """Bytes chunks from a file-like (binary or text) or an iterable of bytes/str."""
    if hasattr(data, "read"):
        while True:
            b = data.read(chunk)
            if not b:
                return
            yield b.encode("utf-8") if isinstance(b, str) else bytes(b)
    else:
        for b in data:
            if b:
                yield b.encode("utf-8") if isinstance(b, str) else bytes(b)


class Client:
    """A connection factory for one daemon socket, with an optional access token.

    ``timeout`` is the socket timeout in seconds for ordinary calls (None: no
    limit).  Calls that wait on a command pass their own.
    """

    def __init__(self, socket_path: Optional[str] = None, *, access_token: Optional[str] = None,
                 timeout: Optional[float] = 120.0) -> None:
        self.socket_path = resolve_socket_path(socket_path)
        self.access_token = access_token
        self.timeout = timeout

    def with_token(self, access_token: Optional[str]) -> "Client":
        return Client(self.socket_path, access_token=access_token, timeout=self.timeout)

    @staticmethod
    def url(path: str, query: Query = None) -> str:
        if not path.startswith(API_PREFIX + "/"):
            path = API_PREFIX + path
        if query:
            items = list(query.items()) if isinstance(query, Mapping) else list(query)
            items = [(k, v) for k, v in items if v is not None]
            if items:
                path += "?" + urllib.parse.urlencode(items, quote_via=urllib.parse.quote, safe="/")
        return path

    def open(self, method: str, path: str, *, query: Query = None, json_body: Any = None,
             data: Body = None, headers: Optional[Mapping[str, str]] = None,
             accept: str = "application/json", timeout: Any = "default") -> Response:
        """Send a request and return the answer unread; raise on 4xx/5xx."""
        t = self.timeout if timeout == "default" else timeout
        hdrs: Dict[str, str] = {"Accept": accept}
        if self.access_token:
            hdrs["Authorization"] = f"Bearer {self.access_token}"
        body: Any = None
        encode_chunked = False
        if json_body is not None:
            body = json.dumps(json_body).encode("utf-8")
            hdrs["Content-Type"] = "application/json"
        elif data is not None:
            hdrs["Content-Type"] = "application/octet-stream"
            if isinstance(data, str):
                body = data.encode("utf-8")
            elif isinstance(data, (bytes, bytearray, memoryview)):
                body = bytes(data)
            else:
                body = _iter_upload(data)
                hdrs["Transfer-Encoding"] = "chunked"
                encode_chunked = True
        if body is not None and not encode_chunked:
            hdrs["Content-Length"] = str(len(body))
        elif body is None and method in ("POST", "PUT"):
            hdrs["Content-Length"] = "0"
        if headers:
            hdrs.update(headers)
        conn = _UnixHTTPConnection(self.socket_path, t)
        try:
            try:
                conn.request(method, self.url(path, query), body=body, headers=hdrs,
                             encode_chunked=encode_chunked)
            except (BrokenPipeError, ConnectionResetError):
                # the server answered (an error) and closed before taking the whole
                # body: its answer may still be there to read
                if conn.sock is None:
                    raise
            resp = conn.getresponse()
        except socket.timeout as e:
            conn.close()
            raise TimeoutError(f"{method} {path}: timed out after {t} s ({e})") from None
        except (FileNotFoundError, ConnectionRefusedError) as e:
            conn.close()
            raise ServiceUnavailable(
                f"cannot connect to tinyvmm serve at {self.socket_path}: {e.strerror or e}"
                " (is the daemon running? set TINYVMM_SOCKET or pass socket_path)") from None
        except PermissionError as e:
            conn.close()
            raise ServiceUnavailable(f"no permission to connect to {self.socket_path}: {e.strerror or e}") from None
        except (ConnectionError, http.client.HTTPException, OSError) as e:
            conn.close()
            raise TinyvmmError(f"{method} {path}: connection to {self.socket_path} failed: {e}") from None
        r = Response(conn, resp)
        if r.status >= 400:
            try:
                raw = r.read()
            except TinyvmmError:
                raw = b""
            finally:
                r.close()
            raise error_from_response(r.status, raw, r.headers)
        return r

    def call(self, method: str, path: str, **kw: Any) -> Any:
        """Send a request and return the decoded JSON answer (None if empty)."""
        return self.open(method, path, **kw).json()


def b64decode(s: str) -> bytes:
    return base64.b64decode(s) if s else b""


def b64encode(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")
