"""What every framework adapter shares: the five guarded tools as data, strict argument
checks, the person's answer as an ``approval=``, and the gate check of a user's own tool.

Nothing here imports an agent framework. The adapters decide nothing themselves: every
allow, deny and ask comes from the gate; this module only carries the framework's tool-call
id to the gate as ``item_id`` and refuses (fails closed) whatever it cannot carry exactly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Mapping, Optional, Union

from .._turngate import ApprovalError, Decision, TurnGateError, scope_from_action, scope_hash

if TYPE_CHECKING:
    from .._guard import Gate
    from .._turngate import Store
    from .._types import Authorization

Answer = Union[Decision, bool, str]
"""A person's answer to an ask: a :class:`turngate.Decision`, ``True``/``False``, or one of
``"allow_once"``, ``"allow_for_turn"``, ``"deny"``."""

_ANSWERS = ("allow_once", "allow_for_turn", "deny")


@dataclass(frozen=True)
class ToolSpec:
    """One guarded tool: its name, the action kind it performs, what the model is told, and
    its arguments (JSON types; ``optional`` ones may be missing or null)."""

    name: str
    kind: str
    description: str
    required: Mapping[str, str]
    optional: Mapping[str, str]

    def json_schema(self, *, strict: bool = False) -> dict[str, Any]:
        """The arguments as a JSON schema. ``strict``: every property listed as required and
        the optional ones nullable (OpenAI's strict function calling)."""
        props: dict[str, Any] = {k: {"type": t} for k, t in self.required.items()}
        for k, t in self.optional.items():
            props[k] = {"type": [t, "null"]} if strict else {"type": t}
        required = list(self.required) + (list(self.optional) if strict else [])
        return {
            "type": "object",
            "properties": props,
            "required": required,
            "additionalProperties": False,
        }


TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in (
        ToolSpec(
            "read_file",
            "file_read",
            "Read a text file of the workspace. Returns its content, or why it was refused.",
            {"path": "string"},
            {"max_bytes": "integer"},
        ),
        ToolSpec(
            "write_file",
            "file_write",
            "Create or overwrite a file with `content`. Returns what was written, or why it "
            "was refused.",
            {"path": "string", "content": "string"},
            {},
        ),
        ToolSpec(
            "edit_file",
            "file_write",
            "Replace the text `old` (which must occur exactly once) with `new` in a file.",
            {"path": "string", "old": "string", "new": "string"},
            {},
        ),
        ToolSpec(
            "run_shell",
            "shell_command",
            "Run a shell command line in the sandbox. Returns its exit code and output, or "
            "why it was refused.",
            {"command": "string"},
            {"timeout_ms": "integer", "stdin": "string", "cwd": "string"},
        ),
        ToolSpec(
            "fetch_url",
            "network",
            "Fetch a URL over HTTP(S). Returns the status and body, or why it was refused.",
            {"url": "string"},
            {"method": "string", "body": "string", "timeout_ms": "integer"},
        ),
    )
}
"""The five guarded tools, by name (the gate's method of the same name performs each)."""

_JSON_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,)}


class BadArguments(ValueError):
    """The model's arguments do not fit the tool (unknown, missing or mistyped); the tool
    did not run."""


def check_arguments(spec: ToolSpec, args: Mapping[str, Any]) -> dict[str, Any]:
    """``args`` checked against ``spec``: unknown, missing or mistyped ones refused, a null
    optional one dropped."""
    if not isinstance(args, Mapping):
        raise BadArguments(f"{spec.name}: the arguments must be an object")
    unknown = sorted(set(args) - set(spec.required) - set(spec.optional))
    if unknown:
        raise BadArguments(f"{spec.name}: unknown argument(s) {', '.join(unknown)}")
    checked: dict[str, Any] = {}
    for key, json_type in {**spec.required, **spec.optional}.items():
        value = args.get(key)
        if value is None:
            if key in spec.required:
                raise BadArguments(f"{spec.name}: missing argument {key}")
            continue
        if isinstance(value, bool) or not isinstance(value, _JSON_TYPES[json_type]):
            raise BadArguments(f"{spec.name}: argument {key} must be a {json_type}")
        checked[key] = value
    return checked


def refusal_text(kind: str, target: str, reason: str) -> str:
    """A refusal the adapter makes itself, worded like the core's denials."""
    return (
        f"Permission denied by turngate: {kind} `{target}`: {reason}. "
        "Continue with an allowed alternative."
    )


def answer_name(answer: Answer) -> Literal["allow_once", "allow_for_turn", "deny"]:
    """The wire name of a person's answer. Anything unrecognised is a deny (fail closed)."""
    if isinstance(answer, Decision):
        return "allow_once" if answer.kind == "approve" else "deny"
    if answer is True:
        return "allow_once"
    if isinstance(answer, str) and answer in _ANSWERS:
        return answer  # type: ignore[return-value]
    return "deny"


def approval(request_id: str, answer: Answer) -> dict[str, Any]:
    """The ``approval=`` of a guarded tool call that continues ``request_id`` with
    ``answer``. A :class:`Decision` is passed as it is (a reviewer's modified action, a
    denial's reason); every other answer by its wire name."""
    if not isinstance(request_id, str) or not request_id:
        raise ValueError("an approval needs the request id of the deferred call")
    decision: Any = answer if isinstance(answer, Decision) else answer_name(answer)
    return {"request_id": request_id, "decision": decision}


async def call_tool(
    gate: "Gate",
    name: str,
    args: Mapping[str, Any],
    *,
    item_id: Optional[str],
    approval: Optional[Mapping[str, Any]] = None,
) -> dict[str, Any]:
    """Perform guarded tool ``name`` with the model's ``args`` through the gate's method of
    that name, the framework's tool-call id as ``item_id``. Returns the ``ToolOutcome``;
    arguments that do not fit are an outcome ``denied`` with the reason (nothing ran)."""
    spec = TOOLS[name]
    try:
        a = check_arguments(spec, args)
    except BadArguments as err:
        return {
            "outcome": "denied",
            "tool_result": refusal_text(spec.kind, "?", str(err)),
            "kind": spec.kind,
            "target": "",
        }
    try:
        return dict(await _perform(gate, name, a, item_id=item_id, approval=approval))
    except TurnGateError as err:
        # Refused by turngate (an approval of another call, spent, unknown; a sandbox that is
        # not there): the text goes to the model like a denial's.
        return {
            "outcome": "denied",
            "tool_result": refusal_text(spec.kind, str(args.get(_first(spec), "?")), str(err)),
            "kind": spec.kind,
            "target": "",
        }


def _first(spec: ToolSpec) -> str:
    return next(iter(spec.required))


async def _perform(
    gate: "Gate",
    name: str,
    a: Mapping[str, Any],
    *,
    item_id: Optional[str],
    approval: Optional[Mapping[str, Any]],
) -> Any:
    common: dict[str, Any] = {"item_id": item_id, "tool": name, "approval": approval}
    outcome: Any
    if name == "read_file":
        outcome = await gate.read_file(a["path"], max_bytes=a.get("max_bytes"), **common)
    elif name == "write_file":
        outcome = await gate.write_file(a["path"], a["content"], **common)
    elif name == "edit_file":
        outcome = await gate.edit_file(a["path"], a["old"], a["new"], **common)
    elif name == "run_shell":
        outcome = await gate.run_shell(
            a["command"],
            timeout_ms=a.get("timeout_ms"),
            stdin=a.get("stdin"),
            cwd=a.get("cwd"),
            **common,
        )
    else:
        outcome = await gate.fetch_url(
            a["url"],
            method=a.get("method", "GET"),
            body=a.get("body"),
            timeout_ms=a.get("timeout_ms"),
            **common,
        )
    return outcome


def _text(value: Any) -> str:
    if isinstance(value, (str, bytes, os.PathLike)):
        return os.fsdecode(value)
    return str(value)


def target_of(args: Mapping[str, Any], target: str) -> Optional[str]:
    """The action's target in a user tool's arguments: the argument named ``target``."""
    value = args.get(target)
    return None if value is None else _text(value)


async def authorize_own(
    gate: "Gate",
    kind: str,
    target: str,
    *,
    tool: str,
    item_id: Optional[str],
    request_id: Optional[str] = None,
    answer: Optional[Answer] = None,
    store: Optional["Store"] = None,
) -> "Authorization":
    """The gate's answer for a user's own tool call: a fresh ``authorize`` with the
    framework's tool-call id, or, given the ``request_id`` this call deferred and the
    person's ``answer``, ``Gate.resume`` of it.

    A resumed (or remembered) allow is kept only when it is exactly this call's action (the
    kind, and the target as the gate resolves it); otherwise the call is refused: a model
    that changes the arguments of the resumed call, or an approval of another call, never
    runs the tool on what nobody approved. A user tool receives its arguments unchanged, so
    a reviewer's *modified* action cannot be carried and is refused too. Given the turn's
    ``store``, the stored request is compared with this call before it is resumed, so an
    approval moved to another call is refused without resolving or spending it.
    """
    if request_id is not None and store is not None:
        stored = store.approval(request_id)
        expected = gate.evaluate(kind, target, tool)["target"]
        action = stored.get("action") if stored else None
        if not isinstance(action, Mapping) or (action.get("kind"), action.get("target")) != (
            kind,
            expected,
        ):
            shown = (
                f"{action.get('kind')} `{action.get('target')}`"
                if isinstance(action, Mapping)
                else "no stored action"
            )
            return _refused(
                gate,
                kind,
                target,
                tool,
                f"request {request_id} is for {shown}, not this call's {kind} `{expected}`; "
                f"{tool} did not run",
            )
    if request_id is None:
        auth = await gate.authorize(kind, target, tool=tool, item_id=item_id)
    else:
        name = answer_name(answer if answer is not None else "deny")
        if isinstance(answer, Decision):
            decision = answer
        elif name == "deny":
            decision = Decision.deny("denied by the person")
        else:
            decision = Decision.approve()
        try:
            auth = gate.resume(request_id, decision)
        except ApprovalError as err:
            # An unknown, spent or already answered request: nothing ran, nothing runs.
            return _refused(gate, kind, target, tool, str(err))
        if auth["outcome"] == "allowed" and name == "allow_for_turn":
            gate.grant_for_turn(scope_hash(scope_from_action(auth["kind"], auth["target"], tool)))
    if auth["outcome"] != "allowed":
        return auth
    expected = gate.evaluate(kind, target, tool)["target"]
    if auth["kind"] != kind or auth["target"] != expected:
        return _refused(
            gate,
            kind,
            target,
            tool,
            f"the approval covers {auth['kind']} `{auth['target']}`, not this call's "
            f"{kind} `{expected}`; {tool} did not run",
        )
    return auth


def _refused(gate: "Gate", kind: str, target: str, tool: str, reason: str) -> "Authorization":
    resolved = gate.evaluate(kind, target, tool)["target"]
    return {
        "outcome": "denied",
        "kind": kind,
        "target": resolved,
        "tool": tool,
        "reason": reason,
        "verdict": None,
        "tool_result": refusal_text(kind, resolved, reason),
    }
