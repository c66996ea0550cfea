"""turngate for pydantic-ai: the guarded tools as a toolset, and a guard for your own tools.

Every call goes through the gate with pydantic-ai's tool-call id as ``item_id``:

* allow: the tool runs and its result goes to the model;
* deny: the tool does not run; the model gets turngate's denial text as the tool's result;
* ask: the call is deferred the pydantic-ai way, by raising ``ApprovalRequired``. The run
  ends with a ``DeferredToolRequests`` output (give the agent
  ``output_type=[str, DeferredToolRequests]``) whose ``metadata[tool_call_id]`` carries
  ``turngate_request_id`` and ``turngate_request`` (the approval request exactly as a person is
  to be shown it). Build the person's answers with :func:`results` and run the agent again with
  ``message_history=result.all_messages(), deferred_tool_results=...``: the call continues the
  deferred request with that answer (``approval=``), re-checked by the gate, and is never asked
  again. A deny answer is recorded by the gate and its text goes to the model. (A plain
  pydantic-ai denial, ``approvals={id: False}``, never calls the tool: the model gets
  pydantic-ai's text and the gate's request stays pending; :func:`results` avoids that.)

``pip install 'turngate[pydantic-ai]'``. Importing :mod:`turngate` never imports pydantic-ai;
importing this module does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Mapping, NoReturn, Optional

from pydantic_ai import ApprovalRequired, RunContext
from pydantic_ai.tools import (
    DeferredToolRequests,
    DeferredToolResults,
    Tool,
    ToolApproved,
    ToolDenied,
)
from pydantic_ai.toolsets import AbstractToolset, FunctionToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

from ._common import TOOLS, Answer, answer_name, authorize_own, call_tool, refusal_text, target_of
from ._common import approval as _approval

if TYPE_CHECKING:
    from .._guard import Gate
    from .._turngate import Store

REQUEST_ID = "turngate_request_id"
"""The metadata key of the deferred request's id (``DeferredToolRequests.metadata[id]``)."""
REQUEST = "turngate_request"
"""The metadata key of the approval request as a person is shown it."""
ANSWER = "turngate_answer"
"""The metadata key of the person's answer (``DeferredToolResults.metadata[id]``)."""

__all__ = ["ANSWER", "REQUEST", "REQUEST_ID", "GuardedToolset", "TurngateToolset", "results"]


def _resumed(ctx: RunContext[Any], asked: Mapping[str, str]) -> tuple[Optional[str], str]:
    """The request this approved call continues and the person's answer: from the run's
    ``DeferredToolResults.metadata`` (any process), else the request this toolset deferred for
    the same tool-call id (this process; then the answer is pydantic-ai's approval itself)."""
    meta = ctx.tool_call_metadata if isinstance(ctx.tool_call_metadata, Mapping) else {}
    request_id = meta.get(REQUEST_ID) or asked.get(ctx.tool_call_id or "")
    return (request_id if isinstance(request_id, str) else None), answer_name(
        meta.get(ANSWER, "allow_once")
    )


def _defer(ctx: RunContext[Any], asked: dict[str, str], request: dict[str, Any]) -> NoReturn:
    if ctx.tool_call_id:
        asked[ctx.tool_call_id] = request["id"]
    raise ApprovalRequired(metadata={REQUEST_ID: request["id"], REQUEST: request})


def _no_request(kind: str, name: str) -> str:
    return refusal_text(
        kind,
        name,
        "the approval names no turngate request (pass the run's DeferredToolRequests.metadata "
        "back, e.g. with turngate.adapters.pydantic_ai.results); the tool did not run",
    )


class TurngateToolset(FunctionToolset[Any]):
    """The guarded tools (``read_file``, ``write_file``, ``edit_file``, ``run_shell``,
    ``fetch_url``, or the subset named in ``tools``), each performed by the gate's method of
    the same name. Pass it as ``Agent(..., toolsets=[TurngateToolset(gate)])``."""

    def __init__(
        self, gate: "Gate", tools: Iterable[str] = tuple(TOOLS), *, id: Optional[str] = None
    ) -> None:
        names = list(tools)
        unknown = [n for n in names if n not in TOOLS]
        if unknown:
            raise ValueError(
                f"no guarded tool named {', '.join(unknown)}; known: {', '.join(TOOLS)}"
            )
        self.gate = gate
        self._asked: dict[str, str] = {}
        super().__init__([self._tool(name) for name in names], id=id)

    def _tool(self, name: str) -> Tool[Any]:
        spec = TOOLS[name]

        async def run(ctx: RunContext[Any], **args: Any) -> str:
            approval = None
            if ctx.tool_call_approved:
                request_id, answer = _resumed(ctx, self._asked)
                if request_id is None:
                    return _no_request(spec.kind, name)
                approval = _approval(request_id, answer)
            outcome = await call_tool(
                self.gate, name, args, item_id=ctx.tool_call_id, approval=approval
            )
            if outcome["outcome"] == "deferred":
                _defer(ctx, self._asked, outcome["request"])
            return str(outcome["tool_result"])

        return Tool.from_schema(run, name, spec.description, spec.json_schema(), takes_ctx=True)


@dataclass
class GuardedToolset(WrapperToolset[Any]):
    """Your own toolset behind the gate. ``actions`` maps each tool name to the action it
    performs and the argument holding its target, e.g.
    ``{"save_note": ("file_write", "path")}``; a tool of ``wrapped`` not named there is
    refused (fail closed). The tool runs with its arguments unchanged, and only when the gate
    allows exactly that action (see :func:`turngate.adapters._common.authorize_own`). With the
    turn's ``store``, an approval is compared with the call before its request is resumed."""

    gate: "Gate" = field(kw_only=True)
    actions: Mapping[str, tuple[str, str]] = field(kw_only=True)
    store: Optional["Store"] = field(default=None, kw_only=True)
    _asked: dict[str, str] = field(default_factory=dict, init=False, repr=False)

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        action = self.actions.get(name)
        if action is None:
            return refusal_text(
                "unknown", name, f"{name} declares no turngate action (GuardedToolset.actions)"
            )
        kind, param = action
        target = target_of(tool_args, param)
        if target is None:
            return refusal_text(kind, name, f"{name} has no target argument {param!r}")
        request_id = answer = None
        if ctx.tool_call_approved:
            request_id, answer = _resumed(ctx, self._asked)
            if request_id is None:
                return _no_request(kind, name)
        auth = await authorize_own(
            self.gate,
            kind,
            target,
            tool=name,
            item_id=ctx.tool_call_id,
            request_id=request_id,
            answer=answer,
            store=self.store,
        )
        if auth["outcome"] == "deferred":
            _defer(ctx, self._asked, auth["request"])
        if auth["outcome"] == "denied":
            return auth["tool_result"]
        return await super().call_tool(name, tool_args, ctx, tool)


def results(
    requests: DeferredToolRequests,
    answers: Mapping[str, Answer],
    *,
    approve_others: bool = False,
) -> DeferredToolResults:
    """The ``DeferredToolResults`` that answer ``requests`` with the person's ``answers``
    (by tool-call id; ``True``/``False``, a :class:`turngate.Decision`, or ``"allow_once"``,
    ``"allow_for_turn"``, ``"deny"``).

    A turngate call is always resumed through the tool, a deny too, so that the gate records
    the answer and the model gets its text. A call deferred by something else is approved or
    denied the plain pydantic-ai way; one without an answer stays pending, unless
    ``approve_others``. An answer for a call that is not pending is refused (``ValueError``).
    """
    pending = {c.tool_call_id for c in requests.approvals}
    stray = sorted(set(answers) - pending)
    if stray:
        raise ValueError(f"no pending approval has tool-call id {', '.join(stray)}")
    approvals: dict[str, Any] = {}
    metadata: dict[str, dict[str, Any]] = {}
    for call_id in sorted(pending):
        meta = requests.metadata.get(call_id) or {}
        if REQUEST_ID in meta:
            if call_id not in answers:
                continue
            approvals[call_id] = ToolApproved()
            metadata[call_id] = {
                REQUEST_ID: meta[REQUEST_ID],
                ANSWER: answer_name(answers[call_id]),
            }
        elif call_id in answers:
            allow = answer_name(answers[call_id]) != "deny"
            approvals[call_id] = ToolApproved() if allow else ToolDenied()
        elif approve_others:
            approvals[call_id] = ToolApproved()
    return DeferredToolResults(approvals=approvals, metadata=metadata)
