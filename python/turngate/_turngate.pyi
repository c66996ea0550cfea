"""Type stubs of the turngate extension module (checked by mypy.stubtest)."""

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, BinaryIO, Literal, Optional, Union, final, overload

from typing_extensions import Self, Unpack, disjoint_base

from ._types import (
    ApprovalAsk,
    Authorization,
    ChangeSet,
    ChangeSetSummary,
    Effect,
    Evaluation,
    FileCheck,
    InvocationOptions,
    NetworkCheck,
    NetworkResolution,
    ParsedCommandLine,
    Rule,
    SpawnResult,
    Verdict,
)

_JSON = Any
_ActionTuple = Union[tuple[str, str], tuple[str, str, Optional[str]]]

class TurnGateError(Exception):
    """Base class of every turngate error."""

class PolicyError(TurnGateError, ValueError):
    """A policy did not parse or compile, or named an unknown kind, effect or mode.

    For a parse error, ``path`` is the failing field path (``.`` for the
    document) and ``line``/``column`` are 1-based; otherwise they are None.
    """

    path: Optional[str]
    line: Optional[int]
    column: Optional[int]

class SnapshotError(TurnGateError):
    """A snapshot could not be resolved, or refuses what was asked of it.

    ``code`` is ``invalid_path``, ``cwd_outside_roots``,
    ``source_not_selectable`` or ``provider_native_on_native_shell``.
    """

    code: str

class StoreError(TurnGateError):
    """The durable approval/audit store failed."""

class SandboxUnavailable(TurnGateError):
    """A sandbox backend is required but unavailable on this platform."""

class InvalidInput(TurnGateError, ValueError):
    """An argument was malformed (not the expected protocol object)."""

class ApprovalError(TurnGateError):
    """An approval operation was refused (unknown or duplicate request, a resolution the
    request does not offer, a closed broker)."""

class RunError(TurnGateError):
    """A command could not be run; nothing ran unconfined."""

class ChangesError(TurnGateError):
    """A change set operation was refused (reviewable writes); nothing in the workspace
    changed.

    ``code`` says why (``conflicts``, ``policy_refused``, ``tampered``, ``not_pending``,
    ``busy``, ``unsupported``, ``bad_id``, ``not_found``, ``unavailable``, ``io``, ...);
    ``paths`` names the conflicting, refused or tampered paths (absolute).
    """

    code: str
    paths: list[str]

class PermissionDenied(TurnGateError, PermissionError):
    """The gate refused an action (raised by ``open_read``/``open_write`` and by guarded
    functions with ``on_deny="raise"``)."""

    reason: str
    tool_result: str
    kind: str
    target: str

@final
class Policy:
    """A compiled, immutable policy."""

    def __new__(cls) -> Policy: ...
    @staticmethod
    def from_json(text: str, origin: Optional[str] = None) -> Policy: ...
    @staticmethod
    def from_toml(text: str, origin: Optional[str] = None) -> Policy: ...
    @staticmethod
    def from_dict(data: dict[str, _JSON]) -> Policy: ...
    @staticmethod
    def from_file(path: Union[str, os.PathLike[str]]) -> Policy: ...
    @staticmethod
    def tiered(
        test_binary: Optional[str] = None, provider_host: Optional[str] = None
    ) -> Policy: ...
    @staticmethod
    def permissive() -> Policy: ...
    @staticmethod
    def mode(name: str) -> Policy: ...
    def merge(self, other: Policy) -> Policy: ...
    def contain(self, cap: Policy) -> Policy: ...
    def rule(
        self,
        kind: str,
        effect: str,
        pattern: str,
        *,
        tool: Optional[str] = None,
        layer: Optional[str] = None,
    ) -> Policy: ...
    def layer(self, name: str) -> Policy: ...
    def with_default(self, kind: str, effect: str) -> Policy: ...
    def named(self, name: str) -> Policy: ...
    def check(self, kind: str, target: str, tool: Optional[str] = None) -> Effect: ...
    def explain(self, kind: str, target: str, tool: Optional[str] = None) -> Verdict: ...
    def lint(self) -> list[dict[str, _JSON]]: ...
    def explain_in_turn(
        self,
        kind: str,
        target: str,
        tool: Optional[str] = None,
        history: Optional[list[dict[str, _JSON]]] = None,
    ) -> dict[str, _JSON]: ...
    def replay_events(
        self, events: list[dict[str, _JSON]], options: Optional[dict[str, _JSON]] = None
    ) -> dict[str, _JSON]: ...
    def check_batch(self, actions: Iterable[_ActionTuple]) -> list[Effect]: ...
    def to_dict(self) -> dict[str, _JSON]: ...
    def to_json(self) -> str: ...
    def to_toml(self) -> str: ...

def resolve(
    selection: Optional[dict[str, _JSON]],
    context: dict[str, _JSON],
    cap: Optional[dict[str, _JSON]] = None,
) -> dict[str, _JSON]: ...
def intersect(snapshot: dict[str, _JSON], cap: dict[str, _JSON]) -> dict[str, _JSON]: ...
def cap_from_parent(snapshot: dict[str, _JSON], origin: str) -> dict[str, _JSON]: ...
def ensure_native_shell_allowed(snapshot: dict[str, _JSON]) -> None: ...
def render_permissions_section(profile: dict[str, _JSON]) -> Optional[str]: ...
def map_cli_runtime(runtime: str, mode: str) -> dict[str, _JSON]: ...
def probe_platform() -> dict[str, _JSON]: ...
def schema(name: str) -> dict[str, _JSON]: ...
def schema_names() -> list[str]: ...
def reduce(state: Optional[dict[str, _JSON]], input: dict[str, _JSON]) -> dict[str, _JSON]: ...
def reduce_all(
    inputs: Sequence[dict[str, _JSON]], state: Optional[dict[str, _JSON]] = None
) -> dict[str, _JSON]: ...
def scope_from_action(
    kind: str, target: str, tool: Optional[str] = None, cwd: Optional[str] = None
) -> dict[str, _JSON]: ...
def scope_hash(scope: dict[str, _JSON]) -> str: ...
def parse_change_set(change_set: dict[str, _JSON]) -> ChangeSet: ...
def version() -> str: ...

# the guarded tools' helpers (issue 19; see _tools.py)
def _fetch_done(
    url: str, status: int, body: bytes, truncated: bool, location: Optional[str] = None
) -> dict[str, _JSON]: ...
def _fetch_failed(url: str, error: str) -> dict[str, _JSON]: ...
def _shutdown() -> None: ...
def _default_store_path() -> str: ...
def _turn_snapshot(
    workspace: Union[str, os.PathLike[str]], mode: str, policy: Optional[dict[str, _JSON]] = None
) -> dict[str, _JSON]: ...

_Env = Union[Mapping[Any, Any], Iterable[tuple[Union[str, bytes], Union[str, bytes]]]]
_DecisionLike = Union["Decision", bool, str]
_Approver = Union[
    Callable[[ApprovalAsk], Union[_DecisionLike, Awaitable[_DecisionLike]]],
    Callable[[dict[str, _JSON]], Union[_DecisionLike, Awaitable[_DecisionLike]]],
    "Broker",
    Literal["approve_all", "deny_all", "defer_all"],
    None,
]

@final
class Decision:
    """An approver's answer."""

    @staticmethod
    def approve(
        modified: Union[_ActionTuple, dict[str, Optional[str]], None] = None,
        remember: Optional[Iterable[Union[Rule, dict[str, str]]]] = None,
    ) -> Decision: ...
    @staticmethod
    def deny(reason: str) -> Decision: ...
    @staticmethod
    def defer() -> Decision: ...
    @property
    def kind(self) -> Literal["approve", "deny", "defer"]: ...
    @property
    def reason(self) -> Optional[str]: ...

@final
class Store:
    """The durable audit and approval store (a SQLite file)."""

    def __new__(
        cls,
        path: Union[str, os.PathLike[str]],
        durability: Optional[Literal["process", "power"]] = None,
    ) -> Store: ...
    @staticmethod
    def memory() -> Store: ...
    @property
    def path(self) -> str: ...
    def wait_resolved(
        self, request_id: str, timeout_ms: Optional[int] = None
    ) -> Awaitable[dict[str, _JSON]]: ...
    def wait_resolved_blocking(
        self, request_id: str, timeout_ms: Optional[int] = None
    ) -> dict[str, _JSON]: ...
    def append(self, event: dict[str, _JSON]) -> int: ...
    @overload
    def replay(self, what: str) -> list[dict[str, _JSON]]: ...
    @overload
    def replay(
        self,
        what: Policy,
        turn: Optional[str] = None,
        since: Optional[str] = None,
        workspace: Optional[str] = None,
    ) -> dict[str, _JSON]: ...
    def turns(self) -> list[str]: ...
    def pending_approvals(self) -> list[dict[str, _JSON]]: ...
    def approval(self, request_id: str) -> Optional[dict[str, _JSON]]: ...
    def resolve(
        self, request_id: str, resolution: str, reason: str = "responder"
    ) -> dict[str, _JSON]: ...
    def change_sets(self) -> list[ChangeSet]: ...
    def change_set(self, id: str) -> ChangeSet: ...
    def apply_change_set(
        self, id: str, *, confirm_asks: bool = False, by: Optional[str] = None
    ) -> ChangeSet: ...
    def discard_change_set(self, id: str, *, by: Optional[str] = None) -> ChangeSet: ...

@final
class Subscription:
    """An async iterator of approval notifications."""

    def __aiter__(self) -> Subscription: ...
    def __anext__(self) -> Awaitable[dict[str, _JSON]]: ...
    def try_next(self) -> Optional[dict[str, _JSON]]: ...
    def cancel(self) -> None: ...

@final
class PendingApproval:
    """A request opened on a broker."""

    @property
    def request(self) -> dict[str, _JSON]: ...
    def wait(self) -> Awaitable[dict[str, _JSON]]: ...

@final
class Broker:
    """The approval broker."""

    def __new__(cls, policy: Policy) -> Broker: ...
    def subscribe(self) -> Subscription: ...
    def open(
        self,
        request: dict[str, _JSON],
        action: Union[_ActionTuple, dict[str, Optional[str]]],
        timeout_ms: Optional[int] = None,
    ) -> PendingApproval: ...
    def respond(self, id: str, resolution: str) -> dict[str, _JSON]: ...
    def pending_requests(self) -> list[dict[str, _JSON]]: ...
    def outcome(self, id: str) -> Optional[dict[str, _JSON]]: ...
    def has_grant(self, turn_id: str, scope_hash: str) -> bool: ...
    def cancel_turn(self, turn_id: str) -> list[dict[str, _JSON]]: ...
    def end_turn(self, turn_id: str) -> list[dict[str, _JSON]]: ...
    def close(self) -> None: ...

@disjoint_base
class Gate:
    """The gate of one turn."""

    def __new__(
        cls,
        turn_id: str,
        snapshot: dict[str, _JSON],
        store: Store,
        approver: _Approver = None,
        *,
        broker: Optional[Broker] = None,
    ) -> Self: ...
    @property
    def turn_id(self) -> str: ...
    @property
    def snapshot(self) -> dict[str, _JSON]: ...
    def evaluate(
        self, kind: str, target: str, tool: Optional[str] = None, cwd: Optional[Union[str, os.PathLike[str]]] = None
    ) -> Evaluation: ...
    def authorize(
        self, kind: str, target: str, **options: Unpack[InvocationOptions]
    ) -> Awaitable[Authorization]: ...
    def authorize_blocking(
        self, kind: str, target: str, **options: Unpack[InvocationOptions]
    ) -> Authorization: ...
    def spawn(
        self, command_line: str, **options: Unpack[InvocationOptions]
    ) -> Awaitable[SpawnResult]: ...
    def spawn_blocking(
        self, command_line: str, **options: Unpack[InvocationOptions]
    ) -> SpawnResult: ...
    def run_approved_blocking(self, request_id: str) -> SpawnResult: ...
    def resume_spawn_blocking(self, request_id: str, decision: _DecisionLike) -> SpawnResult: ...
    def resume(self, request_id: str, decision: Optional[_DecisionLike] = None) -> Authorization: ...
    def wait_resolved(
        self, request_id: str, timeout_ms: Optional[int] = None
    ) -> Awaitable[dict[str, _JSON]]: ...
    def wait_resolved_blocking(
        self, request_id: str, timeout_ms: Optional[int] = None
    ) -> dict[str, _JSON]: ...
    def open_read(
        self, path: Union[str, os.PathLike[str]], *, tool: Optional[str] = None
    ) -> Awaitable[BinaryIO]: ...
    def open_write(
        self, path: Union[str, os.PathLike[str]], *, tool: Optional[str] = None
    ) -> Awaitable[BinaryIO]: ...
    def open_read_blocking(
        self, path: Union[str, os.PathLike[str]], *, tool: Optional[str] = None
    ) -> BinaryIO: ...
    def open_write_blocking(
        self, path: Union[str, os.PathLike[str]], *, tool: Optional[str] = None
    ) -> BinaryIO: ...
    def resolve_and_check(self, url: str, tool: Optional[str] = None) -> NetworkResolution: ...
    def grant_for_turn(self, scope_hash: str) -> None: ...
    # the guarded tools' native half and async run_approved (issue 19; see _tools.py)
    def _tool(
        self,
        name: str,
        data: Optional[bytes] = None,
        on_output: Optional[Callable[[str, bytes], object]] = None,
        **kwargs: Any,
    ) -> Awaitable[dict[str, _JSON]]: ...
    def _tool_blocking(
        self,
        name: str,
        data: Optional[bytes] = None,
        on_output: Optional[Callable[[str, bytes], object]] = None,
        **kwargs: Any,
    ) -> dict[str, _JSON]: ...
    def run_approved(self, request_id: str) -> Awaitable[SpawnResult]: ...

def check_file(
    sandbox: dict[str, _JSON],
    policy: Policy,
    kind: str,
    path: Union[str, os.PathLike[str]],
    tool: Optional[str] = None,
) -> FileCheck: ...
def check_network(
    network: dict[str, _JSON], policy: Policy, target: str, tool: Optional[str] = None
) -> NetworkCheck: ...
def plan_spawn(
    sandbox: dict[str, _JSON],
    process: dict[str, _JSON],
    policy: Policy,
    command_line: str,
    *,
    cwd: Optional[Union[str, os.PathLike[str]]] = None,
    env: Optional[_Env] = None,
    timeout_ms: Optional[int] = None,
    tool: Optional[str] = None,
) -> dict[str, _JSON]: ...
def filter_env(
    env: _Env,
    mode: str,
    cwd: Union[str, os.PathLike[str]],
    untrusted_path_roots: Sequence[str] = ...,
) -> dict[str, _JSON]: ...
def parse_command_line(line: str) -> ParsedCommandLine: ...
def evaluate(
    snapshot: dict[str, _JSON],
    kind: str,
    target: str,
    tool: Optional[str] = None,
    cwd: Optional[Union[str, os.PathLike[str]]] = None,
) -> Evaluation: ...


__all__ = [
    "ApprovalError",
    "Broker",
    "ChangesError",
    "Decision",
    "Gate",
    "PendingApproval",
    "PermissionDenied",
    "RunError",
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
    "SandboxUnavailable",
    "SnapshotError",
    "StoreError",
    "TurnGateError",
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
    # the guarded tools' helpers (issue 19)
    "_default_store_path",
    "_fetch_done",
    "_fetch_failed",
    "_shutdown",
    "_turn_snapshot",
]
