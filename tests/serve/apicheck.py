"""Check requests and responses of `tinyvmm serve` against its OpenAPI
document (vmm/serve/openapi.json). Standard library only (Python 3.11).

The schema language is the subset of OpenAPI 3.0 / JSON Schema the document
uses: $ref, type, nullable, enum, properties, required,
additionalProperties (bool or schema), items, minItems/maxItems,
minLength/maxLength, minProperties/maxProperties, minimum/maximum, pattern,
format date-time, oneOf/anyOf/allOf, and JSON Schema's type lists with
"null" (vmm/cli/run-result.schema.json). Besides the schemas it checks:
- the route: the method and concrete path must match an operation of the
  document (`/v1/sandboxes/sbx_ab/execs/ex_1` -> `/v1/sandboxes/{id}/execs/{eid}`),
  its path parameters their schemas, its query parameters the documented
  ones (an undocumented one is a failure; `x-query-prefix` names a family
  such as metadata.KEY);
- the status must be documented for the operation, the content type one of
  the documented ones, the response headers marked required present
  (Retry-After on 503), 204 has no body;
- an Error body's `code` is the HTTP status, and its `error` value belongs
  to that status (components.schemas.Error.x-status-of-error);
- x-ndjson content: every line is one JSON value valid against the schema.

Every check returns a list of failure strings (empty: fine).
"""
import datetime
import json
import re
import urllib.parse

__all__ = ["ApiCheck", "validate", "load"]

_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def load(path):
    with open(path, encoding="utf-8") as f:
        return ApiCheck(json.load(f))


def _type_ok(t, v):
    if isinstance(t, list):  # JSON Schema: one of several types
        return any(_type_ok(x, v) for x in t)
    if t == "null":
        return v is None
    if t == "object":
        return isinstance(v, dict)
    if t == "array":
        return isinstance(v, list)
    if t == "string":
        return isinstance(v, str)
    if t == "boolean":
        return isinstance(v, bool)
    if t == "integer":
        return isinstance(v, int) and not isinstance(v, bool)
    if t == "number":
        return isinstance(v, (int, float)) and not isinstance(v, bool)
    raise ValueError("unknown schema type %r" % t)


def _short(v, n=80):
    s = json.dumps(v) if not isinstance(v, (bytes, bytearray)) else repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def validate(schema, inst, doc=None, where="$"):
    """Failures of instance inst against schema (refs resolved in doc)."""
    errs = []
    _validate(schema, inst, doc or {}, where, errs, 0)
    return errs


def _resolve(doc, r):
    if not r.startswith("#/"):
        raise ValueError("only local $ref: %r" % r)
    node = doc
    for part in r[2:].split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[part]
    return node


def _validate(s, v, doc, where, errs, depth):
    if depth > 64:
        errs.append("%s: schema nesting too deep" % where)
        return
    if "$ref" in s:
        _validate(_resolve(doc, s["$ref"]), v, doc, where, errs, depth + 1)
        return
    if v is None:
        if s.get("nullable"):
            return
        if isinstance(s.get("type"), list) and "null" in s["type"]:
            return
        if "type" in s or s.get("enum") is not None or "properties" in s:
            errs.append("%s: null where not nullable" % where)
            return
    t = s.get("type")
    if t is not None and not _type_ok(t, v):
        errs.append("%s: expected %s, got %s" % (where, t, _short(v)))
        return
    if "enum" in s and v not in s["enum"]:
        errs.append("%s: %s not one of %s" % (where, _short(v), _short(s["enum"], 200)))
    if isinstance(v, str):
        if "minLength" in s and len(v) < s["minLength"]:
            errs.append("%s: shorter than %d" % (where, s["minLength"]))
        if "maxLength" in s and len(v) > s["maxLength"]:
            errs.append("%s: longer than %d" % (where, s["maxLength"]))
        if "pattern" in s and not re.search(s["pattern"], v):
            errs.append("%s: %s does not match %s" % (where, _short(v), s["pattern"]))
        if s.get("format") == "date-time":
            ok = bool(_DATE_TIME.match(v))
            if ok:
                try:
                    datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
                except ValueError:
                    ok = False
            if not ok:
                errs.append("%s: %s is not an RFC 3339 date-time" % (where, _short(v)))
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        if "minimum" in s and v < s["minimum"]:
            errs.append("%s: %s below minimum %s" % (where, v, s["minimum"]))
        if "maximum" in s and v > s["maximum"]:
            errs.append("%s: %s above maximum %s" % (where, v, s["maximum"]))
    if isinstance(v, list):
        if "minItems" in s and len(v) < s["minItems"]:
            errs.append("%s: fewer than %d items" % (where, s["minItems"]))
        if "maxItems" in s and len(v) > s["maxItems"]:
            errs.append("%s: more than %d items" % (where, s["maxItems"]))
        if "items" in s:
            for i, item in enumerate(v):
                _validate(s["items"], item, doc, "%s[%d]" % (where, i), errs, depth + 1)
    if isinstance(v, dict):
        props = s.get("properties", {})
        for k in s.get("required", []):
            if k not in v:
                errs.append("%s: missing required %r" % (where, k))
        if "minProperties" in s and len(v) < s["minProperties"]:
            errs.append("%s: fewer than %d properties" % (where, s["minProperties"]))
        if "maxProperties" in s and len(v) > s["maxProperties"]:
            errs.append("%s: more than %d properties" % (where, s["maxProperties"]))
        extra = s.get("additionalProperties", True)
        for k, item in v.items():
            sub = "%s.%s" % (where, k)
            if k in props:
                _validate(props[k], item, doc, sub, errs, depth + 1)
            elif extra is False:
                errs.append("%s: property %r not allowed" % (where, k))
            elif isinstance(extra, dict):
                _validate(extra, item, doc, sub, errs, depth + 1)
    for sub in s.get("allOf", []):
        _validate(sub, v, doc, where, errs, depth + 1)
    if "anyOf" in s:
        if not any(not validate(sub, v, doc, where) for sub in s["anyOf"]):
            errs.append("%s: matches none of anyOf" % where)
    if "oneOf" in s:
        results = [validate(sub, v, doc, where) for sub in s["oneOf"]]
        n = sum(1 for r in results if not r)
        if n == 0:
            # Say why for the closest branch (fewest failures).
            best = min(results, key=len)
            errs.append("%s: matches none of oneOf (closest: %s)" % (where, "; ".join(best[:3])))
        elif n > 1:
            errs.append("%s: matches %d branches of oneOf, not exactly one" % (where, n))


def _media(ct):
    return (ct or "").split(";")[0].strip().lower()


def _split_target(target):
    path, _, query = target.partition("?")
    return path, query


class ApiCheck:
    def __init__(self, doc):
        self.doc = doc
        self._routes = []
        for tmpl, item in doc.get("paths", {}).items():
            segs = tmpl.strip("/").split("/")
            self._routes.append((tmpl, segs, item))
        err = doc.get("components", {}).get("schemas", {}).get("Error", {})
        self.status_of_error = err.get("x-status-of-error", {})
        http = doc.get("x-http-errors", {})
        self.http_statuses = set(http.get("statuses", []))
        self.http_error = http.get("error", "bad_request")
        self.any_route_statuses = set(x["status"] for x in http.get("any_route", []))

    # -- routes ---------------------------------------------------------
    def match(self, method, target):
        """(template, operation, path item, path params) or raise LookupError."""
        path, _ = _split_target(target)
        if not path.startswith("/"):
            raise LookupError("%s %s: not an absolute path" % (method, path))
        segs = path.strip("/").split("/")
        found_path = False
        for tmpl, tsegs, item in self._routes:
            if len(tsegs) != len(segs):
                continue
            params = {}
            for t, s in zip(tsegs, segs):
                if t.startswith("{") and t.endswith("}"):
                    if not s:
                        break
                    params[t[1:-1]] = urllib.parse.unquote(s)
                elif t != s:
                    break
            else:
                found_path = True
                op = item.get(method.lower())
                if op is None:
                    continue
                return tmpl, op, item, params
        if found_path:
            raise LookupError("%s %s: method not documented for this path" % (method, path))
        raise LookupError("%s %s: no such route in the API document" % (method, path))

    def methods_of(self, target):
        """The methods the document lists for target's path (upper case),
        what a 405's Allow must say (x-http-errors other_methods)."""
        path, _ = _split_target(target)
        segs = path.strip("/").split("/")
        out = set()
        for tmpl, tsegs, item in self._routes:
            if len(tsegs) == len(segs) and all(t == s or (t.startswith("{") and t.endswith("}") and s)
                                               for t, s in zip(tsegs, segs)):
                out |= {m.upper() for m in item if m in ("get", "put", "post", "delete", "patch", "head")}
        return out

    def _params(self, item, op, where):
        out = [p for p in item.get("parameters", []) if p.get("in") == where]
        names = {p["name"] for p in op.get("parameters", []) if p.get("in") == where}
        out = [p for p in out if p["name"] not in names]
        return out + [p for p in op.get("parameters", []) if p.get("in") == where]

    def _query_value(self, schema, raw, where):
        s = schema
        if "$ref" in s:
            s = _resolve(self.doc, s["$ref"])
        t = s.get("type")
        if t == "integer":
            if not re.fullmatch(r"-?[0-9]+", raw):
                return ["%s: %r is not an integer" % (where, raw)]
            return validate(s, int(raw), self.doc, where)
        if t == "boolean":
            if raw not in ("true", "false", "1", "0"):
                return ["%s: %r is not a boolean" % (where, raw)]
            return []
        return validate(s, raw, self.doc, where)

    # -- requests -------------------------------------------------------
    def check_request(self, method, target, body=None, content_type=None, headers=None):
        """Failures of a request: route, parameters, body (bytes, str, or
        an already parsed JSON value; None: no body)."""
        try:
            tmpl, op, item, pparams = self.match(method, target)
        except LookupError as e:
            return [str(e)]
        errs = []
        where = "%s %s request" % (method, tmpl)
        for p in self._params(item, op, "path"):
            errs += validate(p.get("schema", {}), pparams.get(p["name"]), self.doc,
                             "%s path {%s}" % (where, p["name"]))
        _, query = _split_target(target)
        qparams = self._params(item, op, "query")
        byname = {p["name"]: p for p in qparams}
        prefixes = [(p["x-query-prefix"], p) for p in qparams if "x-query-prefix" in p]
        seen = set()
        for k, val in urllib.parse.parse_qsl(query, keep_blank_values=True):
            seen.add(k)
            if k in byname and "x-query-prefix" not in byname[k]:
                errs += self._query_value(byname[k].get("schema", {}), val, "%s query %s" % (where, k))
                continue
            for pre, p in prefixes:
                if k.startswith(pre) and len(k) > len(pre):
                    sub = p.get("schema", {}).get("additionalProperties", {})
                    if isinstance(sub, dict):
                        errs += validate(sub, val, self.doc, "%s query %s" % (where, k))
                    break
            else:
                errs.append("%s: undocumented query parameter %r" % (where, k))
        for p in qparams:
            if p.get("required") and p["name"] not in seen:
                errs.append("%s: missing required query parameter %r" % (where, p["name"]))
        hdrs = {k.lower(): v for k, v in (headers or {}).items()}
        for p in self._params(item, op, "header"):
            v = hdrs.get(p["name"].lower())
            if v is None:
                if p.get("required"):
                    errs.append("%s: missing header %s" % (where, p["name"]))
            else:
                errs += validate(p.get("schema", {}), v, self.doc, "%s header %s" % (where, p["name"]))
        rb = op.get("requestBody")
        has_body = body is not None and body != b"" and body != ""
        if rb is None:
            if has_body:
                errs.append("%s: a body where none is documented" % where)
            return errs
        if not has_body:
            if rb.get("required"):
                errs.append("%s: missing required body" % where)
            return errs
        content = rb.get("content", {})
        mt = _media(content_type) if content_type else None
        if mt is None:
            mt = "application/json" if "application/json" in content else next(iter(content))
        if mt not in content:
            errs.append("%s: content type %r not documented (%s)" % (where, mt, ", ".join(content)))
            return errs
        if mt == "application/json":
            value, perr = self._parse_json(body, where)
            if perr:
                return errs + [perr]
            errs += validate(content[mt].get("schema", {}), value, self.doc, where + " body")
        return errs

    # -- responses ------------------------------------------------------
    def _parse_json(self, body, where):
        if isinstance(body, (bytes, bytearray)):
            try:
                body = bytes(body).decode("utf-8")
            except UnicodeDecodeError:
                return None, "%s: body is not UTF-8" % where
        if isinstance(body, str):
            try:
                return json.loads(body), None
            except ValueError as e:
                return None, "%s: body is not JSON (%s): %s" % (where, e, _short(body))
        return body, None

    def _response_obj(self, method, target, status):
        tmpl, op, item, _ = self.match(method, target)
        resps = op.get("responses", {})
        r = resps.get(str(status)) or resps.get("%dXX" % (status // 100)) or resps.get("default")
        if r is None:
            raise LookupError("%s %s: status %d not documented (documented: %s)"
                              % (method, tmpl, status, ", ".join(sorted(resps))))
        return tmpl, r

    def check_response(self, method, target, status, body, content_type=None, headers=None):
        """Failures of a response: status documented, headers, content
        type, body (bytes/str, or a parsed JSON value) against its schema."""
        try:
            tmpl, r = self._response_obj(method, target, status)
        except LookupError as e:
            if status in self.any_route_statuses:
                # a bound of the connection layer (x-http-errors)
                return self.check_error(status, body)
            return [str(e)]
        where = "%s %s -> %d" % (method, tmpl, status)
        errs = []
        hdrs = {k.lower(): v for k, v in _items(headers)}
        for name, h in r.get("headers", {}).items():
            v = hdrs.get(name.lower())
            if v is None:
                if h.get("required") and headers is not None:
                    errs.append("%s: missing header %s" % (where, name))
            else:
                errs += self._query_value(h.get("schema", {}), v.strip(), "%s header %s" % (where, name))
        content = r.get("content")
        empty = body is None or body == b"" or body == ""
        if not content:
            if not empty:
                errs.append("%s: a body where none is documented" % where)
            return errs
        mt = _media(content_type)
        if not mt:
            if len(content) == 1:
                mt = next(iter(content))
            else:
                errs.append("%s: no Content-Type (documented: %s)" % (where, ", ".join(content)))
                return errs
        if mt not in content:
            errs.append("%s: content type %r not documented (%s)" % (where, mt, ", ".join(content)))
            return errs
        media = content[mt]
        schema = media.get("schema", {})
        if media.get("x-ndjson"):
            if isinstance(body, (bytes, bytearray)):
                body = bytes(body).decode("utf-8", "replace")
            lines = body if isinstance(body, list) else [ln for ln in body.split("\n") if ln.strip()]
            for i, ln in enumerate(lines):
                errs += self.check_line(schema, ln, "%s line %d" % (where, i + 1))
            return errs
        if mt != "application/json":
            return errs
        if empty:
            return errs + ["%s: empty body where JSON is documented" % where]
        value, perr = self._parse_json(body, where)
        if perr:
            return errs + [perr]
        errs += validate(schema, value, self.doc, where + " body")
        errs += self._error_semantics(schema, status, value, where)
        return errs

    def line_schema(self, method, target, status, content_type):
        """The schema of one line of an ndjson response, or raise LookupError."""
        tmpl, r = self._response_obj(method, target, status)
        media = (r.get("content") or {}).get(_media(content_type))
        if not media or not media.get("x-ndjson"):
            raise LookupError("%s %s -> %d: %r is not a documented ndjson stream"
                              % (method, tmpl, status, content_type))
        return media.get("schema", {})

    def check_line(self, schema, line, where="line"):
        """Failures of one ndjson line (str/bytes or parsed) against schema."""
        if isinstance(schema, str):
            schema = {"$ref": "#/components/schemas/" + schema}
        value, perr = self._parse_json(line, where)
        if perr:
            return [perr]
        return validate(schema, value, self.doc, where)

    def _error_semantics(self, schema, status, value, where):
        if "$ref" not in schema or not isinstance(value, dict):
            return []
        name = schema["$ref"].rsplit("/", 1)[-1]
        if name not in ("Error", "SandboxExpiredError"):
            return []
        errs = []
        if value.get("code") != status:
            errs.append("%s: error code %r is not the HTTP status" % (where, value.get("code")))
        want = self.status_of_error.get(value.get("error"))
        if want is not None and want != status:
            errs.append("%s: error %r belongs to status %d" % (where, value.get("error"), want))
        return errs

    def check_error(self, status, body, http_level=False):
        """Failures of an error answer outside a documented route (an
        unknown path, a 405, a malformed request): an Error body whose code
        is the status. http_level: an answer of the HTTP layer, where
        x-http-errors' statuses with error bad_request are allowed too."""
        where = "error %d" % status
        value, perr = self._parse_json(body, where)
        if perr:
            return [perr]
        schema = {"$ref": "#/components/schemas/Error"}
        if status == 410:
            schema = {"$ref": "#/components/schemas/SandboxExpiredError"}
        errs = validate(schema, value, self.doc, where)
        if errs:
            return errs
        if value.get("code") != status:
            return ["%s: error code %r is not the HTTP status" % (where, value.get("code"))]
        want = self.status_of_error.get(value.get("error"))
        if want != status:
            if not (http_level and status in self.http_statuses and value.get("error") == self.http_error):
                return ["%s: error %r belongs to status %s" % (where, value.get("error"), want)]
        return []


def _items(headers):
    if headers is None:
        return []
    if isinstance(headers, dict):
        return list(headers.items())
    return list(headers)
