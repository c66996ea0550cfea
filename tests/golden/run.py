"""The golden calls through the Python binding: one JSON line per call (tests/golden/README.md)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import turngate

ERRORS = {
    "PolicyError": "Policy",
    "SnapshotError": "Snapshot",
    "StoreError": "Store",
    "SandboxUnavailable": "SandboxUnavailable",
    "ApprovalError": "Approval",
    "RunError": "Run",
    "ChangesError": "Changes",
    "InvalidInput": "InvalidInput",
}


def subst(v: Any, ws: str) -> Any:
    if isinstance(v, str):
        return v.replace("$WS", ws)
    if isinstance(v, list):
        return [subst(x, ws) for x in v]
    if isinstance(v, dict):
        return {k: subst(x, ws) for k, x in v.items()}
    return v


def policy(spec: dict[str, Any]) -> turngate.Policy:
    if "tiered" in spec:
        return turngate.Policy.tiered()
    if "mode" in spec:
        return turngate.Policy.mode(spec["mode"])
    return turngate.Policy.from_dict(spec["json"])


def gate(a: dict[str, Any], tmp: str, i: int, asks: list[Any]) -> turngate.Gate:
    answers = {
        "approve": turngate.Decision.approve(),
        "deny": turngate.Decision.deny("the golden approver said no"),
        "defer": turngate.Decision.defer(),
    }

    def approver(ask: Any) -> turngate.Decision:
        asks.append(ask)
        return answers[a["approver"]]

    snapshot = turngate.resolve(a["selection"], a["context"])
    return turngate.Gate("golden", snapshot, turngate.Store(os.path.join(tmp, f"{i}.db")), approver)


def run(call: str, a: dict[str, Any], tmp: str, i: int) -> Any:
    if call == "policy.check":
        return policy(a["policy"]).check(a["kind"], a["target"], a.get("tool"))
    if call == "policy.explain":
        return policy(a["policy"]).explain(a["kind"], a["target"], a.get("tool"))
    if call == "policy.check_batch":
        actions = [(x["kind"], x["target"], x.get("tool")) for x in a["actions"]]
        return policy(a["policy"]).check_batch(actions)
    if call == "snapshot.resolve":
        return turngate.resolve(a["selection"], a["context"])
    if call == "command.parse":
        return turngate.parse_command_line(a["line"])
    if call == "env.filter":
        env = [(v["name"], v["value"]) for v in a["vars"]]
        return turngate.filter_env(env, a["mode"], a["cwd"], a["untrusted_path_roots"])
    if call == "gate.evaluate":
        inv = a["invocation"]
        g = gate(a, tmp, i, [])
        return g.evaluate(inv["kind"], inv["target"], inv.get("tool"), inv.get("cwd"))
    if call == "gate.authorize":
        asks: list[Any] = []
        inv = dict(a["invocation"])
        g = gate(a, tmp, i, asks)
        auth = g.authorize_blocking(inv.pop("kind"), inv.pop("target"), **inv)
        return {"authorization": auth, "asks": asks}
    if call == "reduce_all":
        return turngate.reduce_all(a["inputs"])
    if call == "scope.from_action":
        return turngate.scope_from_action(a["kind"], a["target"], a.get("tool"), a.get("cwd"))
    if call == "scope.hash":
        return turngate.scope_hash(a["scope"])
    if call == "changes.parse":
        return turngate.parse_change_set(a["change_set"])
    if call == "changes.show":
        return turngate.Store(os.path.join(tmp, f"{i}.db")).change_set(a["id"])
    raise SystemExit(f"unknown call {call}")


def as_list(v: Any) -> Any:
    """Bytes as the list of their values (the serde form of bytes in JSON)."""
    if isinstance(v, bytes):
        return list(v)
    raise TypeError(f"{type(v).__name__} is not JSON")


def main() -> None:
    doc = json.load(open(sys.argv[1]))
    ws, tmp = os.environ["GOLDEN_WS"], os.environ["GOLDEN_TMP"]
    for i, c in enumerate(doc["calls"]):
        try:
            out: dict[str, Any] = {"result": run(c["call"], subst(c["args"], ws), tmp, i)}
        except turngate.TurnGateError as e:
            out = {"error": {"type": ERRORS[type(e).__name__], "message": str(e)}}
        print(json.dumps({"name": c["name"], **out}, sort_keys=True, separators=(",", ":"), default=as_list))


main()
