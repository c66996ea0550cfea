"""A typed use of the package, type-checked (never run) by mypy --strict and basedpyright
strict in test_stubs.py: the records are TypedDicts narrowed on `outcome`, errors subclass
the builtins, and a guarded function keeps its signature."""

from __future__ import annotations

from pathlib import Path

import turngate
from turngate import Authorization, Decision, Evaluation, Gate, Policy, Store, Verdict


def verdict_layer(p: Policy) -> str:
    v: Verdict = p.explain("file_read", "config/.env")
    rule = v["rule"]
    return v["layer"] if rule is None else rule["pattern"]


def outcome_text(a: Authorization) -> str:
    if a["outcome"] == "allowed":
        return a["target"] + str(a["cached_approval"])
    if a["outcome"] == "denied":
        return a["tool_result"]
    return a["request"]["id"] if "id" in a["request"] else a["reason"]


def spawn_text(s: turngate.SpawnResult) -> str:
    if s["outcome"] == "ran":
        return s["stdout"].decode() + str(s["exit_code"]) + str(s["stdout_truncated"])
    return s["tool_result"]


def run(workspace: Path) -> list[str]:
    p = Policy.tiered()
    ctx = {"workspace_root": str(workspace), "execution_backend": "native",
           "platform": turngate.probe_platform()}
    snapshot = turngate.resolve({"mode": "supervised"}, ctx)

    def approver(ask: turngate.ApprovalAsk) -> Decision:
        return Decision.approve() if ask["verdict"]["effect"] == "ask" else Decision.deny("no")

    gate = Gate("t", snapshot, Store(workspace / "audit.db"), approver)
    e: Evaluation = gate.evaluate("shell_command", "ls", cwd=workspace)
    a = gate.authorize_blocking("file_write", "a.txt", tool="edit", cwd=workspace)
    try:
        p.check("file_reed", "x")
    except ValueError as err:  # a PolicyError is a ValueError
        assert isinstance(err, turngate.PolicyError)

    @gate.guard("file_read", target="path")
    def read(path: str) -> str:
        return path

    out = read("a.txt")
    s = gate.spawn_blocking("true", cwd=workspace)
    return [verdict_layer(p), outcome_text(a), e["target"], str(e["decided_by"]), str(out),
            spawn_text(s)]
