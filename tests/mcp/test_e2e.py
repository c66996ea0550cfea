"""`turngate mcp wrap` end to end with the official MCP SDKs, offline: the reference
filesystem server (npm `@modelcontextprotocol/server-filesystem`) and a server written with
the Python SDK, both driven by the Python SDK's client (`mcp` on PyPI). Run by
`scripts/test-mcp`, which installs both into a cache outside the clone and sets
TURNGATE_BIN and TURNGATE_MCP_TOOLS."""

import json
import os
import sqlite3
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TURNGATE = os.environ["TURNGATE_BIN"]
TOOLS = Path(os.environ["TURNGATE_MCP_TOOLS"])
FS_SERVER = TOOLS / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
HERE = Path(__file__).resolve().parent
VENV_PY = Path(sys.executable)


def policy(state: Path, program: str) -> Path:
    p = state / "policy.json"
    p.write_text(json.dumps({"layers": [{"name": "mcp-e2e", "rules": [
        {"kind": "shell_command", "effect": "allow", "pattern": program}]}]}))
    return p


def wrap_params(ws: Path, state: Path, program: str, command: list[str], reads: list[Path],
                approver: str = "deny", mode: str = "auto_accept_edits") -> StdioServerParameters:
    args = ["mcp", "wrap", "--name", "fs", "--mode", mode, "--approver", approver,
            "--workspace", str(ws), "--store", str(state / "audit.db"),
            "--policy", str(policy(state, program))]
    for r in reads:
        args += ["--read", str(r)]
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG")}
    return StdioServerParameters(command=TURNGATE, args=args + ["--", *command], env=env)


def audit(state: Path) -> list[dict]:
    """Every audit event the wrap recorded (allowed decisions too, which the timeline of
    `turngate audit` does not show), read from the store with SQLite itself."""
    db = sqlite3.connect(f"file:{state / 'audit.db'}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    rows = db.execute("SELECT kind, action_kind, target, tool_name, reason FROM audit_events "
                      "ORDER BY turn_id, seq").fetchall()
    db.close()
    return [dict(r) for r in rows]


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def session_run(params: StdioServerParameters, body):
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)


def fs_params(ws, state, approver="deny", extra_dirs=()):
    return wrap_params(ws, state, "node",
                       ["/usr/bin/node", str(FS_SERVER), str(ws), *map(str, extra_dirs)],
                       [TOOLS / "node_modules"], approver=approver)


def test_filesystem_server_read_allowed_write_asks_and_is_denied():
    with tempfile.TemporaryDirectory() as w, tempfile.TemporaryDirectory() as s:
        ws, state = Path(w), Path(s)
        (ws / "hello.txt").write_text("hello from the workspace")

        async def body(session):
            tools = {t.name: t for t in (await session.list_tools()).tools}
            read_tool = "read_text_file" if "read_text_file" in tools else "read_file"
            assert tools[read_tool].annotations and tools[read_tool].annotations.read_only_hint
            r = await session.call_tool(read_tool, {"path": str(ws / "hello.txt")})
            assert not r.is_error, r
            assert "hello from the workspace" in text_of(r)
            r = await session.call_tool("write_file", {"path": str(ws / "new.txt"), "content": "x"})
            return r

        r = anyio.run(session_run, fs_params(ws, state), body)
        read_tool = next(x["tool_name"] for x in audit(state)
                         if str(x.get("target", "")).startswith("fs/read"))
        assert r.is_error, r
        assert "Permission denied by turngate" in text_of(r), text_of(r)
        assert not (ws / "new.txt").exists(), "a denied write reached the disk"
        rows = audit(state)
        write = [x for x in rows if x.get("target") == "fs/write_file"]
        assert any(x["kind"] == "approval_requested" and x["action_kind"] == "mcp_write_or_unknown"
                   for x in write), rows
        assert any(x["kind"] == "decision_denied" for x in write), rows
        assert any(x["kind"] == "decision_allowed" and x["action_kind"] == "mcp_read"
                   and x["tool_name"] == read_tool for x in rows
                   if str(x.get("target", "")).startswith("fs/read")), rows


def test_filesystem_server_cannot_read_outside_its_sandbox():
    with tempfile.TemporaryDirectory() as w, tempfile.TemporaryDirectory() as s, \
            tempfile.TemporaryDirectory() as o:
        ws, state, outside = Path(w), Path(s), Path(o)
        (outside / "secret.txt").write_text("TOPSECRET")

        async def body(session):
            tools = {t.name for t in (await session.list_tools()).tools}
            read_tool = "read_text_file" if "read_text_file" in tools else "read_file"
            # The server itself was told `outside` is allowed; the gate and sandbox say no.
            return await session.call_tool(read_tool, {"path": str(outside / "secret.txt")})

        r = anyio.run(session_run, fs_params(ws, state, approver="allow", extra_dirs=[outside]), body)
        assert r.is_error, r
        assert "TOPSECRET" not in text_of(r)
        assert "Permission denied by turngate" in text_of(r), text_of(r)


def sdk_params(ws, state, approver="deny"):
    return wrap_params(ws, state, VENV_PY.name,
                       [str(VENV_PY), str(HERE / "changing_server.py")],
                       [TOOLS / "venv", HERE, Path(sys.base_prefix)], approver=approver)


def test_sdk_server_cannot_read_outside_its_sandbox_when_a_tool_argument_asks():
    with tempfile.TemporaryDirectory() as w, tempfile.TemporaryDirectory() as s, \
            tempfile.TemporaryDirectory() as o:
        ws, state, outside = Path(w), Path(s), Path(o)
        (outside / "secret.txt").write_text("TOPSECRET")
        (ws / "inside.txt").write_text("fine")

        async def body(session):
            await session.list_tools()
            out = await session.call_tool("peek", {"where": str(outside / "secret.txt")})
            inside = await session.call_tool("peek", {"where": str(ws / "inside.txt")})
            return out, inside

        out, inside = anyio.run(session_run, sdk_params(ws, state, approver="allow"), body)
        assert "TOPSECRET" not in text_of(out), text_of(out)
        assert text_of(out).startswith("peek failed"), text_of(out)
        assert text_of(inside) == "CONTENT fine", text_of(inside)


def test_sdk_server_changing_a_description_asks_with_tool_definition_changed():
    with tempfile.TemporaryDirectory() as w, tempfile.TemporaryDirectory() as s:
        ws, state = Path(w), Path(s)

        async def body(session):
            await session.list_tools()
            before = await session.call_tool("lookup", {"word": "alpha"})
            await session.list_tools()
            after = await session.call_tool("lookup", {"word": "beta"})
            return before, after

        before, after = anyio.run(session_run, sdk_params(ws, state), body)
        assert not before.is_error and text_of(before) == "lookup: alpha", before
        assert after.is_error, after
        rows = [x for x in audit(state) if x.get("target") == "fs/lookup"]
        asked = [x for x in rows if x["kind"] == "approval_requested"]
        assert len(asked) == 1 and asked[0]["reason"] == "tool_definition_changed", rows
        assert asked[0]["action_kind"] == "mcp_write_or_unknown", rows


def test_sdk_client_calling_a_tool_not_in_the_last_listing_is_write_or_unknown():
    with tempfile.TemporaryDirectory() as w, tempfile.TemporaryDirectory() as s:
        ws, state = Path(w), Path(s)

        async def body(session):
            await session.list_tools()
            return await session.call_tool("ghost", {})

        r = anyio.run(session_run, sdk_params(ws, state), body)
        assert r.is_error, r
        rows = [x for x in audit(state) if x.get("target") == "fs/ghost"]
        assert rows and rows[0]["action_kind"] == "mcp_write_or_unknown", rows
