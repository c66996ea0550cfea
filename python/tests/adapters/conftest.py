"""Fixtures of the adapter tests: a supervised turn over a temporary workspace, its gate with
the ``defer_all`` approver (what the adapters use: an ask becomes the framework's pause), and
the audit rows of the turn."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

import turngate


class Turn:
    def __init__(self, root: Path, mode: str = "auto_accept_edits") -> None:
        self.workspace = root / "workspace"
        self.outside = root / "outside"
        self.workspace.mkdir()
        self.outside.mkdir()
        context = {
            "workspace_root": str(self.workspace),
            "execution_backend": "native",
            "platform": turngate.probe_platform(),
        }
        self.snapshot = turngate.resolve({"mode": mode}, context)
        self.store = turngate.Store(root / "audit.db")
        self.turn_id = "turn-1"
        self.gate = turngate.Gate(self.turn_id, self.snapshot, self.store, "defer_all")

    def reopen(self) -> turngate.Gate:
        """A new gate of the same turn over the same store: what another process has."""
        return turngate.Gate(self.turn_id, self.snapshot, self.store, "defer_all")

    def audit(self) -> list[dict[str, Any]]:
        return self.store.replay(self.turn_id)

    def rows(self, item_id: str) -> list[tuple[str, Any]]:
        """The (kind, decision) of every audit row carrying ``item_id``."""
        return [(e["kind"], e.get("decision")) for e in self.audit() if e.get("item_id") == item_id]


@pytest.fixture
def turn(tmp_path: Path) -> Turn:
    return Turn(tmp_path)


@pytest.fixture
def make_turn(tmp_path: Path) -> Callable[[str], Turn]:
    def make(mode: str) -> Turn:
        return Turn(tmp_path / mode, mode)

    return make


@pytest.fixture
def anyio_backend() -> str:
    # The async tests run on asyncio (anyio's pytest plugin, installed with the frameworks).
    return "asyncio"

