"""The desk project for pytest-understudy (test_plugin_matrix.py): its session server serves
clients/agents/desk/understudy.json."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import pytest

DESK = Path(__file__).resolve().parent.parent / "desk"


@pytest.fixture(scope="session")
def understudy_config() -> Optional[str]:
    return str(DESK / "understudy.json")


@pytest.fixture(scope="session")
def understudy_forward_proxy() -> bool:
    """simple-salesforce speaks HTTPS to *.salesforce.com: the Salesforce flow goes through
    the forward proxy (the MCP desk is reached at the server's URL as before)."""
    return True
