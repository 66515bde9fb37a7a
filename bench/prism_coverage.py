#!/usr/bin/env python3
"""Side by side: understudy (import + replay) and Prism (`prism mock`) on the same real OpenAPI
documents, with the same requests (bench/prism-coverage.sh runs this; see the book's page
docs/src/guides/import-drift.md#real-documents).

For each document:
1. `understudy import --from openapi DOC` into a fresh project; every operation file it wrote
   (or its `.json.draft`) holds an example input generated from the operation's input schema.
2. Each such input becomes one request, built as understudy's request builder does
   (src/upstream/request.rs): `{name}` path captures (also inside a segment, `{Sid}.json`) and
   query captures rendered from the input, the other members as the body — form-encoded or
   multipart when the document's request body is a form, else JSON — for a method that
   carries one. An `Authorization` header of the document's security scheme is sent too
   (Prism checks credentials; understudy ignores them).
3. The same request goes to `understudy serve --mode replay` (under `/<integration>`) and to
   `prism mock DOC` (at the document's own paths).
4. An answer counts when its status is 2xx and its body satisfies the operation's response
   schema (the `data` of the imported output schema: the document's first 2xx response
   schema, references inlined). An operation with no request (the import wrote neither a
   mock nor a draft with an example) counts for neither.

Prints one table: document, operations, understudy working, Prism working. Only loopback
addresses get traffic. Needs: python3 with `jsonschema`, the understudy binary, prism.
"""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import jsonschema

METHODS = ["get", "put", "post", "delete", "options", "head", "patch", "trace"]
NO_BODY = {"GET", "HEAD", "DELETE", "OPTIONS"}


def read_doc(path):
    with open(path) as f:
        text = f.read()
    if path.endswith(".json"):
        return json.loads(text)
    import yaml  # PyYAML

    return yaml.safe_load(text)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_http(url, seconds):
    end = time.time() + seconds
    while time.time() < end:
        try:
            urllib.request.urlopen(url, timeout=2)
            return True
        except urllib.error.HTTPError:
            return True
        except Exception:
            time.sleep(0.3)
    return False


def enc(s):
    return urllib.parse.quote(s, safe="-_.~")


def text(v):
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v)


def render(template, inp, used):
    """A segment or query template: `{name}` captures, `{{`/`}}` literal braces."""
    out, i = "", 0
    while i < len(template):
        c = template[i]
        if c in "{}" and template[i + 1 : i + 2] == c:
            out += c
            i += 2
        elif c == "{":
            j = template.index("}", i)
            name = template[i + 1 : j]
            if name not in inp:
                raise ValueError(f"capture {{{name}}} not in the input")
            used.add(name)
            out += text(inp[name])
            i = j + 1
        else:
            out += c
            i += 1
    return out


def build(match, inp):
    """(method, path?query, body or None) as src/upstream/request.rs builds it."""
    used = set()
    segs = []
    for seg in match["path"].split("/"):
        if not seg:
            continue
        if seg == "*":
            raise ValueError("a `*` segment")
        segs.append(enc(render(seg, inp, used)))
    path = "/" + "/".join(segs)
    q = [(k, render(v, inp, used)) for k, v in sorted(match.get("query", {}).items())]
    if q:
        path += "?" + "&".join(f"{enc(k)}={enc(v)}" for k, v in q)
    method = match["method"].upper()
    rest = {k: v for k, v in inp.items() if k not in used}
    body = None
    if method not in NO_BODY and rest:
        body = rest["body"] if list(rest) == ["body"] else rest
    return method, path, body


def body_types(doc, op):
    body = op.get("requestBody") or {}
    for _ in range(8):
        ref = body.get("$ref")
        if not ref:
            break
        body = resolve(doc, ref)
    return list((body.get("content") or {}).keys())


def resolve(doc, ref):
    cur = doc
    for part in ref.lstrip("#/").split("/"):
        cur = cur[part.replace("~1", "/").replace("~0", "~")]
    return cur


def pointer_get(doc, pointer):
    cur = doc
    for part in pointer.lstrip("/").split("/"):
        part = part.replace("~1", "/").replace("~0", "~")
        cur = cur[int(part)] if isinstance(cur, list) else cur[part]
    return cur


def encode_body(body, types):
    json_body = any("json" in t for t in types)
    if not json_body and any(t.startswith("application/x-www-form-urlencoded") for t in types):
        pairs = []
        for k, v in (body or {}).items():
            for x in v if isinstance(v, list) else ([] if v is None else [v]):
                pairs.append(f"{enc(k)}={enc(text(x))}")
        return "application/x-www-form-urlencoded", "&".join(pairs).encode()
    if not json_body and any(t.startswith("multipart/form-data") for t in types):
        t = ""
        for k, v in (body or {}).items():
            for x in v if isinstance(v, list) else ([] if v is None else [v]):
                t += f'--bNd\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{text(x)}\r\n'
        t += "--bNd--\r\n"
        return "multipart/form-data; boundary=bNd", t.encode()
    return "application/json", json.dumps(body).encode()


def auth_header(doc):
    schemes = (doc.get("components") or {}).get("securitySchemes") or {}
    for s in schemes.values():
        if s.get("type") == "http" and s.get("scheme", "").lower() == "basic":
            return "Authorization", "Basic " + base64.b64encode(b"ACuser:secret").decode()
        if s.get("type") == "http" and s.get("scheme", "").lower() == "bearer":
            return "Authorization", "Bearer not-a-real-token"
        if s.get("type") == "apiKey" and s.get("in") == "header":
            return s["name"], "not-a-real-key"
    return None


def send(base, method, path, ctype, body, auth):
    req = urllib.request.Request(base + path, data=body, method=method)
    if body is not None:
        req.add_header("Content-Type", ctype)
    req.add_header("Accept", "application/json")
    if auth:
        req.add_header(*auth)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except Exception as e:  # connection reset, time-out: not an answer
        return 0, str(e).encode()


def judge(status, raw, data_schema, validator_cache):
    """Working: 2xx and, when the operation has a JSON response, data that satisfies it."""
    if not 200 <= status < 300:
        return f"answered {status}: {raw[:400]!r}"
    if data_schema is None:
        return None
    try:
        data = json.loads(raw) if raw.strip() else None
    except ValueError:
        return f"2xx but not JSON: {raw[:80]!r}"
    key = id(data_schema)
    if key not in validator_cache:
        validator_cache[key] = jsonschema.Draft202012Validator(data_schema)
    err = next(iter(validator_cache[key].iter_errors(data)), None)
    return None if err is None else f"fails the response schema at {list(err.absolute_path)}: {err.message[:120]}"


def coverage(binary, prism, doc_path, work, verbose):
    doc = read_doc(doc_path)
    total = sum(1 for item in doc["paths"].values() for m in METHODS if m in item)
    proj = os.path.join(work, "project")
    os.makedirs(proj)
    with open(os.path.join(proj, "understudy.json"), "w") as f:
        json.dump({"integrations": {"api": {"profile": "rest", "upstream": "https://api.example.test", "operations": "mocks/api"}}}, f)
    out = subprocess.run(
        [binary, "import", "--from", "openapi", "--integration", "api", "--format", "json",
         "--config", os.path.join(proj, "understudy.json"), "--out", os.path.join(proj, "mocks/api"), doc_path],
        capture_output=True)
    report = json.loads(out.stdout)
    up, pp = free_port(), free_port()
    logs = open(os.path.join(work, "servers.log"), "wb")
    us = subprocess.Popen([binary, "serve", "--config", os.path.join(proj, "understudy.json"), "--mode", "replay",
                           "--listen", f"127.0.0.1:{up}", "--data-dir", os.path.join(work, "data")],
                          stdout=logs, stderr=logs, start_new_session=True)
    pr = subprocess.Popen([prism, "mock", "-h", "127.0.0.1", "-p", str(pp), "-v", "error", doc_path],
                          stdout=logs, stderr=logs, start_new_session=True)
    try:
        if not wait_http(f"http://127.0.0.1:{up}/_understudy/api/health", 60):
            sys.exit(f"understudy serve did not start (log: {work}/servers.log)")
        if not wait_http(f"http://127.0.0.1:{pp}/", 120):
            sys.exit(f"prism mock did not start (log: {work}/servers.log)")
        auth = auth_header(doc)
        cache = {}
        u_ok = p_ok = sent = 0
        for o in report["operations"]:
            file = o.get("file")
            if not file or not os.path.exists(file):
                continue
            opf = json.load(open(file))
            exs = ((opf.get("mock") or {}).get("examples")) or []
            if not exs:
                continue
            try:
                method, path, body = build(opf["match"], exs[0]["input"])
            except ValueError as e:
                if verbose:
                    print(f"  {o['operation_id']}: no request: {e}", file=sys.stderr)
                continue
            src = o["sources"][0].split("#", 1)[1]
            op = pointer_get(doc, "/" + src)
            ctype, raw = encode_body(body, body_types(doc, op)) if body is not None else (None, None)
            data_schema = (opf.get("output_schema") or {}).get("properties", {}).get("data")
            if data_schema is not None and "$defs" in opf["output_schema"]:
                data_schema = dict(data_schema, **{"$defs": opf["output_schema"]["$defs"]})
            sent += 1
            s, b = send(f"http://127.0.0.1:{up}/api", method, path, ctype, raw, auth)
            why_u = judge(s, b, data_schema, cache) if o["status"] == "written" else f"import: {o['status']}"
            s, b = send(f"http://127.0.0.1:{pp}", method, path, ctype, raw, auth)
            why_p = judge(s, b, data_schema, cache)
            u_ok += why_u is None
            p_ok += why_p is None
            if verbose and (why_u or why_p):
                print(f"  {o['operation_id']} {method} {path}\n    understudy: {why_u or 'ok'}\n    prism: {why_p or 'ok'}", file=sys.stderr)
        return total, sent, u_ok, p_ok
    finally:
        for p in (us, pr):
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def main():
    binary, prism = sys.argv[1], sys.argv[2]
    docs = sys.argv[3:]
    verbose = os.environ.get("VERBOSE") == "1"
    rows = ["| document | operations | requests sent | understudy working | Prism working |", "|---|---|---|---|---|"]
    for d in docs:
        work = tempfile.mkdtemp(prefix="prism-coverage-")
        try:
            total, sent, u, p = coverage(binary, prism, d, work, verbose)
        finally:
            if os.environ.get("KEEP") != "1":
                shutil.rmtree(work, ignore_errors=True)
        pct = lambda n: f"{n} ({100.0 * n / total:.1f} %)" if total else "0"
        rows.append(f"| {os.path.basename(d)} | {total} | {sent} | {pct(u)} | {pct(p)} |")
        print(rows[-1], file=sys.stderr)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
