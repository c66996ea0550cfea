"""The facade's records as Python sees them: plain dicts in their JSON form, the same fields
as in every language (``bindings/src``: ``Verdict``, ``Rule``, ``Evaluation``,
``Authorization``, ...). These TypedDicts type them; they exist at runtime only for
annotations."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any, Literal, Optional, Union

if sys.version_info >= (3, 11):
    from typing import NotRequired, TypedDict
else:
    from typing_extensions import NotRequired, TypedDict

Effect = Literal["allow", "ask", "deny"]


class Rule(TypedDict):
    kind: str
    effect: Effect
    pattern: str
    tool: Optional[str]


class Verdict(TypedDict):
    effect: Effect
    rule: Optional[Rule]
    layer: str
    reason: str


class Evaluation(TypedDict):
    verdict: Verdict
    target: str
    decided_by: Optional[str]


class Action(TypedDict):
    kind: str
    target: str
    tool: NotRequired[Optional[str]]


class InvocationOptions(TypedDict, total=False):
    """The keyword arguments of ``Gate.authorize``/``spawn``: the facade's ``Invocation``
    record beyond ``kind`` and ``target``. An unknown keyword raises ``InvalidInput``."""

    tool: Optional[str]
    item_id: Optional[str]
    tool_id: Optional[str]
    cwd: Union[str, "os.PathLike[str]", None]
    review: bool
    """``spawn`` only: hold the command's writes for review (a change set beside the store)."""


class Denial(TypedDict):
    kind: str
    target: str
    tool: Optional[str]
    reason: str
    verdict: Optional[Verdict]
    tool_result: str


class Allowed(TypedDict):
    outcome: Literal["allowed"]
    kind: str
    target: str
    tool: Optional[str]
    verdict: Verdict
    cached_approval: bool
    remember: list[Rule]


class Denied(Denial):
    outcome: Literal["denied"]


class Deferred(TypedDict):
    outcome: Literal["deferred"]
    request: dict[str, Any]
    reason: str
    tool_result: str


Authorization = Union[Allowed, Denied, Deferred]
"""What the gate decided for one call; ``outcome`` says which fields it has."""


class ChangeSetSummary(TypedDict):
    """A reviewed spawn's change set in brief (``SpawnResult.change_set``): its id and the
    paths it changes (absolute), by kind."""

    id: str
    status: str
    summary: str
    added: list[str]
    modified: list[str]
    deleted: list[str]
    mode_changed: list[str]
    unsupported: list[str]


class Ran(TypedDict):
    """A command that ran (under the sandbox when the snapshot requires one)."""

    outcome: Literal["ran"]
    pid: int
    exit_code: Optional[int]
    signal: Optional[int]
    timed_out: bool
    duration_ms: int
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    sandbox: Optional[dict[str, Any]]
    change_set: Optional[ChangeSetSummary]


SpawnResult = Union[Ran, Denied, Deferred]
"""What ``Gate.spawn`` did; ``outcome`` says which fields it has."""


class Change(TypedDict):
    """One change of a ``ChangeSet`` (``schema("Change")``)."""

    root: str
    path: str
    kind: Literal["added", "modified", "deleted", "mode_changed", "unsupported"]
    entry: Literal["file", "dir", "symlink", "other"]
    mode: NotRequired[int]
    old_mode: NotRequired[int]
    size: NotRequired[int]
    old_size: NotRequired[int]
    sha256: NotRequired[str]
    link_target: NotRequired[str]
    binary: bool
    diff: NotRequired[str]
    note: NotRequired[str]
    before: dict[str, Any]


class ReviewRoot(TypedDict):
    path: str
    layer: str


class ChangeSet(TypedDict):
    """A reviewed command's writes, waiting for a person (``schema("ChangeSet")``)."""

    id: str
    turn_id: str
    command: str
    created_at: str
    status: Literal["pending", "applied", "discarded"]
    roots: list[ReviewRoot]
    changes: list[Change]
    exit_code: NotRequired[int]
    upper_digest: str
    resolved_at: NotRequired[str]
    resolved_by: NotRequired[str]


class ApprovalAsk(TypedDict):
    request: dict[str, Any]
    action: Action
    verdict: Verdict


# ---- the guarded tools (issue 19) ------------------------------------------------------------

if TYPE_CHECKING:
    from ._turngate import Decision


class ApprovalAnswer(TypedDict):
    """A guarded tool's ``approval=``: this call continues deferred request ``request_id``
    with the person's answer."""

    request_id: str
    decision: Union["Decision", bool, Literal["allow_once", "allow_for_turn", "deny"]]


class ToolOutcome(TypedDict):
    """What a guarded tool did (``Gate.read_file``, ...). ``tool_result`` is the text for the
    model, for every outcome; fields a tool does not fill are None."""

    outcome: Literal["ok", "denied", "deferred", "failed"]
    tool_result: str
    kind: Literal["file_read", "file_write", "shell", "network"]
    target: str
    request_id: Optional[str]
    request: Optional[dict[str, Any]]
    content: Optional[str]
    exit_code: Optional[int]
    stdout: Optional[str]
    stderr: Optional[str]
    status: Optional[int]


__all__ = [
    "Action",
    "Allowed",
    "ApprovalAnswer",
    "ApprovalAsk",
    "Authorization",
    "Change",
    "ChangeSet",
    "ChangeSetSummary",
    "Denial",
    "Denied",
    "Deferred",
    "Effect",
    "Evaluation",
    "InvocationOptions",
    "Ran",
    "ReviewRoot",
    "Rule",
    "SpawnResult",
    "ToolOutcome",
    "Verdict",
]
