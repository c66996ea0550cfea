"""What runs is what was decided (DESIGN §11), from Python: an approved request runs its stored
command once, under the snapshot it was requested under, and nothing runs a bare string."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import turngate
from turngate import Gate, Store

JSON = dict[str, Any]


def _snapshot(workspace: Path, mode: str) -> JSON:
    ctx = {
        "workspace_root": str(workspace),
        "execution_backend": "native",
        "platform": turngate.probe_platform(),
    }
    return turngate.resolve({"mode": mode}, ctx)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    return ws.resolve(), outside.resolve()


def _deferred(ws: Path, store: Store, line: str) -> str:
    gate = Gate("t", _snapshot(ws, "auto_accept_edits"), store, "defer_all")
    result = gate.spawn_blocking(line)
    assert result["outcome"] == "deferred", result
    return str(result["request"]["id"])


def test_an_allow_once_runs_its_stored_command_once(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    ws, _ = dirs
    store = Store(tmp_path / "audit.db")
    log = ws / "log.txt"
    request_id = _deferred(ws, store, f"sh -c 'echo ran >> {log}'")
    gate = Gate("t", _snapshot(ws, "auto_accept_edits"), store, "deny_all")
    with pytest.raises(turngate.ApprovalError, match="pending"):
        gate.run_approved_blocking(request_id)
    first = gate.resume_spawn_blocking(request_id, "approve")
    assert first["outcome"] == "ran" and first["exit_code"] == 0, first
    for _ in range(3):
        with pytest.raises(turngate.ApprovalError, match="already_used"):
            gate.resume_spawn_blocking(request_id, "approve")
        with pytest.raises(turngate.ApprovalError, match="already_used"):
            gate.run_approved_blocking(request_id)
    assert log.read_text().splitlines() == ["ran"]


def test_a_resumed_command_keeps_the_sandbox_it_was_requested_under(
    dirs: tuple[Path, Path], tmp_path: Path
) -> None:
    ws, outside = dirs
    store = Store(tmp_path / "audit.db")
    escaped = outside / "escaped.txt"
    (ws / "w.sh").write_text(f"echo in > {ws / 'in.txt'}\necho out > {escaped}\n")
    request_id = _deferred(ws, store, "sh ./w.sh")
    # A full-access resumer: the stored auto_accept_edits sandbox still confines the command.
    resumer = Gate("t", _snapshot(ws, "full_access"), store, "deny_all")
    result = resumer.resume_spawn_blocking(request_id, "approve")
    assert result["outcome"] == "ran", result
    assert (ws / "in.txt").exists(), result["stderr"]
    assert not escaped.exists(), "the resumed command ran without its sandbox"
    assert os.access(outside, os.W_OK), "this process could write there itself"


def test_run_approved_takes_no_command_line(dirs: tuple[Path, Path], tmp_path: Path) -> None:
    ws, _ = dirs
    gate = Gate("t", _snapshot(ws, "full_access"), Store(tmp_path / "audit.db"), "approve_all")
    marker = ws / "never.txt"
    # A command line is not a request id: nothing runs, and the error names the id.
    with pytest.raises(turngate.ApprovalError, match="touch"):
        gate.run_approved_blocking(f"touch {marker}")
    assert not marker.exists()
