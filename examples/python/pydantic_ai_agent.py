"""A pydantic-ai agent on turngate's guarded tools (``turngate.adapters.pydantic_ai``).

The model is pydantic-ai's offline ``FunctionModel`` (no network, no API key): it scripts the
calls a real model would make. The turn runs in ``auto_accept_edits`` mode over a temporary
workspace, with the ``defer_all`` approver, so:

* ``write_file`` of ``NOTES.md`` in the workspace is **allowed** and written;
* ``read_file`` of ``.env`` is **denied** (a built-in secret rule); the model gets the denial
  text, never the secret;
* ``run_shell`` asks: the run ends with pydantic-ai's ``DeferredToolRequests``, a person (here
  a function that approves) answers, and the run resumes; the **approved** command runs in
  the sandbox;
* a second approved ``run_shell`` tries to write outside the workspace: the sandbox's kernel
  rules (Landlock on Linux) **refuse** it, whatever the approval said;
* the **audit timeline** of the turn (``turngate.reduce_all`` over its audit events) ends the
  run, every row carrying pydantic-ai's tool-call id.

Run: ``python examples/python/pydantic_ai_agent.py`` (``pip install 'turngate[pydantic-ai]'``).
It prints a JSON summary and exits non-zero if anything went otherwise.
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
from pydantic_ai.tools import DeferredToolRequests

import turngate
from turngate.adapters.pydantic_ai import REQUEST, TurngateToolset, results


def scripted_model(workspace: Path, outside: Path) -> FunctionModel:
    """The calls a model would make, one response at a time; then a report of the results."""
    steps = [
        [
            ToolCallPart("write_file", {"path": str(workspace / "NOTES.md"), "content": "# Notes\n"}, tool_call_id="call-write"),
            ToolCallPart("read_file", {"path": str(workspace / ".env")}, tool_call_id="call-secret"),
        ],
        [ToolCallPart("run_shell", {"command": "echo built > build.log"}, tool_call_id="call-shell")],
        [ToolCallPart("run_shell", {"command": f"touch {outside / 'escape.txt'}"}, tool_call_id="call-escape")],
    ]

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        made = sum(isinstance(m, ModelResponse) for m in messages)
        if made < len(steps):
            return ModelResponse(parts=list(steps[made]))
        returns = {
            p.tool_call_id: p.content
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        }
        return ModelResponse(parts=[TextPart(json.dumps(returns))])

    return FunctionModel(respond)


def person(request: dict[str, Any]) -> str:
    """Where a real client shows ``request`` (the TurnPermissionApprovalRequest) to a person."""
    print(f"asked: {request['summary']}", file=sys.stderr)
    return "allow_once"


async def run(root: Path) -> dict[str, Any]:
    workspace, outside = root / "workspace", root / "outside"
    workspace.mkdir()
    outside.mkdir()
    (workspace / ".env").write_text("API_TOKEN=not-for-the-model\n")
    context = {
        "workspace_root": str(workspace),
        "execution_backend": "native",
        "platform": turngate.probe_platform(),
    }
    snapshot = turngate.resolve({"mode": "auto_accept_edits"}, context)
    store = turngate.Store(root / "audit.db")
    gate = turngate.Gate("turn-1", snapshot, store, "defer_all")

    agent = Agent(
        scripted_model(workspace, outside),
        toolsets=[TurngateToolset(gate)],
        output_type=[str, DeferredToolRequests],
    )
    result = await agent.run("Take notes, check the secrets, build, then clean up.")
    asked = []
    while isinstance(result.output, DeferredToolRequests):
        pending = result.output
        answers = {}
        for call in pending.approvals:
            request = pending.metadata[call.tool_call_id][REQUEST]
            asked.append(call.tool_call_id)
            answers[call.tool_call_id] = person(request)
        result = await agent.run(
            message_history=result.all_messages(),
            deferred_tool_results=results(pending, answers),
        )

    events = store.replay("turn-1")
    timeline = turngate.reduce_all([{"audit_event": e} for e in events])["timeline"]
    return {
        "tool_results": json.loads(result.output),
        "asked": asked,
        "written": sorted(p.name for p in workspace.iterdir()),
        "escaped": (outside / "escape.txt").exists(),
        "audit": [[e["kind"], e.get("item_id"), e.get("decision")] for e in events],
        "timeline": [row["title"] for row in timeline],
    }


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        summary = asyncio.run(run(Path(tmp)))
    print(json.dumps(summary, indent=2))
    out = summary["tool_results"]
    ok = (
        "NOTES.md" in summary["written"]
        and out["call-secret"].startswith("Permission denied by turngate")
        and "not-for-the-model" not in json.dumps(summary)
        and summary["asked"] == ["call-shell", "call-escape"]
        and "build.log" in summary["written"]
        and not summary["escaped"]
        and all(
            any(row[1] == call for row in summary["audit"])
            for call in ("call-write", "call-secret", "call-shell", "call-escape")
        )
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
