"""Shared fixtures: where the repository's conformance vectors live."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE = Path(os.environ.get("TURNGATE_CONFORMANCE_DIR", REPO / "tests" / "conformance"))


@pytest.fixture(scope="session")
def conformance_dir() -> Path:
    assert CONFORMANCE.is_dir(), f"no conformance vectors at {CONFORMANCE}"
    return CONFORMANCE
