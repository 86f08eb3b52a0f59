"""A small HTTP/1.1 client of the `tinyvmm serve` API over its Unix socket.
Standard library only.

- Client.request(): one request on a fresh connection -> Response(status,
  headers, body) with .json parsed when the answer is JSON.
- Client.stream(): a Stream whose body is read as it comes: ndjson lines
  (.events(), each line parsed) or raw chunks (.chunks()), http.client doing
  the chunked decoding.
- as_uid(uid, fn, ...): fn runs in a forked child that dropped to uid (and
  gid uid, no supplementary groups) first; its return value (or exception)
  comes back through a pipe.

Every request and answer is checked with apicheck against the OpenAPI
document (check=True; check="response": the answer only, for requests that
are wrong on purpose; check=False: nothing, for raw hostile traffic). A
failure does not raise: it is appended to FAILURES (also from an as_uid
child), which the tests turn into test failures (take_failures()).
"""
import http.client
import json as _json
import os
import pickle
import select
import signal
import socket
import time
import traceback

FAILURES = []
_NO = object()


def take_failures():
    """The API-check failures recorded since the last call."""
    out = FAILURES[:]
    del FAILURES[:]
    return out


def _record(method, target, errs, what):
    for e in errs:
        FAILURES.append("%s %s (%s): %s" % (method, target, what, e))


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout=120):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            # A blocking connect waits while the listen backlog is full (a
            # timeout makes an AF_UNIX connect fail at once with EAGAIN).
            s.connect(self.unix_path)
        except BaseException:
            s.close()
            raise
        s.settimeout(self.timeout)
        self.sock = s


class Response:
    """status, headers (list of (name, value)), body (bytes), json (the
    parsed body when it is JSON, else None)."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = list(headers)
        self.body = body
        self.json = None
        if _media(self.header("Content-Type")) == "application/json" and body:
            try:
                self.json = _json.loads(body)
            except ValueError:
                pass

    def header(self, name, default=None):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return default

    def lines(self):
        """The body as ndjson: a list of parsed lines."""
        return [_json.loads(ln) for ln in self.body.decode("utf-8", "replace").split("\n") if ln.strip()]

    def __repr__(self):
        b = self.body if len(self.body) <= 300 else self.body[:300] + b"..."
        return "<Response %d %r>" % (self.status, b)


def _media(ct):
    return (ct or "").split(";")[0].strip().lower()


class Stream:
    """An answer read as it arrives. status and headers are known at once;
    a non-2xx answer is read whole into .body/.json."""

    def __init__(self, client, conn, resp, method, target, check):
        self.client, self.conn, self.resp = client, conn, resp
        self.method, self.target, self.check = method, target, check
        self.status = resp.status
        self.headers = resp.getheaders()
        self.body = b""
        self.json = None
        self._schema = None
        self.closed = False
        api = client.api
        ct = resp.getheader("Content-Type")
        if self.status >= 300 or _media(ct) == "application/json":
            self.body = resp.read()
            r = Response(self.status, self.headers, self.body)
            self.json = r.json
            if check and api:
                _record(method, target, api.check_response(method, target, self.status, self.body, ct,
                                                           self.headers), "response")
            self.close()
            return
        if check and api:
            errs = api.check_response(method, target, self.status, [], ct, self.headers)
            _record(method, target, errs, "response")
            if not errs and _media(ct) == "application/x-ndjson":
                try:
                    self._schema = api.line_schema(method, target, self.status, ct)
                except LookupError as e:
                    _record(method, target, [str(e)], "response")

    def header(self, name, default=None):
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return default

    def readline(self):
        """The next ndjson line parsed (checked against the document), or
        None at the end of the stream."""
        if self.closed:
            return None
        ln = self.resp.readline()
        while ln and not ln.strip():
            ln = self.resp.readline()
        if not ln:
            return None
        if self._schema is not None and self.check:
            _record(self.method, self.target, self.client.api.check_line(self._schema, ln), "event")
        try:
            return _json.loads(ln)
        except ValueError:
            _record(self.method, self.target, ["not a JSON line: %r" % ln[:200]], "event")
            return {"type": "<invalid>", "raw": ln}

    def events(self):
        """Every remaining line, parsed, until the end of the stream."""
        while True:
            ev = self.readline()
            if ev is None:
                return
            yield ev

    def chunks(self, size=1 << 16):
        """The remaining body as it comes, in pieces of at most size bytes."""
        while not self.closed:
            b = self.resp.read1(size) if hasattr(self.resp, "read1") else self.resp.read(size)
            if not b:
                return
            yield b

    def close(self):
        if not self.closed:
            self.closed = True
            try:
                self.conn.close()
            except OSError:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Client:
    """Requests to the daemon at socket path sock. api: an apicheck.ApiCheck
    (None: no checks). token: sent as Authorization: Bearer on every
    request unless a request gives its own (token="" sends none)."""

    def __init__(self, sock, api=None, token=None, timeout=120):
        self.sock, self.api, self.token, self.timeout = sock, api, token, timeout

    def _send(self, method, target, body, json, headers, token, accept, check, timeout, content_type):
        hdrs = {}
        if json is not _NO:
            body = _json.dumps(json).encode()
            hdrs["Content-Type"] = "application/json"
        elif content_type:
            hdrs["Content-Type"] = content_type
        elif body is not None:
            hdrs["Content-Type"] = "application/octet-stream"
        if accept:
            hdrs["Accept"] = accept
        tok = self.token if token is None else token
        if tok:
            hdrs["Authorization"] = "Bearer " + tok
        hdrs.update(headers or {})
        if check is True and self.api:
            cbody = body if isinstance(body, (bytes, bytearray, str)) or body is None else b"<streamed>"
            _record(method, target, self.api.check_request(method, target, cbody, hdrs.get("Content-Type"), hdrs),
                    "request")
        conn = UnixHTTPConnection(self.sock, timeout or self.timeout)
        try:
            if body is not None and not isinstance(body, (bytes, bytearray, str)) and \
                    "Content-Length" not in hdrs:
                conn.request(method, target, body=body, headers=hdrs, encode_chunked=True)
            else:
                conn.request(method, target, body=body, headers=hdrs)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon answered early (e.g. 413) and closed: read its answer
        except BaseException:
            conn.close()
            raise
        try:
            return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    def request(self, method, target, body=None, *, json=_NO, headers=None, token=None, accept=None,
                check=True, timeout=None, content_type=None):
        """One request -> Response. body: bytes, or an iterable of bytes
        (sent chunked unless headers give a Content-Length); json: a value
        sent as application/json."""
        conn, resp = self._send(method, target, body, json, headers, token, accept, check, timeout, content_type)
        try:
            data = resp.read()
            r = Response(resp.status, resp.getheaders(), data)
        finally:
            conn.close()
        if check and self.api:
            ct = r.header("Content-Type")
            _record(method, target, self.api.check_response(method, target, r.status, data, ct, r.headers),
                    "response")
        return r

    def stream(self, method, target, body=None, *, json=_NO, headers=None, token=None,
               accept="application/x-ndjson", check=True, timeout=None, content_type=None):
        """One request whose answer is read as it comes -> Stream."""
        conn, resp = self._send(method, target, body, json, headers, token, accept, check, timeout, content_type)
        return Stream(self, conn, resp, method, target, check)

    # conveniences
    def get(self, target, **kw):
        return self.request("GET", target, **kw)

    def post(self, target, json=None, **kw):
        return self.request("POST", target, json={} if json is None else json, **kw)

    def delete(self, target, **kw):
        return self.request("DELETE", target, **kw)


def raw_exchange(sock_path, data, timeout=30, pace=None, shut=False):
    """Send raw bytes (or an iterable of byte strings, pace seconds apart)
    on a fresh connection, then read the answer until the daemon closes or
    timeout passes. Returns the bytes received (b"" if none). Nothing is
    checked."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(sock_path)
    try:
        parts = [data] if isinstance(data, (bytes, bytearray)) else data
        try:
            for i, p in enumerate(parts):
                if pace and i:
                    time.sleep(pace)
                s.sendall(p)
            if shut:
                s.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            pass
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                b = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not b:
                break
            out += b
            if _complete(out):
                break
        return out
    finally:
        s.close()


def _complete(buf):
    """Whether buf holds one whole response with a Content-Length body."""
    head, sep, rest = buf.partition(b"\r\n\r\n")
    if not sep:
        return False
    for ln in head.split(b"\r\n")[1:]:
        k, _, v = ln.partition(b":")
        if k.strip().lower() == b"content-length":
            try:
                return len(rest) >= int(v.strip())
            except ValueError:
                return False
    return False


def parse_raw(buf):
    """(status, headers list, body) of a raw response with a Content-Length
    or no body; status 0 if buf is not a response."""
    head, sep, rest = buf.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if not sep or len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        return 0, [], buf
    hdrs = []
    n = None
    for ln in lines[1:]:
        k, _, v = ln.partition(b":")
        hdrs.append((k.strip().decode("latin-1"), v.strip().decode("latin-1")))
        if k.strip().lower() == b"content-length":
            n = int(v.strip())
    return int(parts[1]), hdrs, rest if n is None else rest[:n]


def as_uid(uid, fn, *args, child_timeout=900, **kw):
    """fn(*args, **kw) in a forked child that runs as uid:uid with no
    supplementary groups (child_timeout: seconds to wait for it, then it is
    killed). Returns its value; an exception in the child is
    raised here (AssertionError stays one); API-check failures recorded in
    the child join FAILURES."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never returns
        code = 0
        try:
            os.close(r)
            start = len(FAILURES)
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                res = ("ok", fn(*args, **kw))
            except BaseException as e:  # noqa: B902
                res = ("exc", "".join(traceback.format_exception(e)), isinstance(e, AssertionError))
            try:
                data = pickle.dumps((res, FAILURES[start:]))
            except Exception as e:
                data = pickle.dumps((("exc", "result not picklable: %r" % e, False), FAILURES[start:]))
            with os.fdopen(w, "wb") as f:
                f.write(data)
        except BaseException:
            code = 1
            try:
                traceback.print_exc()
            except BaseException:
                pass
        finally:
            os._exit(code)
    os.close(w)
    data = b""
    deadline = time.monotonic() + child_timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                os.kill(pid, signal.SIGKILL)
                raise TimeoutError("as_uid(%d): no answer after %d s" % (uid, child_timeout))
            ready, _, _ = select.select([r], [], [], min(left, 5))
            if ready:
                b = os.read(r, 1 << 20)
                if not b:
                    break
                data += b
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    if not data:
        raise RuntimeError("as_uid(%d): the child died without an answer" % uid)
    res, fails = pickle.loads(data)
    FAILURES.extend(fails)
    if res[0] == "exc":
        raise (AssertionError if res[2] else RuntimeError)("in the child as uid %d:\n%s" % (uid, res[1]))
    return res[1]
