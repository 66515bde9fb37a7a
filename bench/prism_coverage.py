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

A Postman collection (`*.postman_collection.json`) is imported with `--from postman` and
given to `prism mock` as it is; each of its requests is sent as Postman sends it (path
variables, collection variables, enabled query and headers, raw / urlencoded / formdata body,
the request's or collection's auth) to both, and counts when the answer is the request's
saved response: the first 2xx one (else the first), its status and its JSON body (a value
understudy scrubbed as a secret counts as equal) — what tests/it/import_postman_real.rs checks.

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


def pm_subst(s, variables):
    """`{{name}}` → the collection variable's value (kept as written when undefined)."""
    out, rest = "", s
    while "{{" in rest:
        i = rest.index("{{")
        out += rest[:i]
        j = rest.find("}}", i + 2)
        if j < 0:
            return out + rest[i:]
        name = rest[i + 2 : j]
        out += text(variables[name]) if name in variables else rest[i : j + 2]
        rest = rest[j + 2 :]
    return out + rest


def pm_enabled(lst):
    return [x for x in (lst or []) if not x.get("disabled")]


def pm_requests(items, at, out):
    for i, item in enumerate(items):
        if "item" in item:
            pm_requests(item["item"], f"{at}/{i}/item", out)
        else:
            out.append((f"{at}/{i}", item))


def pm_auth(auth, variables):
    """The header a Postman client sends for an `auth` block (basic, bearer, apikey)."""
    if not auth:
        return None
    kind = auth.get("type")
    vals = {x.get("key"): pm_subst(text(x.get("value") or ""), variables) for x in auth.get(kind) or []}
    if kind == "basic":
        raw = f"{vals.get('username', '')}:{vals.get('password', '')}".encode()
        return "Authorization", "Basic " + base64.b64encode(raw).decode()
    if kind == "bearer":
        return "Authorization", "Bearer " + vals.get("token", "")
    if kind == "apikey" and vals.get("in", "header") == "header":
        return vals.get("key", "X-API-Key"), vals.get("value", "")
    return None


def pm_call(req, variables, coll_auth=None):
    """(method, path?query, headers, body) a Postman client sends for a v2.1 request, relative
    to `{{baseUrl}}` (the call tests/it/import_postman_real.rs makes, plus the request's or
    the collection's `auth`: Prism checks credentials, understudy never does)."""
    method = req.get("method", "GET").upper()
    url = req["url"]
    pvars = {v["key"]: v.get("value") for v in url.get("variable") or [] if "key" in v}
    segs = []
    for s in url.get("path") or []:
        s = text(pvars.get(s[1:], "")) if s.startswith(":") else pm_subst(s, variables)
        segs.append(urllib.parse.quote(s, safe="-_.~!$&'()*+,;=:@"))
    path = "/" + "/".join(segs)
    q = [f"{enc(pm_subst(x.get('key') or '', variables))}={enc(pm_subst(text(x.get('value') or ''), variables))}"
         for x in pm_enabled(url.get("query"))]
    if q:
        path += "?" + "&".join(q)
    headers = [(h["key"], pm_subst(text(h.get("value") or ""), variables)) for h in pm_enabled(req.get("header"))]
    auth = pm_auth(req.get("auth") or coll_auth, variables)
    if auth and not any(k.lower() == auth[0].lower() for k, _ in headers):
        headers.append(auth)
    has_ct = any(k.lower() == "content-type" for k, _ in headers)
    body = None
    b = req.get("body") or {}
    mode = b.get("mode")
    if mode == "raw":
        body = pm_subst(b.get("raw") or "", variables).encode()
        if not has_ct and ((b.get("options") or {}).get("raw") or {}).get("language") == "json":
            headers.append(("Content-Type", "application/json"))
    elif mode == "urlencoded":
        body = "&".join(f"{enc(pm_subst(f.get('key') or '', variables))}={enc(pm_subst(text(f.get('value') or ''), variables))}"
                        for f in pm_enabled(b.get("urlencoded"))).encode()
        if not has_ct:
            headers.append(("Content-Type", "application/x-www-form-urlencoded"))
    elif mode == "formdata":
        t = ""
        for f in pm_enabled(b.get("formdata")):
            if f.get("type") == "file":
                continue
            t += f'--pmBoundary\r\nContent-Disposition: form-data; name="{pm_subst(f.get("key") or "", variables)}"\r\n\r\n{pm_subst(text(f.get("value") or ""), variables)}\r\n'
        body = (t + "--pmBoundary--\r\n").encode()
        headers = [(k, v) for k, v in headers if k.lower() != "content-type"]
        headers.append(("Content-Type", "multipart/form-data; boundary=pmBoundary"))
    return method, path, headers, body


def pm_send(base, method, path, headers, body):
    req = urllib.request.Request(base + path, data=body, method=method)
    for k, v in headers:
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except Exception as e:
        return 0, str(e).encode()


def pm_judge(status, raw, saved):
    """Working: the saved response's status (the first 2xx, else the first), and its body when
    that is JSON (a value understudy scrubbed as a secret, `[scrubbed]`, counts as equal)."""
    want = saved["code"]
    if status != want:
        return f"answered {status}, saved {want}: {raw[:300]!r}"
    try:
        want_body = json.loads(saved.get("body") or "")
    except ValueError:
        return None
    try:
        got = json.loads(raw)
    except ValueError:
        return f"not JSON: {raw[:80]!r}"
    return None if same_but_scrubbed(got, want_body) else f"not the saved body: {raw[:200]!r}"


def same_but_scrubbed(got, want):
    if got == "[scrubbed]" and want is not None:
        return True
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(same_but_scrubbed(got[k], want[k]) for k in got)
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(same_but_scrubbed(g, w) for g, w in zip(got, want))
    return got == want


def postman_coverage(binary, prism, coll_path, work, verbose):
    """A Postman collection: `import --from postman` + replay, and `prism mock` on the same
    collection (Prism reads Postman v2.1), each asked every request of the collection as
    Postman sends it, judged against the request's saved 2xx response."""
    coll = json.load(open(coll_path))
    variables = {v["key"]: v.get("value") for v in coll.get("variable") or [] if "key" in v}
    reqs = []
    pm_requests(coll.get("item") or [], "item", reqs)
    proj = os.path.join(work, "project")
    os.makedirs(proj)
    with open(os.path.join(proj, "understudy.json"), "w") as f:
        json.dump({"integrations": {"api": {"profile": "rest", "upstream": "https://api.example.test", "operations": "mocks/api"}}}, f)
    subprocess.run(
        [binary, "import", "--from", "postman", "--integration", "api", "--format", "json",
         "--config", os.path.join(proj, "understudy.json"), "--out", os.path.join(proj, "mocks/api"), coll_path],
        capture_output=True)
    up, pp = free_port(), free_port()
    logs = open(os.path.join(work, "servers.log"), "wb")
    us = subprocess.Popen([binary, "serve", "--config", os.path.join(proj, "understudy.json"), "--mode", "replay",
                           "--listen", f"127.0.0.1:{up}", "--data-dir", os.path.join(work, "data")],
                          stdout=logs, stderr=logs, start_new_session=True)
    pr = subprocess.Popen([prism, "mock", "-h", "127.0.0.1", "-p", str(pp), "-v", "error", coll_path],
                          stdout=logs, stderr=logs, start_new_session=True)
    try:
        if not wait_http(f"http://127.0.0.1:{up}/_understudy/api/health", 60):
            sys.exit(f"understudy serve did not start (log: {work}/servers.log)")
        if not wait_http(f"http://127.0.0.1:{pp}/", 120):
            sys.exit(f"prism mock did not start (log: {work}/servers.log)")
        u_ok = p_ok = sent = 0
        for at, item in reqs:
            saved_all = [r for r in item.get("response") or [] if r.get("code")]
            saved = next((r for r in saved_all if 200 <= r["code"] < 300), saved_all[0] if saved_all else None)
            if saved is None:
                if verbose:
                    print(f"  {at}: no saved response with a code", file=sys.stderr)
                continue
            method, path, headers, body = pm_call(item["request"], variables, coll.get("auth"))
            sent += 1
            s, b = pm_send(f"http://127.0.0.1:{up}/api", method, path, headers, body)
            why_u = pm_judge(s, b, saved)
            s, b = pm_send(f"http://127.0.0.1:{pp}", method, path, headers, body)
            why_p = pm_judge(s, b, saved)
            u_ok += why_u is None
            p_ok += why_p is None
            if verbose and (why_u or why_p):
                print(f"  {at} {method} {path}\n    understudy: {why_u or 'ok'}\n    prism: {why_p or 'ok'}", file=sys.stderr)
        return len(reqs), sent, u_ok, p_ok
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
    rows = ["| document | operations (collection: requests) | requests sent | understudy working | Prism working |", "|---|---|---|---|---|"]
    for d in docs:
        work = tempfile.mkdtemp(prefix="prism-coverage-")
        try:
            run = postman_coverage if d.endswith(".postman_collection.json") else coverage
            total, sent, u, p = run(binary, prism, d, work, verbose)
        finally:
            if os.environ.get("KEEP") != "1":
                shutil.rmtree(work, ignore_errors=True)
        pct = lambda n: f"{n} ({100.0 * n / total:.1f} %)" if total else "0"
        rows.append(f"| {os.path.basename(d)} | {total} | {sent} | {pct(u)} | {pct(p)} |")
        print(rows[-1], file=sys.stderr)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
