"""`examples/python/guarded_agent.py` (a pydantic-ai agent with its offline FunctionModel)
runs: an ask resolved by a Python approver, and a denied write that never happens."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO

EXAMPLE = REPO / "examples" / "python" / "guarded_agent.py"


def test_the_pydantic_ai_example_guards_its_tools() -> None:
    run = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parent,
    )
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    summary = json.loads(run.stdout)
    assert [Path(t).name for t in summary["asked"]] == ["NOTES.md"]
    assert summary["written"] == ["NOTES.md"]
    assert summary["escaped"] is False
    assert "Permission denied by turngate" in summary["output"]
    assert ["approval_resolved", "allow_once"] in summary["audit"]
    assert ["decision_denied", "deny"] in summary["audit"]
