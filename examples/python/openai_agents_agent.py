"""An OpenAI Agents SDK agent on turngate's guarded tools (``turngate.adapters.openai_agents``).

The model is the SDK's offline ``agents.testing.ScriptedModel`` (no network, no API key): it
scripts the calls a real model would make. The turn runs in ``auto_accept_edits`` mode over a
temporary workspace, with the ``defer_all`` approver, so:

* ``write_file`` of ``NOTES.md`` in the workspace is **allowed** and written;
* ``read_file`` of ``.env`` is **denied** (a built-in secret rule); the model gets the denial
  text, never the secret;
* ``run_shell`` asks: its ``needs_approval`` is the gate's ask, so the run stops with an
  interruption; a person (here a function that approves) answers with ``state.approve`` and
  the run resumes; the **approved** command runs in the sandbox;
* a second approved ``run_shell`` tries to write outside the workspace: the sandbox's kernel
  rules (Landlock on Linux) **refuse** it, whatever the approval said;
* the **audit timeline** of the turn (``turngate.reduce_all`` over its audit events) ends the
  run, every row carrying the SDK's call id.

Run: ``python examples/python/openai_agents_agent.py`` (``pip install
'turngate[openai-agents]'``). It prints a JSON summary and exits non-zero if anything went
otherwise.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from agents import Agent, RunConfig, Runner, set_tracing_disabled
from agents.testing import ScriptedModel, assistant_message, function_call

import turngate
from turngate.adapters.openai_agents import TurngateTools


def shell(command: str, call_id: str) -> Any:
    args = {"command": command, "timeout_ms": None, "stdin": None, "cwd": None}
    return function_call("run_shell", args, call_id=call_id)


def scripted_model(workspace: Path, outside: Path) -> ScriptedModel:
    return ScriptedModel(
        [
            [
                function_call("write_file", {"path": str(workspace / "NOTES.md"), "content": "# Notes\n"}, call_id="call-write"),
                function_call("read_file", {"path": str(workspace / ".env"), "max_bytes": None}, call_id="call-secret"),
            ],
            [shell("echo built > build.log", "call-shell")],
            [shell(f"touch {outside / 'escape.txt'}", "call-escape")],
            [assistant_message("done")],
        ]
    )


def person(item: Any) -> bool:
    """Where a real client shows the interruption (and the gate's request) to a person."""
    print(f"asked: {item.tool_name} {item.arguments}", file=sys.stderr)
    return True


async def run(root: Path) -> dict[str, Any]:
    set_tracing_disabled(True)
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
    tools = TurngateTools(gate, store=store)

    agent = Agent(name="builder", model=scripted_model(workspace, outside), tools=tools.tools())
    config = RunConfig(tool_error_formatter=tools.error_formatter)
    result = await Runner.run(agent, "Take notes, check the secrets, build, then clean up.", run_config=config)
    asked = []
    while result.interruptions:
        state = result.to_state()
        for item in result.interruptions:
            asked.append(getattr(item.raw_item, "call_id"))
            if person(item):
                state.approve(item)
            else:
                state.reject(item)
        result = await Runner.run(agent, state, run_config=config)

    outputs = {
        i["call_id"]: i["output"]
        for i in result.to_input_list()
        if isinstance(i, dict) and i.get("type") == "function_call_output"
    }
    events = store.replay("turn-1")
    timeline = turngate.reduce_all([{"audit_event": e} for e in events])["timeline"]
    return {
        "final_output": result.final_output,
        "tool_results": outputs,
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
        summary["final_output"] == "done"
        and "NOTES.md" in summary["written"]
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
