"""An MCP server for tinyvmm sandboxes: JSON-RPC 2.0 over stdio (one message per
line), MCP protocol revision 2025-06-18, standard library only.

Tools: run_code, sandbox_create, exec, write_file, read_file, list_files,
sandbox_kill, sandbox_pause, sandbox_resume, sandbox_fork, sandbox_save_template.  A failed operation is a tool result with ``isError: true``
(the agent sees the message); malformed JSON-RPC, unknown methods, unknown
tools and arguments that do not fit the schema are JSON-RPC errors.  The
server never exits on an error; it exits at EOF on stdin, killing the
sandboxes it created (unless ``--keep``).
"""
from __future__ import annotations

import argparse
import base64
import json
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, TextIO, Tuple

from .. import __version__
from .._http import TinyvmmError
from ..commands import CommandResult
from ..sandbox import Sandbox

PROTOCOL_VERSION = "2025-06-18"
SUPPORTED_VERSIONS = ("2025-06-18", "2025-03-26", "2024-11-05")

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = (
    -32700, -32600, -32601, -32602, -32603)

_SBX_ID = {"type": "string", "description": "The sandbox id (sbx_...), from sandbox_create."}
_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}

TOOLS: List[Dict[str, Any]] = [
    {
        "name": "run_code",
        "title": "Run code in a sandbox",
        "description": ("Run a snippet of Python, Bash or Node.js code in an isolated microVM sandbox and "
                        "return its stdout, stderr and exit code. Without sandbox_id each call gets a fresh "
                        "sandbox that is deleted afterwards (nothing persists between calls); pass the "
                        "sandbox_id of sandbox_create to keep files between calls."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The program text."},
                "language": {"type": "string", "enum": ["python", "bash", "node"], "default": "python"},
                "timeout_s": {"type": "integer", "minimum": 1, "maximum": 3600, "default": 60,
                              "description": "Seconds before the program is stopped."},
                "sandbox_id": _SBX_ID,
            },
            "required": ["code"],
            "additionalProperties": False,
        },
    },
    {
        "name": "sandbox_create",
        "title": "Create a sandbox",
        "description": ("Start a persistent microVM sandbox (Linux, python3, bash; unprivileged user "
                        "'sandbox') and return its sandbox_id for exec, write_file, read_file, list_files "
                        "and run_code. It ends after timeout_s, on sandbox_kill, or when this MCP server exits."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "timeout_s": {"type": "integer", "minimum": 1, "default": 600,
                              "description": "Lifetime in seconds."},
                "template": {"type": "string",
                             "description": ("Start from this saved template (sandbox_save_template) instead of the "
                                             "base image; then leave cpus and memory_mib out.")},
                "cpus": {"type": "integer", "minimum": 1, "maximum": 8},
                "memory_mib": {"type": "integer", "minimum": 64, "maximum": 16384},
                "envs": dict(_STR_MAP, description="Environment variables of every command."),
                "metadata": dict(_STR_MAP, description="Labels to find the sandbox by."),
                "network": {"type": "boolean", "default": False,
                            "description": ("Give it a network interface. Outbound traffic may go anywhere but "
                                            "other sandboxes, and reaches the internet only where the host "
                                            "routes it. Without it the sandbox has no network.")},
            },
            "additionalProperties": False,
        },
    },
    {
        "name": "exec",
        "title": "Run a shell command in a sandbox",
        "description": "Run a shell command (/bin/sh -c) in a sandbox; returns exit code, stdout and stderr.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": _SBX_ID,
                "command": {"type": "string", "description": "The shell command line."},
                "cwd": {"type": "string", "description": "Absolute working directory."},
                "envs": _STR_MAP,
                "user": {"type": "string", "enum": ["sandbox", "root"], "default": "sandbox"},
                "timeout_s": {"type": "integer", "minimum": 1, "maximum": 3600, "default": 60},
            },
            "required": ["sandbox_id", "command"],
            "additionalProperties": False,
        },
    },
    {
        "name": "write_file",
        "title": "Write a file in a sandbox",
        "description": "Create or replace a file in a sandbox (parent directories must be writable).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": _SBX_ID,
                "path": {"type": "string", "description": "Absolute path in the sandbox."},
                "content": {"type": "string"},
                "encoding": {"type": "string", "enum": ["utf-8", "base64"], "default": "utf-8"},
                "mode": {"type": "string", "pattern": "^0?[0-7]{3,4}$", "description": "e.g. 0755"},
            },
            "required": ["sandbox_id", "path", "content"],
            "additionalProperties": False,
        },
    },
    {
        "name": "read_file",
        "title": "Read a file from a sandbox",
        "description": "Read a file of a sandbox as UTF-8 text (or base64).",
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": _SBX_ID,
                "path": {"type": "string"},
                "encoding": {"type": "string", "enum": ["utf-8", "base64"], "default": "utf-8"},
                "max_bytes": {"type": "integer", "minimum": 1, "default": 1048576},
            },
            "required": ["sandbox_id", "path"],
            "additionalProperties": False,
        },
    },
    {
        "name": "list_files",
        "title": "List a directory in a sandbox",
        "description": "List a directory of a sandbox: name, type, size, mode of each entry.",
        "inputSchema": {
            "type": "object",
            "properties": {"sandbox_id": _SBX_ID, "path": {"type": "string", "default": "/home/sandbox"}},
            "required": ["sandbox_id"],
            "additionalProperties": False,
        },
    },
    {
        "name": "sandbox_kill",
        "title": "Delete a sandbox",
        "description": "End a sandbox and discard its files.",
        "inputSchema": {
            "type": "object",
            "properties": {"sandbox_id": _SBX_ID},
            "required": ["sandbox_id"],
            "additionalProperties": False,
        },
        "annotations": {"destructiveHint": True},
    },
    {
        "name": "sandbox_pause",
        "title": "Pause a sandbox",
        "description": ("Save a sandbox (files, memory, running processes) and stop it: it uses no CPU or "
                        "memory and its lifetime stops until sandbox_resume. Commands must have finished; "
                        "other tools on a paused sandbox fail until it is resumed."),
        "inputSchema": {
            "type": "object",
            "properties": {"sandbox_id": _SBX_ID},
            "required": ["sandbox_id"],
            "additionalProperties": False,
        },
    },
    {
        "name": "sandbox_resume",
        "title": "Resume a paused sandbox",
        "description": ("Restore a paused sandbox with its files and processes as they were, with a new "
                        "lifetime from now."),
        "inputSchema": {
            "type": "object",
            "properties": {"sandbox_id": _SBX_ID},
            "required": ["sandbox_id"],
            "additionalProperties": False,
        },
    },
    {
        "name": "sandbox_fork",
        "title": "Fork a sandbox",
        "description": ("Make count new sandboxes that start from this one's current state (its files and "
                        "running processes); each is independent (a write in one is seen by no other) and "
                        "returns its own sandbox_id. The original keeps running. Commands must have finished."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": _SBX_ID,
                "count": {"type": "integer", "minimum": 1, "maximum": 8, "default": 1},
                "timeout_s": {"type": "integer", "minimum": 1,
                              "description": "Each new sandbox's lifetime in seconds (default: the original's)."},
            },
            "required": ["sandbox_id"],
            "additionalProperties": False,
        },
    },
    {
        "name": "sandbox_save_template",
        "title": "Save a sandbox as a template",
        "description": ("Save a sandbox's current state (its files and running processes) as a named template; "
                        "sandbox_create with template=name then starts new sandboxes from it (e.g. with packages "
                        "installed). The sandbox keeps running. Commands must have finished; the name must be new."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": _SBX_ID,
                "name": {"type": "string", "pattern": "^[a-z0-9][a-z0-9._-]{0,62}$",
                         "description": "1 to 63 of a-z 0-9 - _ . (a letter or digit first), not 'default'."},
            },
            "required": ["sandbox_id", "name"],
            "additionalProperties": False,
        },
    },
]
_TOOLS_BY_NAME = {t["name"]: t for t in TOOLS}

_RUNNERS = {"python": ("/tmp/tinyvmm_run_code.py", "python3"),
            "bash": ("/tmp/tinyvmm_run_code.sh", "bash"),
            "node": ("/tmp/tinyvmm_run_code.js", "node")}


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def _check_type(v: Any, t: str) -> bool:
    if t == "string":
        return isinstance(v, str)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "object":
        return isinstance(v, dict)
    if t == "boolean":
        return isinstance(v, bool)
    return True


def validate_args(schema: Dict[str, Any], args: Any) -> Dict[str, Any]:
    """Check arguments against the (simple) tool schema; RpcError(-32602) if they do not fit."""
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise RpcError(INVALID_PARAMS, "arguments: must be an object")
    props = schema.get("properties", {})
    for r in schema.get("required", []):
        if r not in args:
            raise RpcError(INVALID_PARAMS, f"arguments: {r} is required")
    for k, v in args.items():
        p = props.get(k)
        if p is None:
            if schema.get("additionalProperties") is False:
                raise RpcError(INVALID_PARAMS, f"arguments: unknown property {k}")
            continue
        if not _check_type(v, p.get("type", "")):
            raise RpcError(INVALID_PARAMS, f"arguments: {k} must be of type {p['type']}")
        if "enum" in p and v not in p["enum"]:
            raise RpcError(INVALID_PARAMS, f"arguments: {k} must be one of {', '.join(p['enum'])}")
        if p.get("type") == "integer":
            if "minimum" in p and v < p["minimum"] or "maximum" in p and v > p["maximum"]:
                raise RpcError(INVALID_PARAMS, f"arguments: {k} out of range")
        if p.get("type") == "object" and isinstance(p.get("additionalProperties"), dict):
            if not all(isinstance(x, str) for x in v.values()):
                raise RpcError(INVALID_PARAMS, f"arguments: {k} values must be strings")
    return args


def _result_content(r: CommandResult, sandbox_id: Optional[str]) -> Dict[str, Any]:
    lines = [f"exit_code: {r.exit_code}"]
    if r.timed_out:
        lines.append("timed_out: true (the command was stopped at its timeout)")
    if r.signal:
        lines.append(f"signal: {r.signal}")
    if r.truncated:
        lines.append("output truncated: true")
    lines.append("stdout:\n" + (r.stdout if r.stdout else "(empty)"))
    lines.append("stderr:\n" + (r.stderr if r.stderr else "(empty)"))
    structured = {"exit_code": r.exit_code, "stdout": r.stdout, "stderr": r.stderr,
                  "timed_out": r.timed_out, "truncated": r.truncated, "signal": r.signal,
                  "duration_s": r.duration}
    if sandbox_id:
        structured["sandbox_id"] = sandbox_id
    return {"content": [{"type": "text", "text": "\n".join(lines)}],
            "structuredContent": structured, "isError": False}


def _text(text: str, structured: Optional[Dict[str, Any]] = None, is_error: bool = False) -> Dict[str, Any]:
    out: Dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if structured is not None:
        out["structuredContent"] = structured
    return out


class McpServer:
    """The server state: the sandboxes this session created (with their tokens)."""

    def __init__(self, socket_path: Optional[str] = None, *, keep: bool = False,
                 default_timeout_s: int = 600, reuse: bool = False) -> None:
        self.socket_path = socket_path
        self.keep = keep
        self.reuse = reuse
        self._session: Optional[Sandbox] = None
        self.default_timeout_s = default_timeout_s
        self.created: Dict[str, Sandbox] = {}
        self.lock = threading.Lock()
        self.initialized = False

    # -- sandboxes --------------------------------------------------------
    def _sandbox(self, sid: str) -> Sandbox:
        with self.lock:
            sb = self.created.get(sid)
        return sb if sb is not None else Sandbox.connect(sid, socket_path=self.socket_path)

    def _session_sandbox(self) -> Sandbox:
        """The one sandbox of this session for run_code (--reuse), made on first use."""
        with self.lock:
            sb = self._session
        if sb is not None:
            try:
                if sb.is_running():
                    return sb
            except TinyvmmError:
                pass
        sb = Sandbox.create(timeout=self.default_timeout_s, metadata={"mcp": "session"},
                            socket_path=self.socket_path)
        with self.lock:
            self._session = sb
            self.created[sb.id] = sb
        return sb

    def close(self) -> None:
        if self.keep:
            return
        with self.lock:
            sbs = list(self.created.values())
            self.created.clear()
        for sb in sbs:
            try:
                sb.kill()
            except Exception:  # noqa: BLE001 - best effort at exit
                pass

    # -- tools ------------------------------------------------------------
    def call_tool(self, name: str, args: Dict[str, Any]) -> Dict[str, Any]:
        fn: Callable[[Dict[str, Any]], Dict[str, Any]] = getattr(self, "tool_" + name)
        try:
            return fn(args)
        except TinyvmmError as e:
            message = e.message
            if e.status == 0:  # no daemon there: the server's own option, not the SDK's argument
                message = message.replace("pass socket_path", "start this server with --socket")
            detail = f"{e.error}: {message}" if e.error else message
            extra = ""
            if getattr(e, "end_reason", None):
                extra = f" (end_reason: {e.end_reason})"
            return _text(f"tinyvmm error: {detail}{extra}", {"error": e.error or "error", "message": message},
                         is_error=True)

    def tool_run_code(self, a: Dict[str, Any]) -> Dict[str, Any]:
        lang = a.get("language", "python")
        path, interp = _RUNNERS[lang]
        timeout = a.get("timeout_s", 60)
        sid = a.get("sandbox_id")
        if not sid and self.reuse:
            sb = self._session_sandbox()
            sb.files.write(path, a["code"])
            return _result_content(sb.commands.run([interp, path], timeout=timeout), sb.id)
        if sid:
            sb = self._sandbox(sid)
            sb.files.write(path, a["code"])
            return _result_content(sb.commands.run([interp, path], timeout=timeout), sid)
        with Sandbox.create(timeout=timeout + 120, socket_path=self.socket_path) as sb:
            sb.files.write(path, a["code"])
            return _result_content(sb.commands.run([interp, path], timeout=timeout), None)

    def tool_sandbox_create(self, a: Dict[str, Any]) -> Dict[str, Any]:
        sb = Sandbox.create(timeout=a.get("timeout_s", self.default_timeout_s), template=a.get("template"),
                            cpus=a.get("cpus"), memory_mib=a.get("memory_mib"), envs=a.get("envs"),
                            metadata=a.get("metadata"), network=a.get("network") is True,
                            socket_path=self.socket_path)
        with self.lock:
            self.created[sb.id] = sb
        info = sb.info
        return _text(f"sandbox_id: {sb.id}\nexpires_at: {info.expires_at}",
                     {"sandbox_id": sb.id, "expires_at": info.expires_at})

    def tool_exec(self, a: Dict[str, Any]) -> Dict[str, Any]:
        sb = self._sandbox(a["sandbox_id"])
        r = sb.commands.run(a["command"], cwd=a.get("cwd"), envs=a.get("envs"), user=a.get("user"),
                            timeout=a.get("timeout_s", 60))
        return _result_content(r, sb.id)

    def tool_write_file(self, a: Dict[str, Any]) -> Dict[str, Any]:
        sb = self._sandbox(a["sandbox_id"])
        if a.get("encoding") == "base64":
            try:
                data: Any = base64.b64decode(a["content"], validate=True)
            except ValueError:
                return _text("content is not valid base64", is_error=True)
        else:
            data = a["content"]
        w = sb.files.write(a["path"], data, mode=a.get("mode"))
        return _text(f"wrote {w.size} bytes to {w.path}", {"path": w.path, "size": w.size})

    def tool_read_file(self, a: Dict[str, Any]) -> Dict[str, Any]:
        sb = self._sandbox(a["sandbox_id"])
        limit = a.get("max_bytes", 1 << 20)
        with sb.files.read(a["path"], format="stream") as s:
            data = s.read(limit + 1)
        cut = len(data) > limit
        data = data[:limit]
        if a.get("encoding") == "base64":
            text = base64.b64encode(data).decode("ascii")
        else:
            text = data.decode("utf-8", "replace")
        note = f"\n[truncated at {limit} bytes]" if cut else ""
        return _text(text + note, {"path": a["path"], "content": text, "truncated": cut})

    def tool_list_files(self, a: Dict[str, Any]) -> Dict[str, Any]:
        sb = self._sandbox(a["sandbox_id"])
        path = a.get("path", "/home/sandbox")
        entries = sb.files.list(path)
        lines = [f"{e.type:7} {e.size:>10} {e.name}" for e in entries] or ["(empty)"]
        return _text(f"{path}:\n" + "\n".join(lines),
                     {"path": path, "entries": [{"name": e.name, "type": e.type, "size": e.size,
                                                 "mode": e.mode} for e in entries]})

    def tool_sandbox_kill(self, a: Dict[str, Any]) -> Dict[str, Any]:
        sid = a["sandbox_id"]
        with self.lock:
            sb = self.created.pop(sid, None)
        found = sb.kill() if sb is not None else Sandbox.kill(sid, socket_path=self.socket_path)
        if not found:
            return _text(f"no sandbox {sid}", {"sandbox_id": sid, "killed": False}, is_error=True)
        return _text(f"sandbox {sid} killed", {"sandbox_id": sid, "killed": True})

    def tool_sandbox_pause(self, a: Dict[str, Any]) -> Dict[str, Any]:
        info = self._sandbox(a["sandbox_id"]).pause()
        return _text(f"sandbox {info.id} {info.state}", {"sandbox_id": info.id, "state": info.state})

    def tool_sandbox_resume(self, a: Dict[str, Any]) -> Dict[str, Any]:
        info = self._sandbox(a["sandbox_id"]).resume()
        return _text(f"sandbox {info.id} {info.state}\nexpires_at: {info.expires_at}",
                     {"sandbox_id": info.id, "state": info.state, "expires_at": info.expires_at})

    def tool_sandbox_fork(self, a: Dict[str, Any]) -> Dict[str, Any]:
        sb = self._sandbox(a["sandbox_id"])
        kids = sb.fork(count=a.get("count", 1), timeout=a.get("timeout_s"))
        with self.lock:  # this session's now: killed at exit as those it created
            for k in kids:
                self.created[k.id] = k
        ids = [k.id for k in kids]
        return _text(f"forked {sb.id} into:\n" + "\n".join(f"sandbox_id: {i}" for i in ids),
                     {"sandbox_id": sb.id, "sandbox_ids": ids})

    def tool_sandbox_save_template(self, a: Dict[str, Any]) -> Dict[str, Any]:
        t = self._sandbox(a["sandbox_id"]).save_as_template(a["name"])
        return _text(f"template {t.get('name')} saved from {t.get('from_sandbox')} "
                     f"({t.get('cpus')} CPUs, {t.get('memory_mib')} MiB)", {"template": t})

    # -- JSON-RPC ---------------------------------------------------------
    def handle(self, msg: Any) -> Optional[Dict[str, Any]]:
        """One decoded message in, one response (or None for notifications) out."""
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return _err(msg.get("id") if isinstance(msg, dict) and _valid_id(msg.get("id")) else None,
                        INVALID_REQUEST, "Invalid Request: expected a JSON-RPC 2.0 object")
        has_id = "id" in msg
        mid = msg.get("id")
        if "method" not in msg:
            return None  # a response to something we never sent: ignore
        if not isinstance(msg["method"], str) or (has_id and not _valid_id(mid)):
            return _err(mid if _valid_id(mid) else None, INVALID_REQUEST, "Invalid Request")
        method = msg["method"]
        params = msg.get("params", {})
        if params is None:
            params = {}
        try:
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "params: must be an object")
            result = self.dispatch(method, params)
        except RpcError as e:
            return _err(mid, e.code, e.message, e.data) if has_id else None
        except Exception as e:  # noqa: BLE001 - never crash the server
            return _err(mid, INTERNAL_ERROR, f"internal error: {type(e).__name__}: {e}") if has_id else None
        if not has_id:
            return None
        return {"jsonrpc": "2.0", "id": mid, "result": result}

    def dispatch(self, method: str, params: Dict[str, Any]) -> Any:
        if method == "initialize":
            self.initialized = True
            asked = params.get("protocolVersion")
            ver = asked if asked in SUPPORTED_VERSIONS else PROTOCOL_VERSION
            return {"protocolVersion": ver,
                    "capabilities": {"tools": {"listChanged": False}},
                    "serverInfo": {"name": "tinyvmm", "title": "tinyvmm sandboxes", "version": __version__},
                    "instructions": ("Run untrusted code in tinyvmm microVM sandboxes. run_code for one-off "
                                     "snippets; sandbox_create then exec/write_file/read_file/list_files "
                                     "for a multi-step session; sandbox_kill when done.")}
        if method == "ping":
            return {}
        if method.startswith("notifications/"):
            return None
        if method == "tools/list":
            return {"tools": TOOLS}
        if method == "tools/call":
            name = params.get("name")
            if not isinstance(name, str) or name not in _TOOLS_BY_NAME:
                raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")
            args = validate_args(_TOOLS_BY_NAME[name]["inputSchema"], params.get("arguments"))
            return self.call_tool(name, args)
        if method in ("resources/list", "prompts/list"):
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method} (this server offers tools only)")
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")


def _valid_id(v: Any) -> bool:
    return isinstance(v, (str, int)) and not isinstance(v, bool)


def _err(mid: Any, code: int, message: str, data: Any = None) -> Dict[str, Any]:
    e: Dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        e["data"] = data
    return {"jsonrpc": "2.0", "id": mid, "error": e}


def serve(server: McpServer, inp: TextIO, out: TextIO) -> None:
    """Read newline-delimited JSON-RPC from ``inp`` until EOF; answer on ``out``.

    tools/call runs on its own thread so a long command does not block pings.
    """
    wlock = threading.Lock()
    threads: List[threading.Thread] = []

    def send(resp: Optional[Dict[str, Any]]) -> None:
        if resp is None:
            return
        line = json.dumps(resp, ensure_ascii=False, separators=(",", ":"))
        with wlock:
            out.write(line + "\n")
            out.flush()

    def work(msg: Any) -> None:
        send(server.handle(msg))

    try:
        for line in inp:
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError as e:
                send(_err(None, PARSE_ERROR, f"Parse error: {e}"))
                continue
            if isinstance(msg, list):
                send(_err(None, INVALID_REQUEST, "Invalid Request: batches are not supported"))
                continue
            if isinstance(msg, dict) and msg.get("method") == "tools/call":
                t = threading.Thread(target=work, args=(msg,), daemon=True)
                t.start()
                threads = [x for x in threads if x.is_alive()] + [t]
            else:
                work(msg)
    finally:
        for t in threads:
            t.join()
        server.close()


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m tinyvmm.mcp",
                                 description="MCP server (stdio) for tinyvmm sandboxes")
    ap.add_argument("--socket", help="the daemon's socket (default: $TINYVMM_SOCKET or /run/tinyvmm/api.sock)")
    ap.add_argument("--keep", action="store_true", help="do not kill the sandboxes created here at exit")
    ap.add_argument("--reuse", action="store_true",
                    help="run_code without sandbox_id uses one sandbox for the whole session "
                         "(files persist between calls) instead of a fresh one per call")
    ap.add_argument("--sandbox-timeout", type=int, default=600,
                    help="lifetime in seconds of the sandboxes made by sandbox_create/--reuse (default 600)")
    ns = ap.parse_args(argv)
    # stdout is the protocol channel: keep it UTF-8, line by line
    inp = open(sys.stdin.fileno(), "r", encoding="utf-8", errors="replace", closefd=False)
    out = open(sys.stdout.fileno(), "w", encoding="utf-8", closefd=False)
    sys.stdout = sys.stderr  # anything printed by mistake must not corrupt the protocol
    try:
        serve(McpServer(ns.socket, keep=ns.keep, reuse=ns.reuse, default_timeout_s=ns.sandbox_timeout), inp, out)
    except KeyboardInterrupt:
        pass
    return 0
