from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Optional

import pytest

pytest_plugins = ["pytester"]


def understudy_bin() -> Optional[str]:
    b = os.environ.get("UNDERSTUDY_BIN") or shutil.which("understudy")
    if b:
        return str(Path(b).resolve())
    if os.environ.get("CI") == "true":
        pytest.fail("CI must set UNDERSTUDY_BIN (the understudy binary) for the plugin tests")
    pytest.skip("no understudy binary (set UNDERSTUDY_BIN)")
    return None


@pytest.fixture
def bin_path() -> str:
    b = understudy_bin()
    assert b
    return b


def _op(op_id: str, method: str, path: str, result: dict) -> dict:
    return {
        "operation_id": op_id, "description": f"test operation {op_id}",
        "match": {"method": method, "path": path},
        "input_schema": {"type": "object"}, "output_schema": {"type": "object", "required": ["status"]},
        "mock": {"schema_version": 1, "default_variant": "ok",
                 "variants": {"ok": {"result": result}, "other": {"result": {"status": 200, "data": {"hi": "other"}}}},
                 "examples": [{"variant": "ok", "input": {}, "expected": result},
                              {"variant": "other", "input": {}, "expected": {"status": 200, "data": {"hi": "other"}}}]},
    }


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A rest project: `api` with GET /hello."""
    d = tmp_path / "project"
    (d / "mocks" / "api").mkdir(parents=True)
    (d / "mocks" / "api" / "hello.json").write_text(json.dumps(
        _op("hello", "GET", "/hello", {"status": 200, "data": {"hi": "there"}})))
    (d / "understudy.json").write_text(json.dumps(
        {"data_dir": "data", "integrations": {"api": {"profile": "rest", "operations": "mocks/api"}}}))
    return d / "understudy.json"
