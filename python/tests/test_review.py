"""Reviewable writes from Python: ``Gate.spawn(..., review=True)`` runs a real child against an
overlay, the workspace stays untouched, and the store lists, shows, applies and discards the
change set; every refusal is a ``ChangesError`` with its ``code`` and ``paths``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Literal

import pytest

import turngate
from turngate import ChangesError, Gate, Store

LINE = "sh -c 'echo new > a.txt; rm b.txt'"


Builtin = Literal["approve_all", "deny_all", "defer_all"]


def _gate(ws: Path, store: Store, approver: Builtin = "approve_all") -> Gate:
    ctx = {
        "workspace_root": str(ws),
        "execution_backend": "native",
        "platform": turngate.probe_platform(),
    }
    return Gate("t-review", turngate.resolve({"mode": "auto_accept_edits"}, ctx), store, approver)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    w = (tmp_path / "ws").resolve()
    w.mkdir()
    (w / "b.txt").write_text("b\n")
    return w


@pytest.fixture
def store(tmp_path: Path) -> Store:
    (tmp_path / "state").mkdir()
    return Store(tmp_path / "state" / "audit.db")


def _run(gate: Gate, ws: Path, line: str = LINE) -> Any:
    r = gate.spawn_blocking(line, cwd=ws, review=True)
    assert r["outcome"] == "ran" and r["exit_code"] == 0, r
    assert r["change_set"] is not None
    return r["change_set"]


def test_a_reviewed_spawn_holds_its_writes_until_applied(ws: Path, store: Store) -> None:
    summary = _run(_gate(ws, store), ws)
    assert not (ws / "a.txt").exists() and (ws / "b.txt").read_text() == "b\n"
    assert summary["added"] == [str(ws / "a.txt")]
    assert summary["deleted"] == [str(ws / "b.txt")]
    assert summary["modified"] == [] and summary["mode_changed"] == [] and summary["unsupported"] == []
    assert summary["status"] == "pending" and summary["summary"] == "1 added, 1 deleted"

    (listed,) = store.change_sets()
    assert listed["id"] == summary["id"]
    shown = store.change_set(summary["id"])
    assert [(c["path"], c["kind"]) for c in shown["changes"]] == [("a.txt", "added"), ("b.txt", "deleted")]
    assert shown["changes"][0]["diff"] == "--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +1 @@\n+new\n"

    applied = store.apply_change_set(summary["id"], by="person:ana")
    assert applied["status"] == "applied" and applied["resolved_by"] == "person:ana"
    assert (ws / "a.txt").read_text() == "new\n" and not (ws / "b.txt").exists()

    # Applied once: a second apply, and a discard, are refused.
    with pytest.raises(ChangesError) as e:
        store.apply_change_set(summary["id"])
    assert e.value.code == "not_pending"
    with pytest.raises(ChangesError) as e:
        store.discard_change_set(summary["id"])
    assert e.value.code == "not_pending"


def test_review_is_awaitable_and_a_plain_spawn_has_no_change_set(ws: Path, store: Store) -> None:
    gate = _gate(ws, store)

    async def main() -> Any:
        return await gate.spawn(LINE, cwd=ws, review=True)

    r = asyncio.run(main())
    assert r["outcome"] == "ran" and r["change_set"] is not None and not (ws / "a.txt").exists()
    plain = gate.spawn_blocking("touch direct.txt", cwd=ws)
    assert plain["outcome"] == "ran" and plain["change_set"] is None and (ws / "direct.txt").exists()


def test_a_discarded_run_leaves_the_workspace_untouched(ws: Path, store: Store) -> None:
    summary = _run(_gate(ws, store), ws)
    discarded = store.discard_change_set(summary["id"], by="person:ana")
    assert discarded["status"] == "discarded"
    assert not (ws / "a.txt").exists() and (ws / "b.txt").read_text() == "b\n"
    with pytest.raises(ChangesError) as e:
        store.apply_change_set(summary["id"])
    assert e.value.code == "not_pending"
    assert not (ws / "a.txt").exists(), "apply after discard wrote"


def test_apply_refuses_a_conflict_and_names_the_path(ws: Path, store: Store) -> None:
    summary = _run(_gate(ws, store), ws)
    (ws / "b.txt").write_text("edited meanwhile\n")
    with pytest.raises(ChangesError) as e:
        store.apply_change_set(summary["id"])
    assert e.value.code == "conflicts"
    assert e.value.paths == [str(ws / "b.txt")]
    assert "b.txt" in str(e.value)
    assert isinstance(e.value, turngate.TurnGateError)
    assert not (ws / "a.txt").exists() and (ws / "b.txt").read_text() == "edited meanwhile\n"


def test_ids_from_another_store_or_a_path_are_refused(ws: Path, store: Store, tmp_path: Path) -> None:
    summary = _run(_gate(ws, store), ws)
    (tmp_path / "other").mkdir()
    other = Store(tmp_path / "other" / "audit.db")
    with pytest.raises(ChangesError) as e:
        other.apply_change_set(summary["id"])
    assert e.value.code == "not_found"
    for bad in ["../state/changes", "../../etc/passwd", "cs-1/../../x", ""]:
        with pytest.raises(ChangesError) as e:
            store.apply_change_set(bad)
        assert e.value.code == "bad_id", bad
        with pytest.raises(ChangesError):
            store.change_set(bad)
    assert not (ws / "a.txt").exists()


def test_review_is_refused_where_the_store_is_the_workspace(ws: Path) -> None:
    inside = Store(ws / "audit.db")
    with pytest.raises(turngate.RunError):
        _gate(ws, inside).spawn_blocking("touch ran.txt", cwd=ws, review=True)
    assert not (ws / "ran.txt").exists(), "the command ran"
    assert inside.change_sets() == []


def test_review_on_other_calls_or_mistyped_is_refused(ws: Path, store: Store) -> None:
    with pytest.raises(turngate.InvalidInput):
        _gate(ws, store).authorize_blocking("file_write", str(ws / "x.txt"), review=True)
    with pytest.raises(turngate.InvalidInput):
        _gate(ws, store).spawn_blocking("true", cwd=ws, review="yes")  # type: ignore[arg-type]


def test_a_deferred_reviewed_spawn_resumes_only_reviewed(ws: Path, store: Store) -> None:
    deferred = _gate(ws, store, "defer_all").spawn_blocking(LINE, cwd=ws, review=True)
    assert deferred["outcome"] == "deferred"
    request_id = deferred["request"]["id"]
    stored = store.approval(request_id)
    assert stored is not None and stored["review"] is True
    store.resolve(request_id, "allow_once")

    gate = _gate(ws, store, "deny_all")
    # A plain resume would hand the caller the command to run directly: refused, nothing spent.
    with pytest.raises(turngate.ApprovalError, match="must be resumed with review"):
        gate.resume(request_id, turngate.Decision.approve())
    stored = store.approval(request_id)
    assert stored is not None and stored["used"] is False

    r = gate.run_approved_blocking(request_id)
    assert r["outcome"] == "ran" and r["exit_code"] == 0, r
    assert r["change_set"] is not None and r["change_set"]["added"] == [str(ws / "a.txt")]
    assert not (ws / "a.txt").exists() and (ws / "b.txt").read_text() == "b\n"
    with pytest.raises(turngate.ApprovalError, match="already_used"):
        gate.run_approved_blocking(request_id)
    assert len(store.change_sets()) == 1
