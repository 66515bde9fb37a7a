"""pytest-understudy: run each test against its own understudy attempt."""
from .client import Attempt, Server, UnderstudyError, UnderstudyUnsupported, VerdictFailed

__all__ = ["Attempt", "Server", "UnderstudyError", "UnderstudyUnsupported", "VerdictFailed"]
