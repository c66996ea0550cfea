#!/usr/bin/env python3
"""What `turngate mcp wrap` adds to a `tools/call` round trip (DESIGN §16, budget ≤ 1 ms).

    bench/mcp.py TURNGATE [--rounds R] [--calls N]

The same stdio MCP server (cli/tests/fixtures/mcp_server.py, its log off) is driven by the
same raw JSON-RPC client, unwrapped and wrapped (`turngate mcp wrap --mode auto_accept_edits`:
the server sandboxed, each call of its read-only `echo` tool decided by the gate and audited
in a SQLite store on disk), in interleaved rounds. Prints one JSON object: the per-round
medians of a round trip in µs, the median added time, and the per-round ratios."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SERVER = ROOT / "cli" / "tests" / "fixtures" / "mcp_server.py"
PYTHON = "/usr/bin/python3"


class Client:
    def __init__(self, argv: list[str], env: dict[str, str]):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env, bufsize=0)
        self.next_id = 0

    def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise SystemExit(f"the server closed its stdout ({method})")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                return reply

    def start(self) -> None:
        r = self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                        "clientInfo": {"name": "bench", "version": "1"}})
        assert "result" in r, r
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        assert "result" in self.request("tools/list", {})

    def calls(self, n: int) -> list[float]:
        out = []
        for i in range(n):
            t = time.perf_counter_ns()
            r = self.request("tools/call", {"name": "echo", "arguments": {"text": f"hi {i}"}})
            out.append((time.perf_counter_ns() - t) / 1000)
            if r.get("result", {}).get("isError") or "error" in r:
                raise SystemExit(f"the call failed: {r}")
        return out

    def close(self) -> None:
        self.p.stdin.close()
        self.p.wait(timeout=10)


def main() -> None:
    args = sys.argv[1:]
    turngate = args[0]
    rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 7
    calls = int(args[args.index("--calls") + 1]) if "--calls" in args else 300
    ws = Path(tempfile.mkdtemp(prefix="tg-mcp-bench-ws-"))
    state = Path(tempfile.mkdtemp(prefix="tg-mcp-bench-state-", dir="/var/tmp"))
    try:
        shutil.copy(SERVER, ws / "server.py")
        policy = state / "policy.json"
        policy.write_text(json.dumps({"layers": [{"name": "bench", "rules": [
            {"kind": "shell_command", "effect": "allow", "pattern": "python3"}]}]}))
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "QUIET": "1",
               "HOME": os.environ.get("HOME", "/root")}
        plain = [PYTHON, str(ws / "server.py")]
        wrapped = [turngate, "mcp", "wrap", "--name", "fx", "--mode", "auto_accept_edits",
                   "--approver", "deny", "--workspace", str(ws), "--store",
                   str(state / "audit.db"), "--policy", str(policy), "--", *plain]
        med_plain, med_wrapped, ratios = [], [], []
        for _ in range(rounds):
            got = {}
            for name, argv in (("plain", plain), ("wrapped", wrapped)):
                c = Client(argv, env)
                c.start()
                c.calls(20)  # warm up
                got[name] = statistics.median(c.calls(calls))
                c.close()
            med_plain.append(got["plain"])
            med_wrapped.append(got["wrapped"])
            ratios.append(got["wrapped"] / got["plain"])
        added = [w - p for w, p in zip(med_wrapped, med_plain)]
        print(json.dumps({
            "rounds": rounds, "calls_per_round": calls,
            "unwrapped_us": med_plain, "wrapped_us": med_wrapped,
            "added_us": added, "added_median_ms": statistics.median(added) / 1000,
            "ratios": ratios,
        }))
    finally:
        shutil.rmtree(ws, ignore_errors=True)
        shutil.rmtree(state, ignore_errors=True)


if __name__ == "__main__":
    main()
