"""Files in a sandbox: ``sb.files.write/read/list/remove`` (streamed both ways)."""
from __future__ import annotations

import io
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, List, Optional, Union

from ._http import GuestError, NotFound, Response, TinyvmmError

if TYPE_CHECKING:  # pragma: no cover
    from .sandbox import Sandbox

__all__ = ["Files", "EntryInfo", "WriteInfo", "ReadStream"]


@dataclass
class WriteInfo:
    path: str
    size: int


@dataclass
class EntryInfo:
    """One entry of a directory listing; ``type`` is file, dir, symlink or other,
    ``mode`` the permission bits as an integer (``st_mode & 0o7777``)."""

    name: str
    type: str
    size: int
    mode: int
    path: str


class ReadStream(io.RawIOBase):
    """A file's content as it arrives (``files.read(path, format="stream")``).

    A binary file object (``read``, ``readinto``, iteration by chunks with
    :meth:`iter_chunks`); close it, or use it in a ``with`` block.
    """

    def __init__(self, resp: Response) -> None:
        super().__init__()
        self._resp = resp

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        data = self._resp.read(len(b))
        n = len(data)
        b[:n] = data
        return n

    def iter_chunks(self, size: int = 64 * 1024) -> Iterator[bytes]:
        while True:
            chunk = self.read(size)
            if not chunk:
                return
            yield chunk

    def close(self) -> None:
        if not self.closed:
            self._resp.close()
        super().close()


Data = Union[str, bytes, bytearray, memoryview, Any]


class Files:
    """``sb.files``: the sandbox's filesystem."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sb = sandbox

    @property
    def _path(self) -> str:
        return f"/sandboxes/{self._sb.id}/files"

    def write(self, path: str, data: Data, *, mode: Union[int, str, None] = None) -> WriteInfo:
        """Write ``data`` to ``path`` (absolute), replacing it.

        ``data``: str (UTF-8), bytes, a file object opened in binary or
        text mode, or an iterable of bytes; file objects and iterables are
        sent as a chunked upload without being read into memory.
        ``mode``: permission bits, e.g. ``0o755`` or ``"0755"``.
        """
        q = {"path": path}
        if mode is not None:
            q["mode"] = f"{mode:04o}" if isinstance(mode, int) else str(mode)
        # a slow guest pushes back on the upload: allow long stalls (per socket operation)
        ct = self._sb._client.timeout
        d = self._sb._client.call("PUT", self._path, query=q, data=data,
                                  timeout=None if ct is None else max(ct, 600.0))
        d = d or {}
        return WriteInfo(path=d.get("path", path), size=int(d.get("size", 0)))

    def read(self, path: str, format: str = "text", *, encoding: str = "utf-8") -> Any:
        """Read ``path``: ``format="text"`` (str), ``"bytes"``, or ``"stream"``
        (a :class:`ReadStream` to read from and close)."""
        if format not in ("text", "bytes", "stream"):
            raise ValueError('format must be "text", "bytes" or "stream"')
        r = self._sb._client.open("GET", self._path, query={"path": path},
                                  accept="application/octet-stream")
        if format == "stream":
            return ReadStream(r)
        try:
            data = r.read()
        finally:
            r.close()
        return data if format == "bytes" else data.decode(encoding, "replace")

    def list(self, path: str = "/") -> List[EntryInfo]:
        """The entries of directory ``path``."""
        d = self._sb._client.call("GET", f"/sandboxes/{self._sb.id}/fs/list", query={"path": path})
        base = d.get("path", path)
        return [EntryInfo(name=e.get("name", ""), type=e.get("type", "other"), size=int(e.get("size") or 0),
                          mode=int(e.get("mode") or 0), path=posixpath.join(base, e.get("name", "")))
                for e in d.get("entries", [])]

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists (looked up in its parent's listing)."""
        parent, name = posixpath.split(posixpath.normpath(path))
        if not name:
            return True
        try:
            return any(e.name == name for e in self.list(parent or "/"))
        except (GuestError, NotFound):
            return False

    def remove(self, path: str) -> None:
        """Remove the file ``path``."""
        self._sb._client.call("DELETE", self._path, query={"path": path})
