"""turngate for LangGraph: the guarded tools as LangChain tools (for ``ToolNode`` or
``create_react_agent``), and a guard for your own tools.

Every call goes through the gate with LangChain's tool-call id as ``item_id``:

* allow: the tool runs and its result is the ``ToolMessage``;
* deny: the tool does not run; the ``ToolMessage`` is turngate's denial text;
* ask: the tool calls ``interrupt()`` with the approval request (see :func:`payload`), so the
  graph pauses (it needs a checkpointer) and ``invoke`` returns it under ``__interrupt__``.
  Resume with ``Command(resume=answer)``, where ``answer`` is ``True``/``False``,
  ``"allow_once"``/``"allow_for_turn"``/``"deny"``, or ``{"request_id": ..., "decision":
  ...}`` (:func:`turngate.adapters.approval`; this form also resumes in another process). The
  call continues the deferred request with that answer (``approval=``), re-checked by the gate
  and spent once; a deny is recorded by the gate and its text is the ``ToolMessage``.

LangGraph re-runs a resumed node from its start, so a tool remembers (per tool-call id) the
request it deferred and goes straight back to ``interrupt()`` for its answer instead of asking
the gate a second time.

``pip install 'turngate[langgraph]'``. Importing :mod:`turngate` never imports LangGraph;
importing this module does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Iterable, Mapping, Optional

from langchain_core.tools import BaseTool, InjectedToolCallId, StructuredTool
from langgraph.types import interrupt
from pydantic import BaseModel, ConfigDict, Field, create_model

from ._common import (
    TOOLS,
    Answer,
    answer_name,
    authorize_own,
    call_tool,
    refusal_text,
    target_of,
)
from ._common import approval as _approval

if TYPE_CHECKING:
    from .._guard import Gate

__all__ = ["KIND", "guard", "payload", "tools"]

KIND = "turngate_approval"
"""``payload(...)["type"]``: what an interrupt from these tools is."""

_PY_TYPES: dict[str, type] = {"string": str, "integer": int}


def payload(request: Mapping[str, Any], tool_call_id: str, tool: str) -> dict[str, Any]:
    """What a tool's ``interrupt()`` carries (``Interrupt.value``): the request exactly as a
    person is to be shown it, its id, and the tool call it belongs to."""
    return {
        "type": KIND,
        "request_id": request["id"],
        "request": dict(request),
        "tool_call_id": tool_call_id,
        "tool": tool,
    }


class _Pauses:
    """The requests this set of tools deferred, by tool-call id, and the pause for each."""

    def __init__(self) -> None:
        self._asked: dict[str, dict[str, Any]] = {}

    def answer(self, tool_call_id: str) -> Optional[dict[str, Any]]:
        """The ``approval=`` for a call this process already deferred: ``interrupt()`` returns
        the resume value (the node is being re-run). None for a call never deferred here."""
        asked = self._asked.get(tool_call_id)
        if asked is None:
            return None
        return self._approval(interrupt(asked), asked["request_id"])

    def pause(self, request: Mapping[str, Any], tool_call_id: str, tool: str) -> dict[str, Any]:
        """Defer: ``interrupt()`` with the request. Returns the ``approval=`` from the resume
        value when LangGraph already has one (a resume in another process)."""
        shown = payload(request, tool_call_id, tool)
        self._asked[tool_call_id] = shown
        return self._approval(interrupt(shown), None)

    @staticmethod
    def _approval(value: Any, known: Optional[str]) -> dict[str, Any]:
        if isinstance(value, Mapping):
            request_id = value.get("request_id")
            decision: Answer = value.get("decision", "deny")
        else:
            request_id, decision = known, value
        if not isinstance(request_id, str) or (known is not None and request_id != known):
            # A bare answer with no request this process deferred, or an answer naming another
            # call's request: refused below, nothing resumed.
            return {"request_id": None, "decision": "deny"}
        return _approval(request_id, decision if not isinstance(decision, Mapping) else "deny")


def _schema(name: str) -> type[BaseModel]:
    spec = TOOLS[name]
    fields: dict[str, Any] = {k: (_PY_TYPES[t], ...) for k, t in spec.required.items()}
    fields.update({k: (Optional[_PY_TYPES[t]], None) for k, t in spec.optional.items()})
    fields["tool_call_id"] = (Annotated[str, InjectedToolCallId], Field())
    return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)


def _refused_answer(kind: str, tool: str) -> str:
    return refusal_text(
        kind,
        tool,
        "the resume value names no request this tool call deferred (resume with True/False, "
        "an answer name, or {'request_id': ..., 'decision': ...} of this call); the tool did "
        "not run",
    )


def tools(gate: "Gate", names: Iterable[str] = tuple(TOOLS)) -> list[BaseTool]:
    """The guarded tools (``read_file``, ``write_file``, ``edit_file``, ``run_shell``,
    ``fetch_url``, or those in ``names``), each performed by the gate's method of that name."""
    pauses = _Pauses()
    out: list[BaseTool] = []
    for name in names:
        if name not in TOOLS:
            raise ValueError(f"no guarded tool named {name}; known: {', '.join(TOOLS)}")
        out.append(_guarded_tool(gate, name, pauses))
    return out


def _guarded_tool(gate: "Gate", name: str, pauses: _Pauses) -> BaseTool:
    spec = TOOLS[name]

    async def run(tool_call_id: str, **args: Any) -> str:
        args = {k: v for k, v in args.items() if v is not None}
        approval = pauses.answer(tool_call_id)
        if approval is None:
            outcome = await call_tool(gate, name, args, item_id=tool_call_id)
            if outcome["outcome"] != "deferred":
                return str(outcome["tool_result"])
            approval = pauses.pause(outcome["request"], tool_call_id, name)
        if approval["request_id"] is None:
            return _refused_answer(spec.kind, name)
        outcome = await call_tool(gate, name, args, item_id=tool_call_id, approval=approval)
        return str(outcome["tool_result"])

    return StructuredTool(
        name=name, description=spec.description, args_schema=_schema(name), coroutine=run
    )


def guard(gate: "Gate", tool: BaseTool, *, kind: str, target: str) -> BaseTool:
    """Your own LangChain ``tool`` behind the gate: each call is the action ``kind`` on the
    argument named ``target``. The tool runs with its arguments unchanged, and only when the
    gate allows exactly that action; an ask pauses the graph like the guarded tools'."""
    pauses = _Pauses()
    base = tool.args_schema if isinstance(tool.args_schema, type) else None
    if base is None or not issubclass(base, BaseModel) or target not in base.model_fields:
        raise ValueError(f"{tool.name} has no argument {target!r} to guard")
    schema = create_model(
        f"{tool.name}_guarded",
        __base__=base,
        tool_call_id=(Annotated[str, InjectedToolCallId], Field()),
    )
    name = tool.name

    async def run(tool_call_id: str, **args: Any) -> Any:
        value = target_of(args, target)
        if value is None:
            return refusal_text(kind, name, f"{name} has no target argument {target!r}")
        approval = pauses.answer(tool_call_id)
        if approval is None:
            auth = await authorize_own(gate, kind, value, tool=name, item_id=tool_call_id)
            if auth["outcome"] == "deferred":
                approval = pauses.pause(auth["request"], tool_call_id, name)
        if approval is not None:
            if approval["request_id"] is None:
                return _refused_answer(kind, name)
            auth = await authorize_own(
                gate,
                kind,
                value,
                tool=name,
                item_id=tool_call_id,
                request_id=approval["request_id"],
                answer=answer_name(approval["decision"]),
            )
        if auth["outcome"] != "allowed":
            return auth["tool_result"]
        return await tool.ainvoke(args)

    return StructuredTool(
        name=name, description=tool.description, args_schema=schema, coroutine=run
    )
