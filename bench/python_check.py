#!/usr/bin/env python3
"""Per-call cost of `Policy.check` from Python, against a Python no-op function call with the
same arguments in the same run, and of the batch API per action (DESIGN.md §9: <= 2 µs per
call). Run inside the virtualenv that scripts/test-python builds:

    /var/cache/turngate/venv/bin/python bench/python_check.py
"""

from __future__ import annotations

import statistics
import timeit

import turngate

N = 200_000
REPEAT = 7


def policy_100_rules() -> turngate.Policy:
    p = turngate.Policy.default().layer("bench")
    for i in range(50):
        p = p.rule("file_read", "deny", f"secret{i}/**/*.key")
        p = p.rule("file_write", "allow", f"src/mod{i}/*.rs")
    return p


def noop(kind: str, target: str, tool: str | None = None) -> str:
    return "allow"


def per_call_ns(stmt: str, env: dict[str, object], number: int = N) -> float:
    times = timeit.repeat(stmt, globals=env, number=number, repeat=REPEAT)
    return statistics.median(times) / number * 1e9


def main() -> None:
    p = policy_100_rules()
    check = p.check
    env: dict[str, object] = {"check": check, "noop": noop, "p": p}
    baseline = per_call_ns("noop('file_write', 'src/mod7/lib.rs')", env)
    rows = [
        ("python no-op function call (baseline)", baseline),
        ("check file_write src/mod7/lib.rs (allow rule)", per_call_ns("check('file_write', 'src/mod7/lib.rs')", env)),
        ("check file_read config/.env (deny rule)", per_call_ns("check('file_read', 'config/.env')", env)),
        ("check network api.example.com:443 (default)", per_call_ns("check('network', 'api.example.com:443')", env)),
        ("check shell_command 'cargo test | tee log'", per_call_ns("check('shell_command', 'cargo test | tee log')", env)),
        ("explain file_read config/.env", per_call_ns("p.explain('file_read', 'config/.env')", env)),
    ]
    batch = [("file_write", f"src/mod{i % 50}/lib.rs") for i in range(1000)]
    env["batch"] = batch
    per_batch = per_call_ns("p.check_batch(batch)", env, number=200)
    rows.append(("check_batch, per action (1,000 actions)", per_batch / len(batch)))

    print(f"turngate {turngate.__version__}: 100-rule policy, median of {REPEAT} runs")
    print(f"{'case':<50} {'ns/call':>9} {'x no-op':>8}")
    for name, ns in rows:
        print(f"{name:<50} {ns:>9.0f} {ns / baseline:>8.2f}")
    worst = max(ns for name, ns in rows[1:5])
    print(f"worst check: {worst:.0f} ns per call (budget 2000 ns): {'within' if worst <= 2000 else 'OVER'} budget")


if __name__ == "__main__":
    main()
