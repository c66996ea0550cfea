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

import asyncio
import weakref
from typing import TYPE_CHECKING, Annotated, Any, Awaitable, Callable, Iterable, Mapping, Optional

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
    from .._turngate import Store

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
    """The calls of one gate's tools: the request each deferred and the result each gave, by
    tool-call id, and the lock that runs them one at a time.

    LangGraph re-runs a resumed node from its start and hands resume values to the node's
    ``interrupt()`` calls by their order, so every call is run in the order the node starts
    them (the lock), a call that already gave its result gives it again without touching the
    gate (an allowed write is not written twice), and a call that was paused still takes its
    place in the order (its ``interrupt()`` is called again) so the answers of the others are
    not shifted onto it."""

    def __init__(self) -> None:
        self._asked: dict[str, dict[str, Any]] = {}
        self._done: dict[str, Any] = {}
        self._lock = asyncio.Lock()

    async def run(
        self,
        tool_call_id: str,
        tool: str,
        fresh: Callable[[], Awaitable[tuple[Any, Optional[Mapping[str, Any]]]]],
        resumed: Callable[[dict[str, Any]], Awaitable[Any]],
        refused: Callable[[], Any],
    ) -> Any:
        """One call: ``fresh()`` asks the gate (its result, and the request when deferred);
        ``resumed(approval)`` continues the deferred request with the person's answer."""
        async with self._lock:
            if tool_call_id in self._done:
                if tool_call_id in self._asked:
                    interrupt(self._asked[tool_call_id])
                return self._done[tool_call_id]
            approval = self._answer(tool_call_id)
            if approval is None:
                result, request = await fresh()
                if request is None:
                    self._done[tool_call_id] = result
                    return result
                approval = self._pause(request, tool_call_id, tool)
            result = refused() if approval["request_id"] is None else await resumed(approval)
            self._done[tool_call_id] = result
            return result

    def _answer(self, tool_call_id: str) -> Optional[dict[str, Any]]:
        """The ``approval=`` for a call this process already deferred: ``interrupt()`` returns
        the resume value (the node is being re-run). None for a call never deferred here."""
        asked = self._asked.get(tool_call_id)
        if asked is None:
            return None
        return self._approval(interrupt(asked), asked["request_id"])

    def _pause(self, request: Mapping[str, Any], tool_call_id: str, tool: str) -> dict[str, Any]:
        """Defer: ``interrupt()`` with the request. Returns the ``approval=`` from the resume
        value when LangGraph already has one (a resume in another process)."""
        shown = payload(request, tool_call_id, tool)
        self._asked[tool_call_id] = shown
        return self._approval(interrupt(shown), None)

    @staticmethod
    def _approval(value: Any, known: Optional[str]) -> dict[str, Any]:
        if isinstance(value, Mapping):
            request_id = value.get("request_id")
            decision: Any = value.get("decision", "deny")
        else:
            request_id, decision = known, value
        if not isinstance(request_id, str) or (known is not None and request_id != known):
            # A bare answer with no request this process deferred, or an answer naming another
            # call's request: refused, nothing resumed.
            return {"request_id": None, "decision": "deny"}
        return _approval(request_id, decision if not isinstance(decision, Mapping) else "deny")


_BY_GATE: "weakref.WeakKeyDictionary[Any, _Pauses]" = weakref.WeakKeyDictionary()


def _pauses(gate: "Gate") -> _Pauses:
    """The one ``_Pauses`` of ``gate``'s tools (every tool of a turn shares its order)."""
    pauses = _BY_GATE.get(gate)
    if pauses is None:
        pauses = _BY_GATE[gate] = _Pauses()
    return pauses


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
    out: list[BaseTool] = []
    for name in names:
        if name not in TOOLS:
            raise ValueError(f"no guarded tool named {name}; known: {', '.join(TOOLS)}")
        out.append(_guarded_tool(gate, name))
    return out


def _guarded_tool(gate: "Gate", name: str) -> BaseTool:
    spec = TOOLS[name]
    pauses = _pauses(gate)

    async def run(tool_call_id: str, **args: Any) -> str:
        args = {k: v for k, v in args.items() if v is not None}

        async def fresh() -> tuple[Any, Optional[Mapping[str, Any]]]:
            outcome = await call_tool(gate, name, args, item_id=tool_call_id)
            if outcome["outcome"] == "deferred":
                return None, outcome["request"]
            return str(outcome["tool_result"]), None

        async def resumed(approval: dict[str, Any]) -> str:
            outcome = await call_tool(gate, name, args, item_id=tool_call_id, approval=approval)
            return str(outcome["tool_result"])

        return str(
            await pauses.run(
                tool_call_id, name, fresh, resumed, lambda: _refused_answer(spec.kind, name)
            )
        )

    return StructuredTool(
        name=name, description=spec.description, args_schema=_schema(name), coroutine=run
    )


def guard(
    gate: "Gate", tool: BaseTool, *, kind: str, target: str, store: Optional["Store"] = None
) -> BaseTool:
    """Your own LangChain ``tool`` behind the gate: each call is the action ``kind`` on the
    argument named ``target``. The tool runs with its arguments unchanged, and only when the
    gate allows exactly that action; an ask pauses the graph like the guarded tools'. With the
    turn's ``store``, an answer is compared with the call before its request is resumed."""
    pauses = _pauses(gate)
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

        async def decided(auth: Any) -> Any:
            if auth["outcome"] != "allowed":
                return auth["tool_result"]
            return await tool.ainvoke(args)

        async def fresh() -> tuple[Any, Optional[Mapping[str, Any]]]:
            auth = await authorize_own(gate, kind, value, tool=name, item_id=tool_call_id)
            if auth["outcome"] == "deferred":
                return None, auth["request"]
            return await decided(auth), None

        async def resumed(approval: dict[str, Any]) -> Any:
            auth = await authorize_own(
                gate,
                kind,
                value,
                tool=name,
                item_id=tool_call_id,
                request_id=approval["request_id"],
                answer=answer_name(approval["decision"]),
                store=store,
            )
            return await decided(auth)

        return await pauses.run(
            tool_call_id, name, fresh, resumed, lambda: _refused_answer(kind, name)
        )

    return StructuredTool(
        name=name, description=tool.description, args_schema=schema, coroutine=run
    )
