"""The core package stays dependency-free: importing turngate (and turngate.adapters) loads
no agent framework; each adapter module loads only its own."""

from __future__ import annotations

import subprocess
import sys

import pytest

FRAMEWORKS = ("pydantic_ai", "agents", "langgraph", "langchain_core")


def loaded_after(statement: str) -> set[str]:
    code = (
        f"import sys; {statement}; "
        f"print(','.join(m for m in {FRAMEWORKS!r} if m in sys.modules))"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    return {m for m in run.stdout.strip().split(",") if m}


def test_importing_turngate_loads_no_framework() -> None:
    assert loaded_after("import turngate, turngate.adapters") == set()


@pytest.mark.parametrize(
    ("module", "framework"),
    [
        ("turngate.adapters.pydantic_ai", {"pydantic_ai"}),
        ("turngate.adapters.openai_agents", {"agents"}),
        ("turngate.adapters.langgraph", {"langgraph", "langchain_core"}),
    ],
)
def test_each_adapter_loads_only_its_framework(module: str, framework: set[str]) -> None:
    pytest.importorskip(module)
    assert loaded_after(f"import {module}") == framework
