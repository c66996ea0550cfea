#!/usr/bin/env python3
"""Per-call cost of `Policy.check` and `Policy.explain` from Python, against a Python no-op
function call with the same arguments in the same run, and of the batch API per action
(docs/performance.md: <= 2 µs per call). Run inside the virtualenv that scripts/test-python builds:

    /var/cache/turngate/venv/bin/python bench/python_check.py

To compare builds of the extension (each a directory holding an installed `turngate/` package,
e.g. copied out of site-packages), `--ab DIR...` runs the check/explain cases in alternating
processes, one per build and round, and prints the median CPU time per call of each:

    python bench/python_check.py --ab /tmp/before /tmp/after
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Callable
import timeit

import turngate

N = 200_000
REPEAT = 7


def policy_100_rules() -> turngate.Policy:
    p = turngate.Policy.tiered().layer("bench")
    for i in range(50):
        p = p.rule("file_read", "deny", f"secret{i}/**/*.key")
        p = p.rule("file_write", "allow", f"src/mod{i}/*.rs")
    return p


def noop(kind: str, target: str, tool: str | None = None) -> str:
    return "allow"


def median_call_ns(call: "Callable[[], object]", number: int) -> float:
    """The median of `number` single calls, each timed on its own (DESIGN §19 budgets a
    median per call, not a mean over a batch)."""
    times = []
    for _ in range(number):
        start = time.perf_counter_ns()
        call()
        times.append(time.perf_counter_ns() - start)
    return float(statistics.median(times))


def per_call_ns(stmt: str, env: dict[str, object], number: int = N) -> float:
    times = timeit.repeat(stmt, globals=env, number=number, repeat=REPEAT)
    return statistics.median(times) / number * 1e9


def main() -> None:
    p = policy_100_rules()
    check = p.check
    explain = p.explain
    env: dict[str, object] = {"check": check, "explain": explain, "noop": noop, "p": p}
    baseline = per_call_ns("noop('file_write', 'src/mod7/lib.rs')", env)
    rows = [
        ("python no-op function call (baseline)", baseline),
        ("check file_write src/mod7/lib.rs (allow rule)", per_call_ns("check('file_write', 'src/mod7/lib.rs')", env)),
        ("check file_read config/.env (deny rule)", per_call_ns("check('file_read', 'config/.env')", env)),
        ("check network api.example.com:443 (default)", per_call_ns("check('network', 'api.example.com:443')", env)),
        ("check shell_command 'cargo test' (plain line)", per_call_ns("check('shell_command', 'cargo test')", env)),
        ("check shell_command 'cargo test | tee log'", per_call_ns("check('shell_command', 'cargo test | tee log')", env)),
        ("explain file_read config/.env (deny rule)", per_call_ns("explain('file_read', 'config/.env')", env)),
        ("explain file_write src/mod7/lib.rs (allow rule)", per_call_ns("explain('file_write', 'src/mod7/lib.rs')", env)),
        ("explain network api.example.com:443 (default)", per_call_ns("explain('network', 'api.example.com:443')", env)),
    ]
    batch = [("file_write", f"src/mod{i % 50}/lib.rs") for i in range(1000)]
    env["batch"] = batch
    per_batch = per_call_ns("p.check_batch(batch)", env, number=200)
    rows.append(("check_batch, per action (1,000 actions)", per_batch / len(batch)))

    print(f"turngate {turngate.__version__}: 100-rule policy, median of {REPEAT} runs")
    print(f"{'case':<50} {'ns/call':>9} {'x no-op':>8}")
    for name, ns in rows:
        print(f"{name:<50} {ns:>9.0f} {ns / baseline:>8.2f}")
    # The compound shell line is a tree-sitter parse in the core (~10 µs natively), not FFI
    # cost; the budget applies to the plain-line cases.
    worst = max(ns for name, ns in rows[1:5])
    print(f"worst check: {worst:.0f} ns per call (budget 2000 ns): {'within' if worst <= 2000 else 'OVER'} budget")
    worst = max(ns for name, ns in rows[6:9])
    print(f"worst explain: {worst:.0f} ns per call (budget 2000 ns): {'within' if worst <= 2000 else 'OVER'} budget")
    gate_rows(baseline)


def gate_rows(baseline: float) -> None:
    """The gate from Python: checker evaluation, and a full blocking authorize (which appends a
    durable SQLite audit row per call, so it is dominated by the store, not by FFI)."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        ws.mkdir()
        (ws / "a.txt").write_text("x")
        ctx = {"workspace_root": str(ws), "execution_backend": "native",
               "platform": turngate.probe_platform()}
        snap = turngate.resolve({"mode": "supervised"}, ctx)
        gate = turngate.Gate("bench", snap, turngate.Store(Path(tmp) / "a.db"))
        env: dict[str, object] = {"gate": gate, "target": str(ws / "a.txt")}
        rows = [
            ("gate.evaluate file_read (file checker)", per_call_ns("gate.evaluate('file_read', target)", env, 50_000)),
            ("gate.evaluate network https://example.com", per_call_ns("gate.evaluate('network', 'https://example.com')", env, 50_000)),
            ("gate.authorize_blocking file_read (+ audit row), median call", median_call_ns(lambda: gate.authorize_blocking("file_read", str(ws / "a.txt")), 2000)),
        ]
        for name, ns in rows:
            print(f"{name:<50} {ns:>9.0f} {ns / baseline:>8.2f}")


def cpu_cases() -> None:
    """`--cpu`: the CPU time per call of each case (the least of 3 loops of 100,000), as JSON."""
    p = policy_100_rules()
    check, explain = p.check, p.explain
    cases: dict[str, Callable[[], object]] = {
        "python no-op function call": lambda: noop("file_read", "config/.env"),
        "check file_read config/.env (deny rule)": lambda: check("file_read", "config/.env"),
        "explain file_read config/.env (deny rule)": lambda: explain("file_read", "config/.env"),
        "explain file_write src/mod7/lib.rs (allow rule)": lambda: explain("file_write", "src/mod7/lib.rs"),
        "explain network api.example.com:443 (default)": lambda: explain("network", "api.example.com:443"),
    }
    out = {}
    for name, call in cases.items():
        loops = []
        for _ in range(3):
            start = time.process_time_ns()
            for _ in range(100_000):
                call()
            loops.append((time.process_time_ns() - start) / 100_000)
        out[name] = min(loops)
    print(json.dumps(out))


def ab(dirs: list[str], rounds: int = 8) -> None:
    results: dict[str, dict[str, list[float]]] = {d: {} for d in dirs}
    for _ in range(rounds):
        for d in dirs:
            env = {**os.environ, "PYTHONPATH": d}
            r = subprocess.run([sys.executable, __file__, "--cpu"], env=env, capture_output=True,
                               text=True, check=True)
            for name, ns in json.loads(r.stdout).items():
                results[d].setdefault(name, []).append(ns)
    print(f"CPU ns per call, median (min-max) of {rounds} alternating processes per build")
    print(f"{'case':<50}" + "".join(f"{os.path.basename(d.rstrip('/')):>22}" for d in dirs))
    for name in results[dirs[0]]:
        cells = [results[d][name] for d in dirs]
        print(f"{name:<50}" + "".join(
            f"{statistics.median(c):>9.0f} ({min(c):>4.0f}-{max(c):>4.0f})" for c in cells))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--cpu"]:
        cpu_cases()
    elif sys.argv[1:2] == ["--ab"]:
        ab(sys.argv[2:])
    else:
        main()
