"""Agent framework adapters: turngate's guarded tools and gate checks in each framework's own
tool and approval mechanics.

One module per framework, each an optional extra, each imported only when asked for:

* :mod:`turngate.adapters.pydantic_ai` (``turngate[pydantic-ai]``): a toolset; an ask is
  pydantic-ai's ``ApprovalRequired``, resumed with ``DeferredToolResults``;
* :mod:`turngate.adapters.openai_agents` (``turngate[openai-agents]``): function tools whose
  ``needs_approval`` is the gate's ask, resumed by ``RunState.approve``/``reject``; tool
  guardrails and a hosted-MCP approval hook backed by the gate;
* :mod:`turngate.adapters.langgraph` (``turngate[langgraph]``): tools whose ask is
  ``interrupt()``, resumed with ``Command(resume=...)``.

Each passes the framework's tool-call id to the gate as ``item_id`` (it is in the audit row),
hands a denial's text to the model as the tool's result, and continues a deferred call with
the person's answer as ``approval=`` (re-checked by the gate, spent once).
"""

from ._common import TOOLS, Answer, ToolSpec, approval

__all__ = ["TOOLS", "Answer", "ToolSpec", "approval"]
