"""Each framework's example agent (examples/python/*_agent.py) runs on its offline test model
and shows what it says: an allowed write, a denied .env read, an approved shell command, a
kernel-refused escape, the audit timeline with the framework's tool-call ids."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "python"


@pytest.mark.parametrize(
    ("example", "framework"),
    [
        ("pydantic_ai_agent.py", "pydantic_ai"),
        ("openai_agents_agent.py", "agents"),
        ("langgraph_agent.py", "langgraph"),
    ],
)
def test_the_example_agent_runs(example: str, framework: str) -> None:
    pytest.importorskip(framework)
    run = subprocess.run(
        [sys.executable, str(EXAMPLES / example)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).parent,
    )
    assert run.returncode == 0, f"{run.stdout}\n{run.stderr}"
    summary: dict[str, Any] = json.loads(run.stdout)
    out = summary["tool_results"]
    assert "NOTES.md" in summary["written"] and "build.log" in summary["written"]
    assert out["call-secret"].startswith("Permission denied by turngate")
    assert "not-for-the-model" not in run.stdout
    assert summary["asked"] == ["call-shell", "call-escape"]
    # Approved, run, and refused by the kernel: nothing outside the workspace was written.
    assert summary["escaped"] is False
    assert "Read-only file system" in out["call-escape"] or "ermission denied" in out["call-escape"]
    ids = {row[1] for row in summary["audit"]}
    assert {"call-write", "call-secret", "call-shell", "call-escape"} <= ids
    assert ["decision_denied", "call-secret", "deny"] in summary["audit"]
    assert summary["timeline"], "the reduced audit timeline has rows"
