"""turngate: the permission and sandboxing core for AI agents.

Every side-effecting tool call of an agent turn is checked against a compiled
:class:`Policy` before it runs: the answer is ``"allow"``, ``"ask"`` or
``"deny"``. The rules live in the Rust core; this package is a thin, typed
wrapper over it.

>>> import turngate
>>> policy = turngate.Policy.tiered()
>>> policy.check("file_read", "config/.env")
'deny'
>>> policy.explain("file_read", "config/.env")["layer"]
'builtin-secrets'

Protocol objects (selections, contexts, snapshots, caps) are plain dicts in the
JSON shape of the schemas in ``schema_names()``; they round-trip with ``json``.

``turngate.client.connect(...)`` is the other way in: a small pure-Python client for
``turngate serve`` (the same Turns API out of process, over a socket, stdio or HTTP).
"""

from . import client
from ._guard import Gate
from ._tools import turn
from ._types import (
    Allowed,
    ApprovalAsk,
    Authorization,
    Change,
    ChangeSet,
    ChangeSetSummary,
    Deferred,
    Denial,
    Denied,
    Evaluation,
    Ran,
    Rule,
    SpawnResult,
    Verdict,
)
from ._types import ApprovalAnswer, ToolOutcome
from ._turngate import (
    ApprovalError,
    Broker,
    ChangesError,
    Decision,
    PendingApproval,
    PermissionDenied,
    RunError,
    Store,
    Subscription,
    check_file,
    check_network,
    evaluate,
    filter_env,
    parse_command_line,
    plan_spawn,
    InvalidInput,
    Policy,
    PolicyError,
    SandboxUnavailable,
    SnapshotError,
    StoreError,
    TurnGateError,
    cap_from_parent,
    ensure_native_shell_allowed,
    intersect,
    map_cli_runtime,
    parse_change_set,
    probe_platform,
    reduce,
    reduce_all,
    render_permissions_section,
    resolve,
    schema,
    schema_names,
    scope_from_action,
    scope_hash,
    version,
)

__version__: str = version()

# Before the interpreter finalizes, the core's threads stop entering Python (one that did during
# finalization would be ended mid-call by CPython, which crashes the process).
import atexit as _atexit

from ._turngate import _shutdown

_atexit.register(_shutdown)

ACTION_KINDS: tuple[str, ...] = (
    "file_read",
    "file_write",
    "shell_command",
    "network",
    "mcp_read",
    "mcp_write_or_unknown",
    "dynamic_skill_tool",
    "computer_use",
    "task_subagent",
    "internal",
    "unknown",
)
"""The action kinds' wire names, in the core's order."""

__all__ = [
    "ACTION_KINDS",
    "client",
    "Allowed",
    "ApprovalAsk",
    "ApprovalError",
    "Deferred",
    "Denial",
    "Denied",
    "Evaluation",
    "Authorization",
    "Broker",
    "Change",
    "ChangeSet",
    "ChangeSetSummary",
    "ChangesError",
    "Decision",
    "Gate",
    "PendingApproval",
    "PermissionDenied",
    "Ran",
    "RunError",
    "SpawnResult",
    "Store",
    "Subscription",
    "check_file",
    "check_network",
    "evaluate",
    "filter_env",
    "parse_command_line",
    "plan_spawn",
    "InvalidInput",
    "Policy",
    "PolicyError",
    "Rule",
    "SandboxUnavailable",
    "SnapshotError",
    "StoreError",
    "TurnGateError",
    "Verdict",
    "__version__",
    "cap_from_parent",
    "ensure_native_shell_allowed",
    "intersect",
    "map_cli_runtime",
    "parse_change_set",
    "probe_platform",
    "reduce",
    "reduce_all",
    "render_permissions_section",
    "resolve",
    "schema",
    "schema_names",
    "scope_from_action",
    "scope_hash",
    "version",
    # the guarded tools and the one-line turn (issue 19)
    "ApprovalAnswer",
    "ToolOutcome",
    "turn",
]
