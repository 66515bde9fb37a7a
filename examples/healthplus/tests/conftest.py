"""The healthplus project for pytest-understudy: its understudy.json, served as a forward
proxy (simple-salesforce always speaks HTTPS to *.my.salesforce.com)."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Optional

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


@pytest.fixture(scope="session")
def understudy_config() -> Optional[str]:
    return str(HERE.parent / "understudy.json")


@pytest.fixture(scope="session")
def understudy_forward_proxy() -> bool:
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    try:
        import simple_salesforce  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            raise
        skip = pytest.mark.skip(reason="simple-salesforce is not installed")
        for item in items:
            item.add_marker(skip)
