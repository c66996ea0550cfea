"""The store's everyday API from Python: an in-memory store, durability levels, waiting for a
person's answer without polling (``wait_resolved``), and resuming with the recorded decision."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

import turngate

PLATFORM = {
    "os": "linux",
    "landlock_abi": 7,
    "seccomp": True,
    "user_namespaces": True,
    "seatbelt": False,
    "restricted_token": False,
}


def snapshot(ws: Path) -> dict[str, Any]:
    (ws / "a.txt").write_text("x")
    return turngate.resolve(
        {"mode": "supervised", "source": "composer"},
        {"workspace_root": str(ws), "execution_backend": "native", "platform": PLATFORM},
    )


def deferred_id(auth: turngate.Authorization) -> str:
    assert auth["outcome"] == "deferred", auth
    return str(auth["request"]["id"])


def test_memory_store_records_like_a_file_store_and_writes_nothing(tmp_path: Path) -> None:
    snap = snapshot(tmp_path)
    store = turngate.Store.memory()
    assert store.path == ":memory:"
    gate = turngate.Gate("mem-1", snap, store, "deny_all")
    assert gate.authorize_blocking("file_read", "a.txt")["outcome"] == "allowed"
    assert gate.authorize_blocking("file_write", "a.txt")["outcome"] == "denied"
    events = store.replay("mem-1")
    assert [e["kind"] for e in events] == [
        "profile_selected",
        "decision_allowed",
        "approval_requested",
        "approval_resolved",
        "decision_denied",
    ]
    assert [e["seq"] for e in events] == [1, 2, 3, 4, 5]
    assert sorted(os.listdir(tmp_path)) == ["a.txt"]
    assert turngate.Store.memory().replay("mem-1") == []


def test_durability_is_process_or_power_and_another_name_is_refused(tmp_path: Path) -> None:
    turngate.Store(tmp_path / "power.db", durability="power")
    turngate.Store(tmp_path / "process.db", "process")
    with pytest.raises(turngate.InvalidInput, match="fsync"):
        turngate.Store(tmp_path / "x.db", durability="fsync")  # type: ignore[arg-type]
    assert not (tmp_path / "x.db").exists()
    with pytest.raises(ValueError, match="durability"):
        turngate.Store(":memory:", durability="power")


def test_wait_resolved_sees_another_connections_answer_and_resume_acts_on_it_once(
    tmp_path: Path,
) -> None:
    snap = snapshot(tmp_path)
    db = tmp_path / "audit.db"
    store = turngate.Store(db)
    gate = turngate.Gate("wait-1", snap, store, "defer_all")
    deferred = gate.authorize_blocking("file_write", "a.txt")
    assert deferred["outcome"] == "deferred"
    request_id = deferred["request"]["id"]

    # Pending: a timeout returns it unresolved; resume() with no decision refuses.
    assert gate.wait_resolved_blocking(request_id, timeout_ms=20).get("resolution") is None
    with pytest.raises(turngate.ApprovalError):
        gate.resume(request_id)

    async def answer_later() -> dict[str, Any]:
        waiting = asyncio.ensure_future(gate.wait_resolved(request_id))
        await asyncio.sleep(0.03)
        assert not waiting.done()
        person = turngate.Store(db)  # another connection, as `turngate approvals` opens
        assert person.resolve(request_id, "allow_once", "person")["applied"]
        return await asyncio.wait_for(waiting, 5)

    resolved = asyncio.run(answer_later())
    assert resolved["resolution"]["resolution"] == "allow_once"
    auth = gate.resume(request_id)
    assert auth["outcome"] == "allowed"
    assert auth["target"] == str(tmp_path / "a.txt")
    with pytest.raises(turngate.ApprovalError):
        gate.resume(request_id)
    with pytest.raises(turngate.TurnGateError):
        gate.wait_resolved_blocking("apr_nope")


def test_a_recorded_deny_resumes_as_the_denial(tmp_path: Path) -> None:
    store = turngate.Store.memory()
    gate = turngate.Gate("wait-2", snapshot(tmp_path), store, "defer_all")
    request_id = deferred_id(gate.authorize_blocking("file_write", "a.txt"))
    store.resolve(request_id, "deny", "not today")
    assert store.wait_resolved_blocking(request_id)["resolution"]["resolution"] == "deny"
    assert gate.resume(request_id)["outcome"] == "denied"


def test_a_cancelled_wait_stops(tmp_path: Path) -> None:
    store = turngate.Store.memory()
    gate = turngate.Gate("wait-3", snapshot(tmp_path), store, "defer_all")
    request_id = deferred_id(gate.authorize_blocking("file_write", "a.txt"))

    async def cancel() -> None:
        waiting = asyncio.ensure_future(store.wait_resolved(request_id))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(cancel())
    stored = store.approval(request_id)
    assert stored is not None and stored.get("resolution") is None
