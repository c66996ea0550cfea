"""A LangGraph agent on turngate's guarded tools (``turngate.adapters.langgraph``).

The graph is a scripted model node (LangChain's offline ``GenericFakeChatModel``: no network,
no API key) and a ``ToolNode``, with a checkpointer. The turn runs in ``auto_accept_edits``
mode over a temporary workspace, with the ``defer_all`` approver, so:

* ``write_file`` of ``NOTES.md`` in the workspace is **allowed** and written;
* ``read_file`` of ``.env`` is **denied** (a built-in secret rule); the ``ToolMessage`` is the
  denial text, never the secret;
* ``run_shell`` asks: the tool calls ``interrupt()`` with the gate's request, the graph
  pauses, a person (here a function that approves) answers, and ``Command(resume=...)``
  resumes it; the **approved** command runs in the sandbox;
* a second approved ``run_shell`` tries to write outside the workspace: the sandbox's kernel
  rules (Landlock on Linux) **refuse** it, whatever the approval said;
* the **audit timeline** of the turn (``turngate.reduce_all`` over its audit events) ends the
  run, every row carrying LangChain's tool-call id.

Run: ``python examples/python/langgraph_agent.py`` (``pip install 'turngate[langgraph]'``).
It prints a JSON summary and exits non-zero if anything went otherwise.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

import turngate
from turngate.adapters import approval
from turngate.adapters.langgraph import tools


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def scripted_model(workspace: Path, outside: Path) -> GenericFakeChatModel:
    steps = [
        [
            call("write_file", {"path": str(workspace / "NOTES.md"), "content": "# Notes\n"}, "call-write"),
            call("read_file", {"path": str(workspace / ".env")}, "call-secret"),
        ],
        [call("run_shell", {"command": "echo built > build.log"}, "call-shell")],
        [call("run_shell", {"command": f"touch {outside / 'escape.txt'}"}, "call-escape")],
    ]
    script = [AIMessage(content="", tool_calls=s) for s in steps] + [AIMessage(content="done")]
    return GenericFakeChatModel(messages=iter(script))


def person(shown: dict[str, Any]) -> dict[str, Any]:
    """Where a real client shows the interrupt's request to a person; the answer names it."""
    print(f"asked: {shown['request']['summary']}", file=sys.stderr)
    return approval(shown["request_id"], "allow_once")


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

    model = scripted_model(workspace, outside)

    def think(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("model", think)
    builder.add_node("tools", ToolNode(tools(gate)))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", route, ["tools", END])
    builder.add_edge("tools", "model")
    graph = builder.compile(checkpointer=InMemorySaver())

    config = {"configurable": {"thread_id": "turn-1"}}
    state = await graph.ainvoke({"messages": [("user", "Take notes, check the secrets, build.")]}, config)
    asked = []
    while state.get("__interrupt__"):
        [paused] = state["__interrupt__"]
        asked.append(paused.value["tool_call_id"])
        state = await graph.ainvoke(Command(resume=person(paused.value)), config)

    events = store.replay("turn-1")
    timeline = turngate.reduce_all([{"audit_event": e} for e in events])["timeline"]
    return {
        "final_output": state["messages"][-1].content,
        "tool_results": {
            m.tool_call_id: str(m.content) for m in state["messages"] if isinstance(m, ToolMessage)
        },
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
