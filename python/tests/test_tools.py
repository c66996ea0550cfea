"""The guarded tools (``Gate.read_file``, ``write_file``, ``edit_file``, ``run_shell``,
``fetch_url``), the one-line ``turngate.turn`` and async ``run_approved``. The shared behaviour
is in ``tests/conformance/tools.json`` (run by test_conformance.py); these add what only a
live Python caller shows: awaitables, streamed output, a real HTTP exchange to a vetted
address, the turn's lifetime, and attacks on the continuation."""

from __future__ import annotations

import asyncio
import http.server
import os
import socket
import stat
import threading
import time
from pathlib import Path
from typing import Any, Iterator, cast

import pytest

import turngate
from turngate import Gate, Store


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("hello world\n")
    return ws


@pytest.fixture
def store(tmp_path: Path) -> Store:
    (tmp_path / "state").mkdir()
    return Store(str(tmp_path / "state" / "audit.db"))


def _snapshot(workspace: Path, mode: str = "auto_accept_edits", **ctx: Any) -> dict[str, Any]:
    context = {
        "workspace_root": str(workspace),
        "execution_backend": "native",
        "platform": turngate.probe_platform(),
        **ctx,
    }
    return turngate.resolve({"mode": mode}, context)


# ---- the one-line turn ------------------------------------------------------------------------


def test_turn_builds_a_gate_whose_tools_work_and_close_ends_them(workspace: Path, store: Store) -> None:
    with turngate.turn(workspace, store=store) as gate:
        assert isinstance(gate, Gate)
        assert gate.snapshot["permission_profile"]["mode"] == "auto_accept_edits"
        r = gate.write_file_blocking("new.txt", "made by a tool")
        assert r["outcome"] == "ok", r
        assert r["target"] == str(workspace.resolve() / "new.txt")
        assert (workspace / "new.txt").read_text() == "made by a tool"
        read = gate.read_file_blocking("new.txt")
        assert (read["outcome"], read["content"]) == ("ok", "made by a tool")
    with pytest.raises(turngate.TurnGateError, match="closed"):
        gate.read_file_blocking("new.txt")


def test_a_wrong_call_of_a_tool_names_the_method_and_runs_nothing(workspace: Path, store: Store) -> None:
    # The tool methods are built from one declaration each (_tools.py); a wrong call must still
    # be a TypeError naming the method the caller called, and nothing may be written.
    bad: Any
    with turngate.turn(workspace, store=store) as gate:
        bad = gate
        with pytest.raises(TypeError, match=r"^ToolsMixin\.write_file_blocking\(\) got an unexpected keyword argument 'bogus'$"):
            bad.write_file_blocking("x.txt", "data", bogus=1)
        with pytest.raises(TypeError, match=r"^ToolsMixin\.read_file_blocking\(\) takes 1 positional argument but 2 were given$"):
            bad.read_file_blocking("a.txt", "extra")
        with pytest.raises(TypeError, match=r"^ToolsMixin\.run_shell\(\) missing 1 required positional argument: 'command'$"):
            asyncio.run(bad.run_shell())
        with pytest.raises(TypeError, match=r"^ToolsMixin\.fetch_url\(\) got an unexpected keyword argument 'verb'$"):
            asyncio.run(bad.fetch_url("http://127.0.0.1:1/", verb="GET"))
        assert not (workspace / "x.txt").exists()


def test_turn_is_an_async_context_manager_and_its_tools_are_awaitable(
    workspace: Path, store: Store
) -> None:
    async def main() -> Gate:
        async with turngate.turn(workspace, store=store, turn_id="t-async") as gate:
            assert gate.turn_id == "t-async"
            w = await gate.edit_file("a.txt", "world", "there")
            assert w["outcome"] == "ok", w
            r = await gate.read_file("a.txt")
            assert r["content"] == "hello there\n"
            return gate

    gate = asyncio.run(main())
    with pytest.raises(turngate.TurnGateError):
        asyncio.run(gate.read_file("a.txt"))


def test_turn_without_a_store_uses_the_clis_default_location(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    gate = turngate.turn(workspace, turn_id="t-default")
    gate.read_file_blocking("a.txt")
    db = tmp_path / "xdg" / "turngate" / "audit.db"
    assert db.exists()
    assert "t-default" in Store(str(db)).turns()


def test_turn_takes_a_policy_and_a_store_path(workspace: Path, tmp_path: Path) -> None:
    policy = turngate.Policy.from_dict(
        {"layers": [{"name": "project", "rules": [{"kind": "file_read", "effect": "deny", "pattern": "a.txt"}]}]}
    )
    gate = turngate.turn(workspace, store=tmp_path / "s.db", policy=policy)
    r = gate.read_file_blocking("a.txt")
    assert r["outcome"] == "denied", r
    assert r["tool_result"].startswith("Permission denied by turngate: ")


# ---- files ------------------------------------------------------------------------------------


def test_a_write_is_atomic_keeps_the_mode_and_leaves_no_temporary(workspace: Path, store: Store) -> None:
    target = workspace / "a.txt"
    target.chmod(0o640)
    gate = Gate("t", _snapshot(workspace), store, "deny_all")
    r = gate.write_file_blocking("a.txt", b"\x00binary\xff")
    assert r["outcome"] == "ok", r
    assert target.read_bytes() == b"\x00binary\xff"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert sorted(p.name for p in workspace.iterdir()) == ["a.txt"], "no temporary left behind"


def test_a_write_through_a_symlink_out_of_the_workspace_is_denied(
    workspace: Path, tmp_path: Path, store: Store
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    os.symlink(outside, workspace / "link.txt")
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    r = gate.write_file_blocking("link.txt", "evil")
    assert r["outcome"] == "denied", r
    assert outside.read_text() == "keep"


def test_an_approval_for_a_modified_target_writes_the_modified_one(workspace: Path, store: Store) -> None:
    gate = Gate("t", _snapshot(workspace, "supervised"), store, "defer_all")
    first = gate.write_file_blocking("a.txt", "v1")
    assert first["outcome"] == "deferred", first
    other = str(workspace.resolve() / "b.txt")
    decision = turngate.Decision.approve(modified=("file_write", other))
    r = gate.write_file_blocking(
        "a.txt", "v2", approval={"request_id": first["request_id"] or "", "decision": decision}
    )
    assert r["outcome"] == "ok" and r["target"] == other, r
    assert (workspace / "b.txt").read_text() == "v2"
    assert (workspace / "a.txt").read_text() == "hello world\n"


def test_a_modified_action_of_another_kind_never_runs(workspace: Path, store: Store) -> None:
    gate = Gate("t", _snapshot(workspace, "supervised"), store, "defer_all")
    first = gate.write_file_blocking("a.txt", "v1")
    decision = turngate.Decision.approve(modified=("shell_command", "touch pwned"))
    r = gate.write_file_blocking(
        "a.txt", "v2", approval={"request_id": first["request_id"] or "", "decision": decision}
    )
    assert r["outcome"] == "denied", r
    assert not (workspace / "pwned").exists()
    assert (workspace / "a.txt").read_text() == "hello world\n"


def test_an_approval_must_name_a_request_and_an_answer(workspace: Path, store: Store) -> None:
    gate = Gate("t", _snapshot(workspace, "supervised"), store, "defer_all")
    with pytest.raises(turngate.InvalidInput):
        gate.write_file_blocking("a.txt", "x", approval=cast(Any, {"request_id": "r"}))
    with pytest.raises(turngate.InvalidInput):
        gate.write_file_blocking("a.txt", "x", approval=cast(Any, {"request_id": "r", "decision": "defer"}))


# ---- run_shell --------------------------------------------------------------------------------


def test_run_shell_streams_output_to_the_callback_on_the_loop(workspace: Path, store: Store) -> None:
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    chunks: list[tuple[str, bytes]] = []

    async def main() -> Any:
        loop_thread = threading.get_ident()

        def on_output(stream: str, chunk: bytes) -> None:
            assert threading.get_ident() == loop_thread, "called on the event loop's thread"
            chunks.append((stream, chunk))

        return await gate.run_shell("printf 'out'; printf 'err' >&2", on_output=on_output)

    r = asyncio.run(main())
    assert r["outcome"] == "ok" and r["exit_code"] == 0, r
    assert (r["stdout"], r["stderr"]) == ("out", "err")
    assert b"".join(c for s, c in chunks if s == "stdout") == b"out"
    assert b"".join(c for s, c in chunks if s == "stderr") == b"err"


def test_run_shell_blocking_streams_and_times_out(workspace: Path, store: Store) -> None:
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    seen: list[bytes] = []
    r = gate.run_shell_blocking("echo started; sleep 30", timeout_ms=300, on_output=lambda s, c: seen.append(c))
    assert r["outcome"] == "ok", r
    assert r["exit_code"] is None and "timed out" in r["tool_result"], r
    assert b"started" in b"".join(seen)


def test_run_shell_in_a_subdirectory_and_a_denied_command(workspace: Path, store: Store) -> None:
    (workspace / "sub").mkdir()
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    r = gate.run_shell_blocking("pwd", cwd="sub")
    assert r["outcome"] == "ok" and r["stdout"] == f"{workspace.resolve()}/sub\n", r
    refusing = Gate("t2", _snapshot(workspace), store, "deny_all")
    d = refusing.run_shell_blocking("touch made")
    assert d["outcome"] == "denied" and d["tool_result"].startswith("Permission denied by turngate")
    assert not (workspace / "made").exists()


def test_the_kernel_refuses_an_escape_from_run_shell(workspace: Path, tmp_path: Path, store: Store) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    r = gate.run_shell_blocking(f"touch {outside}/escaped")
    assert r["outcome"] == "ok" and r["exit_code"] != 0, r
    assert not (outside / "escaped").exists(), "the sandbox refused the write"


def test_async_run_approved_runs_a_request_resolved_in_the_store(workspace: Path, store: Store) -> None:
    gate = Gate("t", _snapshot(workspace), store, "defer_all")
    d = gate.run_shell_blocking("touch approved.txt")
    assert d["outcome"] == "deferred", d
    rid = d["request_id"] or ""
    store.resolve(rid, "allow_once")

    async def main() -> Any:
        return await gate.run_approved(rid)

    r = asyncio.run(main())
    assert r["outcome"] == "ran" and r["exit_code"] == 0, r
    assert (workspace / "approved.txt").exists()
    with pytest.raises(turngate.ApprovalError, match="already_used"):
        asyncio.run(main())


# ---- fetch_url --------------------------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", "http://169.254.169.254/")
            self.end_headers()
            return
        body = f"hello {self.headers['Host']} {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:  # noqa: N802
        n = int(self.headers["Content-Length"])
        body = b"got " + self.rfile.read(n)
        self.send_response(201)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    yield httpd.server_address[1]
    httpd.shutdown()


def test_fetch_url_connects_to_the_vetted_address(workspace: Path, store: Store, server: int) -> None:
    snap = _snapshot(workspace, allowed_domains=["127.0.0.1"])
    gate = Gate("t", snap, store, "approve_all")
    url = f"http://127.0.0.1:{server}/x?y=1"
    r = asyncio.run(gate.fetch_url(url))
    assert r["outcome"] == "ok" and r["status"] == 200, r
    assert r["content"] == f"hello 127.0.0.1:{server} /x?y=1"
    assert r["target"] == url and r["kind"] == "network"
    p = gate.fetch_url_blocking(f"http://127.0.0.1:{server}/p", method="POST", body="data")
    assert (p["status"], p["content"]) == (201, "got data"), p


def test_fetch_url_reports_a_redirect_and_does_not_follow_it(workspace: Path, store: Store, server: int) -> None:
    gate = Gate("t", _snapshot(workspace, allowed_domains=["127.0.0.1"]), store, "approve_all")
    r = gate.fetch_url_blocking(f"http://127.0.0.1:{server}/redirect")
    assert r["outcome"] == "ok" and r["status"] == 302, r
    assert "not followed" in r["tool_result"] and "169.254.169.254" in r["tool_result"]


def test_fetch_url_to_loopback_without_a_grant_is_denied(workspace: Path, store: Store, server: int) -> None:
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    r = gate.fetch_url_blocking(f"http://127.0.0.1:{server}/")
    assert r["outcome"] == "denied", r
    assert r["content"] is None


def test_fetch_url_to_a_closed_port_fails_rather_than_raising(workspace: Path, store: Store) -> None:
    gate = Gate("t", _snapshot(workspace, allowed_domains=["127.0.0.1"]), store, "approve_all")
    r = gate.fetch_url_blocking("http://127.0.0.1:9/", timeout_ms=2000)
    assert r["outcome"] == "failed", r
    assert "allowed but failed" in r["tool_result"]


class _Echo:
    """A raw HTTP server that answers each connection with the bytes of the request it read:
    what the binding really sent, a smuggled second request line included."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.seen: list[bytes] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                raw = b""
                while b"\r\n\r\n" not in raw:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    raw += chunk
                self.seen.append(raw)
                conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % len(raw) + raw)


@pytest.fixture
def echo() -> Iterator[_Echo]:
    e = _Echo()
    yield e
    e.sock.close()


def _sent(r: turngate.ToolOutcome) -> str:
    """What the echo server received: an allowed fetch's content."""
    content = r["content"]
    assert r["outcome"] == "ok" and content is not None, r
    return content


def test_fetch_url_sends_the_checked_method_not_a_subclass_s_str(workspace: Path, store: Store, echo: _Echo) -> None:
    # The core reads the string's characters; http.client formats the request line with
    # `%s`, which calls `__str__`: the binding must send the core's copy.
    class Sly(str):
        def __str__(self) -> str:
            return "GET /admin HTTP/1.1\r\nHost: internal.example\r\n\r\nPOST"

    gate = Gate("t", _snapshot(workspace, allowed_domains=["127.0.0.1"]), store, "approve_all")
    r = gate.fetch_url_blocking(f"http://127.0.0.1:{echo.port}/x", method=Sly("POST"), body="b")
    sent = _sent(r)
    head = sent.split("\r\n")
    assert head[0] == "POST /x HTTP/1.1", head
    assert f"Host: 127.0.0.1:{echo.port}" in head and "internal.example" not in sent, head


def test_fetch_url_refuses_a_host_header_and_a_line_break_before_connecting(
    workspace: Path, store: Store, echo: _Echo
) -> None:
    gate = Gate("t", _snapshot(workspace, allowed_domains=["127.0.0.1"]), store, "approve_all")
    url = f"http://127.0.0.1:{echo.port}/x"
    for headers, says in [
        ({"Host": "internal.example"}, "set by fetch_url itself"),
        ({"content-length": "0"}, "set by fetch_url itself"),
        ({"X-A": "1\r\nHost: internal.example"}, "line break"),
        ({"X A": "1"}, "not an HTTP token"),
    ]:
        with pytest.raises(turngate.InvalidInput, match=says):
            gate.fetch_url_blocking(url, headers=headers)
    with pytest.raises(TypeError, match="headers must be a mapping"):
        gate.fetch_url_blocking(url, headers=[("X-A", "1")])  # type: ignore[arg-type]
    for bad in ("500", True, 1.5):
        with pytest.raises(TypeError, match="timeout_ms must be an int"):
            gate.fetch_url_blocking(url, timeout_ms=bad)  # type: ignore[arg-type]
    for nonpositive in (0, -1):
        with pytest.raises(turngate.InvalidInput, match="timeout_ms must be positive"):
            gate.fetch_url_blocking(url, timeout_ms=nonpositive)
    assert echo.seen == []
    ok = gate.fetch_url_blocking(url, headers={"X-Note": "a b"})
    assert "\r\nX-Note: a b\r\n" in _sent(ok), ok


def test_fetch_url_reads_the_headers_once(workspace: Path, store: Store, echo: _Echo) -> None:
    # A mapping that answers differently the second time it is read: what was checked is
    # what is sent.
    class Flip(dict[str, str]):
        reads = 0

        def items(self) -> Any:
            Flip.reads += 1
            return {"X-A": "checked"}.items() if Flip.reads == 1 else {"Host": "internal.example"}.items()

    gate = Gate("t", _snapshot(workspace, allowed_domains=["127.0.0.1"]), store, "approve_all")
    r = gate.fetch_url_blocking(f"http://127.0.0.1:{echo.port}/x", headers=Flip())
    sent = _sent(r)
    assert "X-A: checked" in sent and "internal.example" not in sent, r
    assert Flip.reads == 1


class _Stream(http.server.BaseHTTPRequestHandler):
    """``/drip``: a byte every 50 ms, without end; ``/big``: 64 MiB as fast as it may."""

    sent = 0

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.end_headers()
        try:
            if self.path == "/drip":
                while True:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.05)
            chunk = b"y" * 65536
            for _ in range(1024):
                self.wfile.write(chunk)
                _Stream.sent += len(chunk)
        except OSError:
            pass

    def log_message(self, *args: Any) -> None:
        pass


def test_fetch_url_stops_reading_at_the_cap_and_timeout_ms_bounds_the_whole_exchange(
    workspace: Path, store: Store
) -> None:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Stream)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        port = httpd.server_address[1]
        gate = Gate("t", _snapshot(workspace, allowed_domains=["127.0.0.1"]), store, "approve_all")
        big = gate.fetch_url_blocking(f"http://127.0.0.1:{port}/big")
        assert len(_sent(big)) == 1 << 20 and "truncated" in big["tool_result"]
        # The idle timeout alone never fired here: a byte came every 50 ms.
        drip = gate.fetch_url_blocking(f"http://127.0.0.1:{port}/drip", timeout_ms=500)
        assert drip["outcome"] == "failed", drip
        assert "timed out after 500 ms" in drip["tool_result"], drip
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert _Stream.sent < 64 << 20, f"the server sent {_Stream.sent} bytes"


# ---- the README's example ---------------------------------------------------------------------


def test_the_readme_tools_example_runs_as_shown(tmp_path: Path) -> None:
    import re
    import subprocess
    import sys

    from conftest import REPO

    readme = (REPO / "python" / "README.md").read_text()
    m = re.search(r"<!-- tools-example.*?```python\n(.*?)```\s*```text\n(.*?)```", readme, re.S)
    assert m, "no tools example in python/README.md"
    script = tmp_path / "example.py"
    script.write_text(m.group(1))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout == m.group(2)
