"""``python3 -m tinyvmm``: a small CLI over the SDK for shell users.

    python3 -m tinyvmm create [--timeout 300] [-e K=V] [--metadata K=V] [--network]
                              [--allow-out RULE] [--dns ADDR] [--deny-out] [--json]
    python3 -m tinyvmm exec SBX [--user root] [--cwd DIR] [--timeout S] [-e K=V] -- CMD [ARGS...]
    python3 -m tinyvmm cp LOCAL SBX:/path     |  cp SBX:/path LOCAL   (- is stdin/stdout)
    python3 -m tinyvmm ls SBX [PATH]
    python3 -m tinyvmm list [--state running|paused|ended] [--json]
    python3 -m tinyvmm kill SBX [SBX...]
    python3 -m tinyvmm health | version

``exec`` with one CMD word runs it with ``/bin/sh -c``; with more, as an argv.
Exit status: ``exec``'s is the command's (128+N for signal N, 124 for a
timeout); 0 done; 125 the daemon or the sandbox refused (one line on
stderr: the API's error and message), or ``health`` found the daemon
degraded (no sandbox can start); 64 a wrong command line, as tinyvmm's.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
from typing import Dict, List, Optional

from . import Sandbox, TinyvmmError, health, version

USAGE_EXIT = 64  # a wrong command line, as tinyvmm's own (argparse's would be 2)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line naming what is wrong, then the usage
        self.exit(USAGE_EXIT, f"tinyvmm: {message}\n{self.format_usage()}")


def _pairs(items: Optional[List[str]], what: str) -> Optional[Dict[str, str]]:
    if not items:
        return None
    out = {}
    for it in items:
        k, sep, v = it.partition("=")
        if not sep or not k:
            print(f"tinyvmm: {what} wants KEY=VALUE, not {it!r}", file=sys.stderr)
            raise SystemExit(USAGE_EXIT)
        out[k] = v
    return out


def _split_remote(s: str):
    if s.startswith("sbx_") and ":" in s:
        sid, _, path = s.partition(":")
        return sid, path
    return None, s


def main(argv: Optional[List[str]] = None) -> int:
    ap = _Parser(prog="python3 -m tinyvmm", description="tinyvmm serve sandboxes",
                 epilog="exit status: exec's is the command's; 0 done; 125 refused (or health: degraded); "
                        "64 a wrong command line")
    ap.add_argument("--socket", help="daemon socket (default $TINYVMM_SOCKET or /run/tinyvmm/api.sock)")
    ap.add_argument("--token", help="access token of the sandbox (for one that is not yours)")
    sub = ap.add_subparsers(dest="cmd", required=True)

    p = sub.add_parser("create", help="start a sandbox, print its id")
    p.add_argument("--timeout", type=int, default=300, help="lifetime in seconds")
    p.add_argument("--idle-timeout", type=int)
    p.add_argument("--template")
    p.add_argument("--cpus", type=int)
    p.add_argument("--memory", type=int, dest="memory_mib", help="MiB")
    p.add_argument("-e", "--env", action="append", help="KEY=VALUE for every command")
    p.add_argument("--metadata", action="append", help="KEY=VALUE label")
    p.add_argument("--network", action="store_true",
                   help="give it a network (its own TAP and /30); without --allow-out or --dns: the default "
                        "egress rules (anywhere but other sandboxes)")
    p.add_argument("--allow-out", action="append", metavar="RULE",
                   help="CIDR[:PORT[/tcp|udp]] it may reach (implies --network; repeatable)")
    p.add_argument("--dns", action="append", metavar="ADDR", help="a resolver (implies --network; repeatable)")
    p.add_argument("--deny-out", action="store_true",
                   help="a network that lets nothing out (allow_out and dns both empty; implies --network)")
    p.add_argument("--json", action="store_true", help="print the sandbox object with its access_token")

    p = sub.add_parser("exec", help="run a command, stream its output, exit with its status")
    p.add_argument("sandbox")
    p.add_argument("--user", choices=["sandbox", "root"])
    p.add_argument("--cwd")
    p.add_argument("--timeout", type=float)
    p.add_argument("-e", "--env", action="append")
    p.add_argument("--json", action="store_true", help="print the result object instead of streaming")
    p.add_argument("command", nargs="*", help="the command (put -- before one that has options)")

    p = sub.add_parser("cp", help="copy a file to (LOCAL SBX:/path) or from (SBX:/path LOCAL) a sandbox")
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--mode", help="octal mode of an uploaded file, e.g. 0755")

    p = sub.add_parser("ls", help="list a directory of a sandbox")
    p.add_argument("sandbox")
    p.add_argument("path", nargs="?", default="/home/sandbox")

    p = sub.add_parser("list", help="list your sandboxes")
    p.add_argument("--state", choices=["running", "paused", "ended"])
    p.add_argument("--metadata", action="append")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("kill", help="end sandboxes")
    p.add_argument("sandbox", nargs="+")

    sub.add_parser("health", help="whether sandboxes can start here (exit 125 when not), and why")
    sub.add_parser("version", help="the daemon's version and API")

    argv = list(sys.argv[1:] if argv is None else argv)
    tail: List[str] = []
    if "--" in argv:  # everything after -- is the exec's command, untouched
        i = argv.index("--")
        argv, tail = argv[:i], argv[i + 1:]
    ns, extra = ap.parse_known_args(argv)
    if ns.cmd == "exec":
        ns.command = list(ns.command) + extra + tail
    elif extra or tail:
        ap.error("unrecognized arguments: " + " ".join(extra + tail))
    try:
        return _run(ns)
    except TinyvmmError as e:
        msg = str(e)
        if e.status == 0:  # no daemon there: this command's own flag, not the SDK's argument
            msg = msg.replace("pass socket_path", "give --socket")
        print(f"tinyvmm: {msg}", file=sys.stderr)
        return 125
    except OSError as e:
        print(f"tinyvmm: {e}", file=sys.stderr)
        return 125


def _connect(ns: argparse.Namespace, sid: str) -> Sandbox:
    return Sandbox.connect(sid, access_token=ns.token, socket_path=ns.socket)


def _run(ns: argparse.Namespace) -> int:
    if ns.cmd == "create":
        net = None
        if ns.deny_out and (ns.allow_out or ns.dns):
            print("tinyvmm: --deny-out: lets nothing out, so it goes with no --allow-out or --dns", file=sys.stderr)
            return USAGE_EXIT
        if ns.network or ns.allow_out or ns.dns or ns.deny_out:
            net = {"enabled": True}
            if ns.allow_out or ns.deny_out:
                net["allow_out"] = ns.allow_out or []
            if ns.dns or ns.deny_out:
                net["dns"] = ns.dns or []
        sb = Sandbox.create(template=ns.template, timeout=ns.timeout, idle_timeout=ns.idle_timeout,
                            cpus=ns.cpus, memory_mib=ns.memory_mib, envs=_pairs(ns.env, "-e"),
                            metadata=_pairs(ns.metadata, "--metadata"), network=net, socket_path=ns.socket)
        if ns.json:
            print(json.dumps({**sb.info.raw, "access_token": sb.access_token}, indent=2))
        else:
            print(sb.id)
        return 0
    if ns.cmd == "exec":
        cmd = list(ns.command)
        if not cmd:
            print("tinyvmm: exec needs a command", file=sys.stderr)
            return USAGE_EXIT
        sb = _connect(ns, ns.sandbox)
        target = cmd[0] if len(cmd) == 1 else cmd
        if ns.json:
            r = sb.commands.run(target, user=ns.user, cwd=ns.cwd, timeout=ns.timeout, envs=_pairs(ns.env, "-e"))
            print(json.dumps(r.raw, indent=2))
        else:
            def w(stream):
                def cb(s: str) -> None:
                    stream.write(s)
                    stream.flush()
                return cb
            r = sb.commands.run(target, user=ns.user, cwd=ns.cwd, timeout=ns.timeout,
                                envs=_pairs(ns.env, "-e"), on_stdout=w(sys.stdout), on_stderr=w(sys.stderr))
            if r.truncated:
                print("tinyvmm: output was truncated", file=sys.stderr)
        if r.timed_out:
            return 124
        if r.signal:
            return 128 + r.signal
        return r.exit_code
    if ns.cmd == "cp":
        s_id, s_path = _split_remote(ns.src)
        d_id, d_path = _split_remote(ns.dst)
        if (s_id is None) == (d_id is None):
            bad = [x.partition(":")[0] for x in (ns.src, ns.dst)
                   if ":" in x and "/" not in x.partition(":")[0] and not x.startswith("sbx_")]
            if bad and s_id is None and d_id is None:  # a sandbox side meant, with no sandbox id
                print(f"tinyvmm: cp: {bad[0]!r} is not a sandbox id (they start with sbx_)", file=sys.stderr)
            else:
                print("tinyvmm: cp wants exactly one side as SBX:/path", file=sys.stderr)
            return USAGE_EXIT
        if d_id is not None:
            sb = _connect(ns, d_id)
            if s_path == "-":
                w = sb.files.write(d_path, sys.stdin.buffer, mode=ns.mode)
            else:
                with open(s_path, "rb") as f:
                    w = sb.files.write(d_path, f, mode=ns.mode)
            print(f"{w.path}: {w.size} bytes", file=sys.stderr)
        else:
            sb = _connect(ns, s_id)
            with sb.files.read(s_path, format="stream") as src:
                if d_path == "-":
                    shutil.copyfileobj(src, sys.stdout.buffer)
                    sys.stdout.buffer.flush()
                else:
                    with open(d_path, "wb") as out:
                        shutil.copyfileobj(src, out)
        return 0
    if ns.cmd == "ls":
        for e in _connect(ns, ns.sandbox).files.list(ns.path):
            mode = f"{e.mode:04o}" if isinstance(e.mode, int) else str(e.mode or "")
            print(f"{mode:>5} {e.type:7} {e.size:>10} {e.name}")
        return 0
    if ns.cmd == "list":
        infos = Sandbox.list(state=ns.state, metadata=_pairs(ns.metadata, "--metadata"), socket_path=ns.socket)
        if ns.json:
            print(json.dumps([i.raw for i in infos], indent=2))
        else:
            for i in infos:
                print(f"{i.id}  {i.state:7}  {i.end_reason or '-':8}  expires {i.expires_at}  "
                      + " ".join(f"{k}={v}" for k, v in sorted(i.metadata.items())))
        return 0
    if ns.cmd == "health":
        h = health(socket_path=ns.socket)
        print(f"{h.get('status')}: {h.get('sandboxes')} of your sandboxes running")
        for line in h.get("problems") or []:
            print(f"  {line}")
        return 0 if h.get("status") == "ok" else 125
    if ns.cmd == "version":
        v = version(socket_path=ns.socket)
        print(f"tinyvmm serve {v.get('version')} (API {v.get('api')})")
        return 0
    if ns.cmd == "kill":
        rc = 0
        for sid in ns.sandbox:
            if not Sandbox.kill(sid, ns.token, socket_path=ns.socket):
                # as the other commands say a missing sandbox
                print(f"tinyvmm: sandbox_not_found (404): no sandbox {sid}", file=sys.stderr)
                rc = 125
        return rc
    return 125


if __name__ == "__main__":
    sys.exit(main())
