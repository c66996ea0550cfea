"""turngate for the OpenAI Agents SDK: the guarded tools as function tools whose
``needs_approval`` is the gate's ask, a guard for your own function tools, tool guardrails
backed by the gate, and a hosted-MCP approval hook.

Every call goes through the gate with the SDK's tool-call id (``call_id``) as ``item_id``:

* allow: ``needs_approval`` is False and the tool runs through the gate;
* deny: the tool does not run; the model gets turngate's denial text as the tool's output;
* ask: ``needs_approval`` asks the gate, which defers the request (``defer_all``); the run
  stops with an interruption (``result.interruptions``). Answer it the SDK's way:
  ``state = result.to_state(); state.approve(item)`` (or ``state.reject(item)``) and
  ``Runner.run(agent, state)``. An approved call continues the deferred request
  (``approval=``), re-checked by the gate and spent once. For a rejection to reach the gate
  (recorded as denied, its text to the model), run with
  ``RunConfig(tool_error_formatter=tools.error_formatter)``.

The request a call deferred is remembered by tool-call id in this :class:`TurngateTools`; to
resume a serialized ``RunState`` in another process, give it the turn's ``store`` so it finds
the request in the audit row carrying that id.

``pip install 'turngate[openai-agents]'``. Importing :mod:`turngate` never imports the SDK;
importing this module does.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Optional, Union

from agents import FunctionTool, RunContextWrapper, RunState
from agents.items import ToolApprovalItem
from agents.run_config import ToolErrorFormatterArgs
from agents.tool import MCPToolApprovalFunctionResult, MCPToolApprovalRequest
from agents.tool_context import ToolContext
from agents.tool_guardrails import (
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
)

from .._turngate import ApprovalError, Decision
from ._common import TOOLS, authorize_own, call_tool, refusal_text, target_of
from ._common import approval as _approval

if TYPE_CHECKING:
    from .._guard import Gate
    from .._turngate import Store

__all__ = ["TurngateTools"]

_TARGET_ARG = {
    "file_read": "path",
    "file_write": "path",
    "shell_command": "command",
    "network": "url",
}

Target = Union[str, Callable[[str, Mapping[str, Any]], Optional[str]]]
"""Where a call's target is: the name of its argument, or a callable of (tool name,
arguments) that returns it (None: no target, refused)."""


def _args(text: str) -> Optional[dict[str, Any]]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


class TurngateTools:
    """The gate of a turn in the OpenAI Agents SDK's terms. One per turn (it remembers the
    requests its tools deferred, by tool-call id)."""

    def __init__(self, gate: "Gate", *, store: Optional["Store"] = None) -> None:
        self.gate = gate
        self.store = store
        self._asked: dict[str, str] = {}

    # --- the request a call deferred ----------------------------------------------------

    def request_for(self, call_id: str) -> Optional[str]:
        """The id of the request the call ``call_id`` deferred: remembered here, else (with a
        ``store``) the one in the audit row of this turn carrying ``call_id``."""
        if call_id in self._asked:
            return self._asked[call_id]
        if self.store is None:
            return None
        for event in self.store.replay(self.gate.turn_id):
            if event.get("kind") == "approval_requested" and event.get("item_id") == call_id:
                request_id = event.get("request_key")
                if isinstance(request_id, str):
                    self._asked[call_id] = request_id
                    return request_id
        return None

    async def _ask(
        self, kind: str, target: Optional[str], tool: str, call_id: str, cwd: Optional[str] = None
    ) -> bool:
        """``needs_approval``: True when the gate asks a person about this call (the request
        is then deferred and remembered). A call the gate allows or denies needs none: the
        tool's own call to the gate decides it, audited once."""
        if self.request_for(call_id) is not None:
            return True
        if target is None:
            return False
        verdict = self.gate.evaluate(kind, target, tool, cwd)["verdict"]
        if verdict["effect"] != "ask":
            return False
        if tool == "edit_file" and self._read_denied(target):
            # An edit is judged as a read too: one the gate will deny asks nobody.
            return False
        auth = await self.gate.authorize(kind, target, tool=tool, item_id=call_id, cwd=cwd)
        if auth["outcome"] != "deferred":
            return False
        self._asked[call_id] = auth["request"]["id"]
        return True

    def _read_denied(self, path: str) -> bool:
        return self.gate.evaluate("file_read", path, "edit_file")["verdict"]["effect"] == "deny"

    def _approved(self, ctx: ToolContext[Any], name: str) -> tuple[Optional[str], Optional[str]]:
        """(request id, refusal): the request this invocation continues, if the call was
        deferred; a refusal when it was deferred but is not approved."""
        request_id = self.request_for(ctx.tool_call_id)
        if request_id is None:
            return None, None
        if ctx.is_tool_approved(name, ctx.tool_call_id) is not True:
            return None, "the call was deferred and has no approval"
        return request_id, None

    # --- the guarded tools --------------------------------------------------------------

    def tools(self, names: Iterable[str] = tuple(TOOLS)) -> list[FunctionTool]:
        """The guarded tools (``read_file``, ``write_file``, ``edit_file``, ``run_shell``,
        ``fetch_url``, or those in ``names``), each performed by the gate's method of that
        name."""
        out = []
        for name in names:
            if name not in TOOLS:
                raise ValueError(f"no guarded tool named {name}; known: {', '.join(TOOLS)}")
            out.append(self._tool(name))
        return out

    def _tool(self, name: str) -> FunctionTool:
        spec = TOOLS[name]
        arg = _TARGET_ARG[spec.kind]

        async def needs_approval(
            ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str
        ) -> bool:
            target = params.get(arg) if isinstance(params.get(arg), str) else None
            cwd = params.get("cwd") if name == "run_shell" else None
            return await self._ask(spec.kind, target, name, call_id, cwd)

        async def invoke(ctx: ToolContext[Any], text: str) -> str:
            args = _args(text)
            if args is None:
                return refusal_text(spec.kind, name, f"{name}: the arguments are not a JSON object")
            request_id, refused = self._approved(ctx, name)
            if refused:
                return refusal_text(spec.kind, name, refused)
            approval = _approval(request_id, "allow_once") if request_id else None
            outcome = await call_tool(
                self.gate, name, args, item_id=ctx.tool_call_id, approval=approval
            )
            return str(outcome["tool_result"])

        return FunctionTool(
            name=name,
            description=spec.description,
            params_json_schema=spec.json_schema(strict=True),
            on_invoke_tool=invoke,
            strict_json_schema=True,
            needs_approval=needs_approval,
        )

    # --- your own tools -----------------------------------------------------------------

    def guard(self, tool: FunctionTool, *, kind: str, target: Target) -> FunctionTool:
        """``tool`` behind the gate: each call is the action ``kind`` on ``target``. The tool
        runs with its arguments unchanged, only when the gate allows exactly that action; an
        ask interrupts the run like the guarded tools'."""
        name = tool.name
        inner = tool.on_invoke_tool

        async def needs_approval(
            ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str
        ) -> bool:
            return await self._ask(kind, _target(target, name, params), name, call_id)

        async def invoke(ctx: ToolContext[Any], text: str) -> Any:
            args = _args(text)
            value = None if args is None else _target(target, name, args)
            if value is None:
                return refusal_text(kind, name, f"{name}: no target in the arguments")
            request_id, refused = self._approved(ctx, name)
            if refused:
                return refusal_text(kind, value, refused)
            auth = await authorize_own(
                self.gate,
                kind,
                value,
                tool=name,
                item_id=ctx.tool_call_id,
                request_id=request_id,
                answer="allow_once" if request_id else None,
                store=self.store,
            )
            if auth["outcome"] != "allowed":
                return auth["tool_result"]
            return await inner(ctx, text)

        return dataclasses.replace(tool, on_invoke_tool=invoke, needs_approval=needs_approval)

    def guardrail(self, *, kind: str, target: Target) -> ToolInputGuardrail[Any]:
        """A tool input guardrail backed by the gate, for a tool you do not wrap (a local MCP
        server's, via ``tool_input_guardrails=``): the call proceeds only when the gate allows
        it (audited with the call id); a deny, and an ask (a guardrail cannot wait for a
        person; use :meth:`guard` for tools that may ask), reject it with the text for the
        model."""

        async def check(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
            ctx = data.context
            args = _args(ctx.tool_arguments)
            value = None if args is None else _target(target, ctx.tool_name, args)
            if value is None:
                return ToolGuardrailFunctionOutput.reject_content(
                    refusal_text(kind, ctx.tool_name, "no target in the arguments")
                )
            verdict = self.gate.evaluate(kind, value, ctx.tool_name)["verdict"]
            if verdict["effect"] == "ask":
                return ToolGuardrailFunctionOutput.reject_content(
                    refusal_text(
                        kind,
                        value,
                        "this call needs a person's approval, which a tool guardrail cannot "
                        "ask for",
                    )
                )
            auth = await self.gate.authorize(
                kind, value, tool=ctx.tool_name, item_id=ctx.tool_call_id
            )
            if auth["outcome"] == "allowed":
                return ToolGuardrailFunctionOutput.allow({"turngate": "allowed"})
            return ToolGuardrailFunctionOutput.reject_content(auth["tool_result"])

        return ToolInputGuardrail(guardrail_function=check, name=f"turngate:{kind}")

    def mcp_guardrail(
        self, server: str, *, kind: str = "mcp_write_or_unknown"
    ) -> ToolInputGuardrail[Any]:
        """:meth:`guardrail` for every tool of the local MCP server named ``server``
        (``MCPServerStdio(..., tool_input_guardrails=[tools.mcp_guardrail("github")])``): the
        action ``kind`` on ``server/tool``, the target ``turngate mcp wrap`` checks."""
        return self.guardrail(kind=kind, target=lambda tool, _args: f"{server}/{tool}")

    # --- approvals outside the tools ----------------------------------------------------

    def reject(
        self, state: RunState[Any], item: ToolApprovalItem, message: Optional[str] = None
    ) -> None:
        """``state.reject(item)`` with the gate told: the request the call deferred is
        resolved as denied, and the model gets the gate's text (or ``message``)."""
        text = self._deny(getattr(item.raw_item, "call_id", None), item.tool_name or "")
        state.reject(item, rejection_message=message or text)

    def _deny(self, call_id: Optional[str], tool: str) -> Optional[str]:
        request_id = self.request_for(call_id) if isinstance(call_id, str) else None
        if request_id is None:
            return None
        try:
            auth = self.gate.resume(request_id, Decision.deny("rejected by the person"))
        except ApprovalError as err:
            return refusal_text("unknown", tool, str(err))
        text = auth.get("tool_result")
        return text if isinstance(text, str) and text else None

    def error_formatter(self, args: ToolErrorFormatterArgs[Any]) -> Optional[str]:
        """``RunConfig(tool_error_formatter=...)``: a rejected approval of a call this gate
        deferred is recorded by the gate as denied, and the model gets the gate's text."""
        if args.kind != "approval_rejected":
            return None
        return self._deny(args.call_id, args.tool_name)

    def mcp_approval(
        self, *, kind: str = "mcp_write_or_unknown"
    ) -> Callable[[MCPToolApprovalRequest], Any]:
        """``HostedMCPTool(on_approval_request=...)``: the gate decides each hosted MCP call
        (action ``kind`` on ``server_label/tool``, the request id as ``item_id``). Allow
        approves, deny rejects with the gate's text. An ask is deferred and rejected with the
        pending text (the hosted call cannot wait; the request stays for a person, and the
        model may retry once it is answered)."""

        async def on_approval_request(req: MCPToolApprovalRequest) -> MCPToolApprovalFunctionResult:
            data = req.data
            target = f"{data.server_label}/{data.name}"
            auth = await self.gate.authorize(kind, target, tool=data.name, item_id=data.id)
            if auth["outcome"] == "allowed":
                return {"approve": True}
            return {"approve": False, "reason": auth["tool_result"]}

        return on_approval_request


def _target(target: Target, tool: str, args: Mapping[str, Any]) -> Optional[str]:
    if isinstance(target, str):
        return target_of(args, target)
    value = target(tool, args)
    return value if isinstance(value, str) else None
