"""A pydantic-ai agent whose file tool is guarded by turngate.

The model is pydantic-ai's offline ``FunctionModel`` (no network, no API key): it scripts
the calls a real model would make. The agent's ``write_file`` tool is an ordinary async
function behind ``@gate.guard``; the turn runs under a supervised snapshot, so

* a write inside the workspace is an *ask*: the Python approver below sees the request
  exactly as a person would and approves it, and the file is written;
* a write outside the workspace is *denied* by the policy before any approver is asked; the
  tool does not run and the model receives turngate's denial as the tool's result.

Run: ``python examples/python/guarded_agent.py`` (needs ``pip install pydantic-ai-slim`` and
the turngate wheel). It prints a JSON summary and exits non-zero if anything went otherwise.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import turngate


def scripted_model(workspace: Path, outside: Path) -> FunctionModel:
    """A model that writes one file in the workspace, then one outside it, then reports."""
    plan = [
        {"path": str(workspace / "NOTES.md"), "text": "# Notes\nwritten by the agent\n"},
        {"path": str(outside / "escape.txt"), "text": "should never be written"},
    ]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [
            p.content
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        if len(returns) < len(plan):
            return ModelResponse(parts=[ToolCallPart("write_file", plan[len(returns)])])
        return ModelResponse(parts=[TextPart("tool results: " + json.dumps(returns))])

    return FunctionModel(respond)


async def run(workspace: Path, outside: Path, store_path: Path) -> dict[str, Any]:
    context = {
        "workspace_root": str(workspace),
        "execution_backend": "native",
        "platform": turngate.probe_platform(),
    }
    snapshot = turngate.resolve({"mode": "supervised"}, context)
    asked: list[dict[str, Any]] = []

    async def approver(ask: dict[str, Any]) -> turngate.Decision:
        # A real client would show ask["request"] (TurnPermissionApprovalRequest) to a person.
        asked.append(ask)
        if ask["action"]["target"].endswith(".md"):
            return turngate.Decision.approve()
        return turngate.Decision.deny("only Markdown notes may be written")

    store = turngate.Store(store_path)
    gate = turngate.Gate("turn-1", snapshot, store, approver)

    @gate.guard(kind="file_write", target=lambda path, **_: path)
    async def write_file(path: str, text: str) -> str:
        """Write `text` to the file at `path`."""
        Path(path).write_text(text)
        return f"wrote {len(text)} bytes to {path}"

    agent = Agent(scripted_model(workspace, outside), tools=[write_file])
    result = await agent.run("Write the notes file, then the escape file.")
    return {
        "output": result.output,
        "asked": [a["action"]["target"] for a in asked],
        "written": sorted(p.name for p in workspace.iterdir()),
        "escaped": (outside / "escape.txt").exists(),
        "audit": [(e["kind"], e.get("decision")) for e in store.replay("turn-1")],
    }


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workspace, outside = root / "workspace", root / "outside"
        workspace.mkdir()
        outside.mkdir()
        summary = asyncio.run(run(workspace, outside, root / "audit.db"))
    print(json.dumps(summary, indent=2))
    ok = (
        summary["asked"] == [str(workspace / "NOTES.md")]
        and summary["written"] == ["NOTES.md"]
        and not summary["escaped"]
        and "Permission denied by turngate" in summary["output"]
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
