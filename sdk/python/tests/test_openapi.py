"""The SDK's requests (and the fake's answers) checked against vmm/serve/openapi.json.

A small validator of the JSON Schema subset openapi.json uses; skipped when
the file is not in the tree.
"""
import io
import json
import os
import re
import unittest

from _support import PKG_ROOT, FakeDaemonTest

import tinyvmm
from tinyvmm import Sandbox, TinyvmmError

SPEC = os.path.join(PKG_ROOT, "..", "..", "vmm", "serve", "openapi.json")


def validate(schema, v, root, where="$"):
    """Problems of v against schema (a list of strings; empty when it fits)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return validate(root["components"]["schemas"][name], v, root, where)
    if v is None:
        return [] if schema.get("nullable") or None in schema.get("enum", [None]) and "enum" in schema \
            else ([] if not schema.get("type") and not schema.get("oneOf") else [f"{where}: null"])
    errs = []
    if "oneOf" in schema:
        fits = [s for s in schema["oneOf"] if not validate(s, v, root, where)]
        if len(fits) != 1 and not (schema.get("type") == "object" and all("required" in s for s in schema["oneOf"])
                                   and len(fits) >= 1):
            errs.append(f"{where}: fits {len(fits)} of oneOf")
    t = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool}
    if t == "integer" and (not isinstance(v, int) or isinstance(v, bool)):
        return [f"{where}: not an integer"]
    if t == "number" and (not isinstance(v, (int, float)) or isinstance(v, bool)):
        return [f"{where}: not a number"]
    if t in types and not isinstance(v, types[t]):
        return [f"{where}: not a {t}"]
    if "enum" in schema and v not in schema["enum"]:
        errs.append(f"{where}: {v!r} not in {schema['enum']}")
    if "minimum" in schema and v < schema["minimum"] or "maximum" in schema and v > schema["maximum"]:
        errs.append(f"{where}: {v} out of range")
    if "pattern" in schema and isinstance(v, str) and not re.search(schema["pattern"], v):
        errs.append(f"{where}: {v!r} does not match {schema['pattern']}")
    if isinstance(v, dict):
        props = schema.get("properties", {})
        for r in schema.get("required", []):
            if r not in v:
                errs.append(f"{where}: {r} missing")
        for k, x in v.items():
            if k in props:
                errs += validate(props[k], x, root, f"{where}.{k}")
            elif schema.get("additionalProperties") is False:
                errs.append(f"{where}: unexpected {k}")
            elif isinstance(schema.get("additionalProperties"), dict):
                errs += validate(schema["additionalProperties"], x, root, f"{where}.{k}")
        if "maxProperties" in schema and len(v) > schema["maxProperties"]:
            errs.append(f"{where}: too many properties")
    if isinstance(v, list) and "items" in schema:
        for i, x in enumerate(v):
            errs += validate(schema["items"], x, root, f"{where}[{i}]")
    return errs


def _template(path):
    path = re.sub(r"^/v1/templates/[^/]+", "/v1/templates/{name}", path)
    return re.sub(r"/sbx_[0-9a-f]{32}", "/{id}", re.sub(r"/ex_[0-9a-f]{16}", "/{eid}", path))


@unittest.skipUnless(os.path.exists(SPEC), "vmm/serve/openapi.json not in this tree")
class OpenApi(FakeDaemonTest):
    @classmethod
    def setUpClass(cls):
        with open(SPEC) as f:
            cls.spec = json.load(f)

    def exercise(self):
        sb = Sandbox.create(timeout=60, idle_timeout=0, cpus=1, memory_mib=256, envs={"A": "1"},
                            secret_envs={"S": "x"}, metadata={"k": "v"},
                            network={"enabled": False, "allow_out": [], "dns": []}, socket_path=self.sock)
        sb.set_timeout(30.5)
        sb.commands.run("echo hi", envs={"B": "2"}, cwd="/tmp", user="sandbox", timeout=10, stdin=b"in",
                        max_output_bytes=100)
        sb.commands.run(["echo", "hi"], on_stdout=lambda s: None)
        h = sb.commands.run("echo bg", background=True, timeout=0)
        h.wait(timeout=10)
        sb.files.write("/tmp/f", io.BytesIO(b"x"), mode=0o600)
        sb.files.list("/tmp")
        Sandbox.list(state="running", metadata={"k": "v"}, socket_path=self.sock)
        sb.pause()
        for op in (sb.pause, sb.fork):  # 409: paused already; paused
            try:
                op()
            except TinyvmmError:
                pass
        Sandbox.list(state="paused", socket_path=self.sock)
        sb.resume()
        for kid in sb.fork(count=2, timeout=30) + sb.fork():
            kid.get_info()
            kid.kill()
        sb.save_as_template("py")
        tinyvmm.templates(self.sock)
        tinyvmm.get_template("py", socket_path=self.sock)
        Sandbox.create(template="py", timeout=30, cpus=1, memory_mib=256, socket_path=self.sock).kill()
        # well-formed requests the fake refuses: 409 (the name exists), 404 (template_not_found)
        for op in (lambda: sb.save_as_template("py"), lambda: tinyvmm.get_template("gone", socket_path=self.sock),
                   lambda: tinyvmm.delete_template("gone", socket_path=self.sock)):
            try:
                op()
            except TinyvmmError:
                pass
        tinyvmm.delete_template("py", socket_path=self.sock)
        try:
            h.kill()
        except TinyvmmError:
            pass
        sb.kill()

    def test_requests_fit_the_spec(self):
        self.exercise()
        paths = self.spec["paths"]
        checked = 0
        for method, path, body in self.fake.json_bodies:
            op = paths.get(_template(path), {}).get(method.lower())
            if op is None:
                continue  # stdin/signal: not in the spec (the daemon answers 501)
            schema = op["requestBody"]["content"]["application/json"]["schema"]
            self.assertEqual(validate(schema, body, self.spec), [], f"{method} {path} {body}")
            checked += 1
        self.assertGreaterEqual(checked, 5)

    def test_fake_answers_fit_the_spec(self):
        self.exercise()
        paths = self.spec["paths"]
        for method, path, status, body in self.fake.answers:
            op = paths.get(_template(path), {}).get(method.lower())
            if op is None or body is None:
                continue
            resp = op["responses"].get(str(status))
            self.assertIsNotNone(resp, f"{method} {path} {status} not in the spec")
            schema = resp.get("content", {}).get("application/json", {}).get("schema")
            if schema:
                self.assertEqual(validate(schema, body, self.spec), [], f"{method} {path} {status} {body}")
