"""`turngate.client` (pure Python) against a real `turngate serve`: a stdio client asks, a
socket client answers, an HTTP client reads; errors carry the JSON-RPC code."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import pytest

from turngate.client import RpcError, connect

ROOT = Path(__file__).resolve().parents[2]


def turngate_bin() -> str:
    candidates = [
        os.environ.get("TURNGATE_BIN"),
        os.environ.get("CARGO_TARGET_DIR") and os.path.join(os.environ["CARGO_TARGET_DIR"], "debug/turngate"),
        str(ROOT / "target/debug/turngate"),
    ]
    for c in candidates:
        if c and os.path.exists(c):
            return c
    pytest.fail(f"no turngate binary (tried {candidates}): cargo build -p turngate-cli")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(check: object, what: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if callable(check) and check():
            return
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}")


def test_stdio_asks_socket_answers_http_reads(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    sock = tmp_path / "serve.sock"
    port = free_port()
    cmd = [turngate_bin(), "serve", "--state-dir", str(tmp_path / "state"), "--store", str(tmp_path / "audit.db"),
           "--socket", str(sock), "--http", f"127.0.0.1:{port}"]
    with connect(command=cmd) as a:
        wait_for(sock.exists, "the socket")
        with connect(socket=str(sock)) as b:
            turn = a.call("turn/start", {"turn_id": "py1", "profile": {"mode": "supervised"}, "workspace": str(ws)})
            assert turn["turn_id"] == "py1"
            assert turn["snapshot"]["permission_profile"]["mode"] == "supervised"
            deferred = a.call("turn/action/authorize",
                              {"turn_id": "py1", "kind": "shell_command", "target": "make test", "wait": False})
            assert deferred["outcome"] == "deferred"
            rid = deferred["request_id"]
            opened = b.notification("turn/permission/request/opened", lambda p: p["request"]["id"] == rid)
            assert opened["request"]["details"]["target"] == "make test"
            r = b.call("turn/permission/request/respond", {"request_id": rid, "resolution": "deny", "reason": "no"})
            assert r == {"resolution": "deny", "applied": True}
            resolved = a.notification("turn/permission/request/resolved", lambda p: p["request_id"] == rid)
            assert resolved["resolution"] == "deny"
            with pytest.raises(RpcError) as e:
                b.call("turn/permission/request/respond", {"request_id": "apr_nope", "resolution": "deny"})
            assert e.value.code == -32002
            with pytest.raises(RpcError) as e:
                a.call("turn/events", {"turn_id": "py1", "bogus": 1})
            assert e.value.code == -32602
        wait_for((tmp_path / "state/token").exists, "the bearer token")
        token = (tmp_path / "state/token").read_text().strip()
        h = connect(http=f"http://127.0.0.1:{port}", token=token)
        kinds = [ev["kind"] for ev in h.call("turn/events", {"turn_id": "py1"})["events"]]
        assert kinds == ["profile_selected", "approval_requested"]
        bad = connect(http=f"http://127.0.0.1:{port}", token="wrong")
        with pytest.raises(RpcError, match="HTTP 401"):
            bad.call("turn/events", {"turn_id": "py1"})
