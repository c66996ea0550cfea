#!/usr/bin/env python3
"""`Policy.check` from Python against cedarpy's `is_authorized` on the same 100-rule policy,
interleaved round by round. The policy and the requests come from the Rust anchor bench
(`turngate-bench-anchors emit`), so Python, Rust and Cedar judge one definition:

    turngate-bench-anchors emit > /tmp/anchors.json
    /var/cache/turngate/venv/bin/python bench/python_anchors.py /tmp/anchors.json

Both sides are compiled once: a turngate `Policy` (compiled on construction) and a cedarpy
`PolicySet` and `Entities` handle. Each call is what a Python caller writes: turngate gets
(kind, target) strings, cedarpy a request dict. Prints one JSON object.
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import turngate

ROUNDS = 15
BATCH_S = 0.02


def calibrate(fn) -> int:
    fn()
    n = 1
    while True:
        t = time.perf_counter()
        for _ in range(n):
            fn()
        took = time.perf_counter() - t
        if took >= BATCH_S:
            return max(1, int(n * BATCH_S / took))
        n *= 8 if took < BATCH_S / 16 else 2


def interleave(contestants: dict[str, object]) -> dict[str, list[float]]:
    names = list(contestants)
    iters = {name: calibrate(contestants[name]) for name in names}
    per_round: dict[str, list[float]] = {name: [] for name in names}
    for r in range(ROUNDS):
        for k in range(len(names)):
            name = names[(k + r) % len(names)]
            fn, n = contestants[name], iters[name]
            t = time.perf_counter_ns()
            for _ in range(n):
                fn()
            per_round[name].append((time.perf_counter_ns() - t) / n)
    return per_round


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    spec = json.loads(open(sys.argv[1]).read())
    policy = turngate.Policy.from_json(spec["turngate_policy"])
    out: dict[str, object] = {"turngate": turngate.__version__}
    try:
        import cedarpy
        from importlib.metadata import version
    except ImportError as e:
        out["skipped"] = f"cedarpy does not import: {e}"
        print(json.dumps(out))
        return
    out["cedarpy"] = version("cedarpy")
    policies = cedarpy.PolicySet.from_str(spec["cedar_policies"])
    entities = cedarpy.Entities.from_json_str("[]")
    contestants = {}
    for case in spec["cases"]:
        request = {
            "principal": 'Agent::"agent"',
            "action": f'Action::"{case["kind"]}"',
            "resource": 'Target::"target"',
            "context": {case["context_key"]: case["matched"]},
        }
        kind, target = case["kind"], case["target"]
        got = policy.check(kind, target)
        assert got == case["turngate"], (case["id"], got)
        decision = cedarpy.is_authorized(request, policies, entities).decision
        assert (decision == cedarpy.Decision.Allow) == case["cedar_allows"], (case["id"], decision)
        contestants[f"turngate/{case['id']}"] = (lambda k=kind, t=target: policy.check(k, t))
        contestants[f"cedarpy/{case['id']}"] = (
            lambda rq=request: cedarpy.is_authorized(rq, policies, entities))
    series = interleave(contestants)
    rows = []
    for case in spec["cases"]:
        tg, cd = series[f"turngate/{case['id']}"], series[f"cedarpy/{case['id']}"]
        rows.append({
            "case": case["id"], "kind": case["kind"], "target": case["target"],
            "hit": case["hit"], "turngate_ns": spread(tg), "cedarpy_ns": spread(cd),
            "ratio_to_cedarpy": spread([a / b for a, b in zip(tg, cd)]),
        })
    out["rounds"] = ROUNDS
    out["cases"] = rows
    print(json.dumps(out))


if __name__ == "__main__":
    main()
