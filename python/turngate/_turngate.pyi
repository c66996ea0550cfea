"""Type stubs of the turngate extension module (checked by mypy.stubtest)."""

import os
from collections.abc import Iterable, Sequence
from typing import Any, Literal, Optional, Union, final

_Effect = Literal["allow", "ask", "deny"]
_JSON = Any
_ActionTuple = Union[tuple[str, str], tuple[str, str, Optional[str]]]

class TurnGateError(Exception):
    """Base class of every turngate error."""

class PolicyError(TurnGateError):
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

class InvalidInput(TurnGateError):
    """An argument was malformed (not the expected protocol object)."""

@final
class Rule:
    """A rule: a kind, an effect, a glob on the target, an optional tool glob."""

    @property
    def kind(self) -> str: ...
    @property
    def effect(self) -> _Effect: ...
    @property
    def pattern(self) -> str: ...
    @property
    def tool(self) -> Optional[str]: ...
    def to_dict(self) -> dict[str, str]: ...

@final
class Verdict:
    """The verdict of an action: effect, deciding rule and layer, reason."""

    @property
    def effect(self) -> _Effect: ...
    @property
    def rule(self) -> Optional[Rule]: ...
    @property
    def layer(self) -> str: ...
    @property
    def reason(self) -> str: ...
    def to_dict(self) -> dict[str, Optional[str]]: ...

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
    def default(
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
    def check(self, kind: str, target: str, tool: Optional[str] = None) -> _Effect: ...
    def explain(self, kind: str, target: str, tool: Optional[str] = None) -> Verdict: ...
    def check_batch(self, actions: Iterable[_ActionTuple]) -> list[_Effect]: ...
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
def version() -> str: ...


__all__ = [
    "InvalidInput",
    "Policy",
    "PolicyError",
    "Rule",
    "SandboxUnavailable",
    "SnapshotError",
    "StoreError",
    "TurnGateError",
    "Verdict",
    "cap_from_parent",
    "ensure_native_shell_allowed",
    "intersect",
    "map_cli_runtime",
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
]
