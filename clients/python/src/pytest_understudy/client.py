"""A small client of understudy's admin API (standard library only)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

API = "/_understudy/api"
UI = "/_understudy/ui"
READY_PREFIX = "understudy listening on "


class UnderstudyError(RuntimeError):
    """understudy answered an error, or could not be started."""


class UnderstudyUnsupported(UnderstudyError):
    """The running understudy does not have this feature (an older build)."""


class VerdictFailed(AssertionError):
    """The attempt's verdict is `fail`; the message lists the reasons."""

    def __init__(self, attempt_id: str, reasons: Sequence[str]):
        self.attempt_id = attempt_id
        self.reasons = list(reasons)
        lines = "\n".join(f"  - {r}" for r in self.reasons) or "  (no reason given)"
        super().__init__(f"understudy verdict fail for attempt {attempt_id}:\n{lines}")


def _request(
    base: str, method: str, path: str, body: Optional[Any] = None, admin_token: Optional[str] = None
) -> Tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if admin_token:
        req.add_header("Authorization", f"Bearer {admin_token}")
    # Never through an environment proxy: understudy is local.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def verdict_reasons(envelope: Mapping[str, Any]) -> List[str]:
    """The envelope's own `verdict_reasons`, one `code: message` line each (understudy's one
    verdict: nothing is recomputed or read from other members here)."""
    out = []
    for r in envelope.get("verdict_reasons") or []:
        if isinstance(r, Mapping):
            out.append(f"{r.get('code', 'unknown')}: {r.get('message', '')}")
        else:
            out.append(str(r))
    if not out and envelope.get("verdict") == "fail":
        out.append("the verdict is fail")
    return out


class Server:
    """A running understudy: started here (`understudy serve` on a free port) or reached at a URL."""

    def __init__(self, url: str, process: Optional[subprocess.Popen] = None,
                 workdir: Optional[Path] = None, ca_cert: Optional[Path] = None,
                 admin_token: Optional[str] = None, forward_proxy: bool = False):
        self.url = url.rstrip("/")
        self.process = process
        self.workdir = workdir
        self.ca_cert = ca_cert
        self.admin_token = admin_token
        self.forward_proxy = forward_proxy

    @classmethod
    def start(cls, binary: str, config: Optional[str] = None, forward_proxy: bool = False,
              extra_args: Sequence[str] = (), startup_timeout: float = 30.0) -> "Server":
        """`understudy serve --listen 127.0.0.1:0` with a fresh data dir; waits for the readiness line."""
        workdir = Path(tempfile.mkdtemp(prefix="pytest-understudy-"))
        args = [binary, "serve", "--listen", "127.0.0.1:0", "--data-dir", str(workdir / "data")]
        if config:
            args += ["--config", str(config)]
        ca_cert = None
        if forward_proxy:
            ca = subprocess.run([binary, "ca", "init", "--dir", str(workdir / "certs")],
                                capture_output=True, text=True)
            if ca.returncode != 0:
                raise UnderstudyError(f"understudy ca init failed: {ca.stderr.strip()}")
            args += ["--forward-proxy", "--ca-dir", str(workdir / "certs")]
            ca_cert = workdir / "certs" / "understudy-ca.pem"
        args += list(extra_args)
        log = open(workdir / "understudy.log", "wb")
        env = dict(os.environ)
        env.pop("UNDERSTUDY_ADMIN_TOKEN", None)
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL, env=env)
        line: List[bytes] = []
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(startup_timeout)
        text = line[0].decode().strip() if line else ""
        if not text.startswith(READY_PREFIX):
            proc.kill()
            proc.wait()
            log.close()
            raise UnderstudyError(
                f"understudy serve did not become ready (stdout {text!r}); its log:\n"
                + (workdir / "understudy.log").read_text(errors="replace")[-4000:])
        return cls(text[len(READY_PREFIX):], process=proc, workdir=workdir, ca_cert=ca_cert,
                   forward_proxy=forward_proxy)

    def close(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def request(self, method: str, path: str, body: Optional[Any] = None) -> Tuple[int, Any]:
        status, raw = _request(self.url, method, path, body, self.admin_token)
        try:
            return status, json.loads(raw) if raw else None
        except ValueError:
            return status, raw.decode(errors="replace")

    def fetch(self, path: str) -> bytes:
        status, raw = _request(self.url, "GET", path, None, self.admin_token)
        if status != 200:
            raise UnderstudyError(f"GET {path} answered {status}: {raw[:500]!r}")
        return raw

    def create_attempt(self, test_run_id: Optional[str] = None, contracts: Sequence[str] = (),
                       variants: Optional[Mapping[str, str]] = None, ttl_s: Optional[int] = None) -> "Attempt":
        body: Dict[str, Any] = {}
        if test_run_id:
            body["test_run_id"] = test_run_id
        if variants:
            body["variants"] = dict(variants)
        if contracts:
            body["contracts"] = list(contracts)
        if ttl_s:
            body["ttl_s"] = ttl_s
        status, v = self.request("POST", f"{API}/attempts", body)
        if status != 201:
            msg = v.get("error", {}).get("message", v) if isinstance(v, dict) else v
            if contracts and status == 400 and "contracts" in str(msg):
                raise UnderstudyUnsupported(f"contracts are not supported by this understudy build: {msg}")
            raise UnderstudyError(f"attempt creation answered {status}: {msg}")
        return Attempt(self, v)


class Attempt:
    """One isolated attempt: its own state, evidence and lease."""

    def __init__(self, server: Server, created: Mapping[str, Any]):
        self.server = server
        self.attempt_id: str = created["attempt_id"]
        self.token: str = created["token"]
        self.base_urls: Dict[str, str] = dict(created.get("base_urls", {}))
        self.created = dict(created)
        self.ended: Optional[Dict[str, Any]] = None

    def base_url(self, integration: str) -> str:
        """The attempt's base URL of an integration (`http://HOST:PORT/~<token>/<integration>`)."""
        try:
            return self.base_urls[integration]
        except KeyError:
            raise KeyError(f"no integration {integration!r}; the project has {sorted(self.base_urls)}") from None

    @property
    def proxy_url(self) -> str:
        """The forward-proxy URL carrying this attempt's token (needs `--understudy-forward-proxy`)."""
        if not self.server.forward_proxy:
            raise UnderstudyError("the server was not started with --forward-proxy (use --understudy-forward-proxy)")
        host = self.server.url.split("://", 1)[1]
        return f"http://{self.token}:x@{host}"

    @property
    def proxies(self) -> Dict[str, str]:
        """`proxies=` for requests / simple-salesforce."""
        return {"https": self.proxy_url, "http": self.proxy_url}

    @property
    def ca_cert(self) -> Optional[str]:
        return str(self.server.ca_cert) if self.server.ca_cert else None

    def event(self, name: str, kind: str = "checkpoint", text: Optional[str] = None, **data: Any) -> int:
        """Record an agent-side event (docs/src/reference/events.md); returns its sequence."""
        body: Dict[str, Any] = {"name": name, "kind": kind}
        if text is not None:
            body["text"] = text
        if data:
            body["data"] = data
        status, v = self.server.request("POST", f"{API}/attempts/{self.attempt_id}/events", body)
        if status in (404, 405):
            raise UnderstudyUnsupported("agent-side events are not supported by this understudy build")
        if status != 201:
            raise UnderstudyError(f"event {name!r} answered {status}: {v}")
        return int(v["sequence"])

    def evidence(self) -> Dict[str, Any]:
        status, v = self.server.request("GET", f"{API}/attempts/{self.attempt_id}/evidence")
        if status != 200:
            raise UnderstudyError(f"evidence answered {status}: {v}")
        return v

    def end(self) -> Dict[str, Any]:
        """End the attempt (idempotent): its state is dropped, its evidence kept."""
        if self.ended is None:
            status, v = self.server.request("DELETE", f"{API}/attempts/{self.attempt_id}")
            if status != 200:
                raise UnderstudyError(f"ending the attempt answered {status}: {v}")
            self.ended = v
        return self.ended

    def verdict(self) -> Dict[str, Any]:
        """The evidence envelope (with `verdict`, `verdict_reasons`); when the token may not
        read it (403: a token of the `run` scope only), the same verdict from
        `POST …/verify`, which `run` may ask for."""
        status, v = self.server.request("GET", f"{API}/attempts/{self.attempt_id}/evidence")
        if status == 200:
            return v
        if status != 403:
            raise UnderstudyError(f"evidence answered {status}: {v}")
        status, v = self.server.request("POST", f"{API}/attempts/{self.attempt_id}/verify", {})
        if status != 200:
            raise UnderstudyError(f"verify answered {status}: {v}")
        return v

    def check_verdict(self) -> Dict[str, Any]:
        """End the attempt and raise VerdictFailed when its verdict is `fail`."""
        self.end()
        env = self.verdict()
        verdict = env.get("verdict")
        if verdict not in ("pass", "fail"):
            # Not understudy's verdict: the attempt could not be judged, never a pass.
            raise UnderstudyError(
                f"the evidence of attempt {self.attempt_id} holds no verdict (got {verdict!r})")
        if verdict != "pass":
            raise VerdictFailed(self.attempt_id, verdict_reasons(env))
        return env

    def write_reports(self, directory: Path, stem: str) -> List[Path]:
        """The live HTML page and JUnit XML of this attempt into `directory`."""
        directory.mkdir(parents=True, exist_ok=True)
        out = []
        for suffix, path in ((".html", f"{UI}/attempts/{self.attempt_id}"),
                             (".xml", f"{UI}/attempts/{self.attempt_id}/junit.xml")):
            p = directory / f"{stem}{suffix}"
            p.write_bytes(self.server.fetch(path))
            out.append(p)
        return out


def find_binary(explicit: Optional[str] = None) -> str:
    b = explicit or os.environ.get("UNDERSTUDY_BIN") or shutil.which("understudy")
    if not b:
        raise UnderstudyError("no understudy binary: set UNDERSTUDY_BIN, --understudy-bin, or put it on PATH")
    return b
