"""The gate from Python: approvals (function, async def, broker), deferral across two
processes, a sandboxed spawn the kernel confines, guarded tool functions, the store, the
broker's notifications, and the exception classes."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path
from typing import Any

import pytest

import turngate
from turngate import Decision, Gate, Store

JSON = dict[str, Any]


def _snapshot(workspace: Path, mode: str = "supervised") -> JSON:
    ctx = {
        "workspace_root": str(workspace),
        "execution_backend": "native",
        "platform": turngate.probe_platform(),
    }
    return turngate.resolve({"mode": mode}, ctx)


def _with_rule(snap: JSON, kind: str, effect: str, pattern: str) -> JSON:
    profile = snap["permission_profile"]
    policy = turngate.Policy.from_dict(profile["effective_policy"]).rule(kind, effect, pattern)
    profile["effective_policy"] = policy.to_dict()
    return snap


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    w = tmp_path / "ws"
    w.mkdir()
    return w


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "audit.db")


# ---- approvals ------------------------------------------------------------------------------


def test_ask_goes_to_a_python_function_and_is_allowed(workspace: Path, store: Store) -> None:
    seen: list[JSON] = []

    def approver(ask: JSON) -> Decision:
        seen.append(ask)
        return Decision.approve()

    gate = Gate("t1", _snapshot(workspace), store, approver)
    target = str(workspace / "notes.txt")
    auth = gate.authorize_blocking("file_write", target, tool="write_file")
    assert auth["outcome"] == "allowed"
    assert auth["verdict"]["effect"] == "ask"
    assert not auth["cached_approval"]
    (ask,) = seen
    assert ask["request"]["turn_id"] == "t1"
    assert ask["request"]["tool_name"] == "write_file"
    assert ask["action"] == {"kind": "file_write", "target": target, "tool": "write_file"}
    assert ask["verdict"]["effect"] == "ask"
    kinds = [e["kind"] for e in store.replay("t1")]
    assert "approval_requested" in kinds and "approval_resolved" in kinds


def test_a_read_the_policy_allows_never_reaches_the_approver(
    workspace: Path, store: Store
) -> None:
    def approver(ask: JSON) -> bool:
        raise AssertionError("asked for an allowed read")

    gate = Gate("t1", _snapshot(workspace), store, approver)
    (workspace / "a.txt").write_text("x")
    assert gate.authorize_blocking("file_read", str(workspace / "a.txt"))["outcome"] == "allowed"


def test_an_async_approver_runs_on_the_callers_loop(workspace: Path, store: Store) -> None:
    async def approver(ask: JSON) -> Decision:
        await asyncio.sleep(0.01)
        return Decision.deny("not today")

    gate = Gate("t1", _snapshot(workspace), store, approver)

    async def main() -> turngate.Authorization:
        return await gate.authorize("file_write", str(workspace / "x"), tool="w")

    auth = asyncio.run(main())
    assert auth["outcome"] == "denied"
    assert auth["reason"] == "not today"
    assert "not today" in auth["tool_result"]


def test_an_exception_in_the_approver_is_a_denial_with_its_text(
    workspace: Path, store: Store
) -> None:
    def approver(ask: JSON) -> Decision:
        raise ValueError("the reviewer is out")

    gate = Gate("t1", _snapshot(workspace), store, approver)
    auth = gate.authorize_blocking("file_write", str(workspace / "x"))
    assert auth["outcome"] == "denied"
    assert "ValueError: the reviewer is out" in auth["reason"]


def test_a_malformed_answer_is_a_denial_naming_it(workspace: Path, store: Store) -> None:
    gate = Gate("t1", _snapshot(workspace), store, lambda ask: 42)  # type: ignore[arg-type]
    auth = gate.authorize_blocking("file_write", str(workspace / "x"))
    assert auth["outcome"] == "denied"
    assert "returned 42" in auth["reason"]


def test_a_denied_write_never_reaches_the_approver(workspace: Path, store: Store) -> None:
    # An absolute deny pattern for a path inside the workspace denies before any approver is
    # asked (the checker judges both spellings of the path).
    snap = _with_rule(_snapshot(workspace), "file_write", "deny", f"{workspace}/locked/**")
    asked: list[JSON] = []

    def approver(ask: JSON) -> Decision:
        asked.append(ask)
        return Decision.approve()

    gate = Gate("t1", snap, store, approver)
    auth = gate.authorize_blocking("file_write", str(workspace / "locked" / "a"))
    assert auth["outcome"] == "denied"
    assert auth["verdict"] is not None and auth["verdict"]["reason"] == "deny_rule"
    assert asked == []


def test_a_never_answering_approver_leaves_the_request_pending_without_blocking(
    workspace: Path, store: Store
) -> None:
    never: asyncio.Future[Decision] | None = None
    cancelled = []

    async def approver(ask: JSON) -> Decision:
        nonlocal never
        never = asyncio.get_running_loop().create_future()
        try:
            return await never
        except asyncio.CancelledError:
            cancelled.append(ask["request"]["id"])
            raise

    stuck = Gate("stuck", _snapshot(workspace), store, approver)
    other = Gate("other", _snapshot(workspace), store, "approve_all")

    async def main() -> None:
        pending = asyncio.ensure_future(stuck.authorize("file_write", str(workspace / "a")))
        ticks = 0
        for _ in range(20):
            await asyncio.sleep(0.01)
            ticks += 1
        assert ticks == 20, "the event loop kept running"
        assert not pending.done(), "the silent approver's request should still be pending"
        # Another turn is decided meanwhile.
        assert await asyncio.wait_for(other.authorize("file_write", str(workspace / "b")), 5)
        pending.cancel()
        with pytest.raises(asyncio.CancelledError):
            await pending
        for _ in range(100):
            if cancelled:
                break
            await asyncio.sleep(0.01)

    asyncio.run(main())
    assert cancelled, "cancelling the gate call cancels the approver's coroutine"
    kinds = [e["kind"] for e in store.replay("stuck")]
    assert "approval_requested" in kinds and "approval_resolved" not in kinds


def test_allow_for_turn_through_the_broker_is_cached_for_the_second_call(
    workspace: Path, store: Store
) -> None:
    snap = _snapshot(workspace)
    broker = turngate.Broker(turngate.Policy.mode("supervised"))
    gate = Gate("t1", snap, store, broker, broker=broker)
    notes = str(workspace / "notes.txt")

    async def responder(sub: turngate.Subscription) -> list[JSON]:
        seen = []
        async for n in sub:
            seen.append(n)
            if n["method"] == "turn/permission/request/requested":
                broker.respond(n["params"]["id"], "allow_for_turn")
            if n["method"] == "turn/permission/request/resolved":
                return seen
        return seen

    async def main() -> tuple[turngate.Authorization, turngate.Authorization, list[JSON]]:
        sub = broker.subscribe()
        task = asyncio.ensure_future(responder(sub))
        first = await gate.authorize("file_write", notes, tool="write_file")
        seen = await asyncio.wait_for(task, 5)
        second = await gate.authorize("file_write", notes, tool="write_file")
        sub.cancel()
        return first, second, seen

    first, second, seen = asyncio.run(main())
    assert first["outcome"] == "allowed" and not first["cached_approval"]
    assert second["outcome"] == "allowed" and second["cached_approval"]
    assert [n["method"] for n in seen] == [
        "turn/permission/request/requested",
        "turn/permission/request/resolved",
    ]
    assert seen[1]["params"]["resolution"] == "allow_for_turn"
    assert broker.pending_requests() == []
    decisions = [e.get("decision") for e in store.replay("t1")]
    assert "allow_for_turn" in decisions


def test_broker_respond_errors_name_the_request() -> None:
    broker = turngate.Broker(turngate.Policy.mode("supervised"))
    with pytest.raises(turngate.ApprovalError, match="apr_missing"):
        broker.respond("apr_missing", "allow_once")
    with pytest.raises(turngate.InvalidInput, match="maybe"):
        broker.respond("apr_missing", "maybe")


# ---- deferral across two processes ----------------------------------------------------------

DEFERRING_CHILD = textwrap.dedent(
    """
    import json, sys
    import turngate

    workspace, db = sys.argv[1], sys.argv[2]
    ctx = {"workspace_root": workspace, "execution_backend": "native",
           "platform": turngate.probe_platform()}
    snap = turngate.resolve({"mode": "supervised"}, ctx)
    gate = turngate.Gate("turn-a", snap, turngate.Store(db),
                         lambda ask: turngate.Decision.defer())
    auth = gate.authorize_blocking("file_write", workspace + "/report.md", tool="write_file")
    print(json.dumps({"outcome": auth["outcome"], "request": auth.get("request")}))
    """
)


def test_a_deferral_persisted_by_one_process_is_resumed_by_another(
    workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "shared.db"
    child = subprocess.run(
        [sys.executable, "-c", DEFERRING_CHILD, str(workspace), str(db)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
        timeout=60,
    )
    assert child.returncode == 0, child.stderr
    shown = json.loads(child.stdout)
    assert shown["outcome"] == "deferred"
    request = shown["request"]

    store = Store(db)
    (pending,) = store.pending_approvals()
    assert pending["request"] == request, "the stored request is exactly the one shown"
    assert pending["action"] == {
        "kind": "file_write",
        "target": str(workspace / "report.md"),
        "tool": "write_file",
    }
    gate = Gate("turn-a", _snapshot(workspace), store)
    auth = gate.resume(request["id"], Decision.approve())
    assert auth["outcome"] == "allowed"
    assert (auth["kind"], auth["target"], auth["tool"]) == (
        "file_write",
        str(workspace / "report.md"),
        "write_file",
    )
    assert store.pending_approvals() == []
    # The approval was allow_once and the resume spent it: a second resume (whatever it
    # decides) is refused, so the write cannot happen twice.
    with pytest.raises(turngate.ApprovalError, match="already_used"):
        gate.resume(request["id"], "deny")


def test_resuming_a_denied_target_is_refused_even_when_approved(
    workspace: Path, store: Store
) -> None:
    gate = Gate("t", _snapshot(workspace), store, "defer_all")
    auth = gate.authorize_blocking("file_write", str(workspace / "x.txt"))
    assert auth["outcome"] == "deferred"
    assert auth["reason"] == f"approval request {auth['request']['id']} was deferred"
    assert auth["tool_result"].startswith("Permission pending")
    strict = _with_rule(_snapshot(workspace), "file_write", "deny", "**")
    later = Gate("t", strict, store)
    assert later.resume(auth["request"]["id"], "approve")["outcome"] == "denied"


# ---- sandboxed spawn ------------------------------------------------------------------------


def test_a_sandboxed_spawn_cannot_write_outside_the_workspace(
    workspace: Path, tmp_path: Path, store: Store
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    gate = Gate("t", _snapshot(workspace, "auto_accept_edits"), store, "approve_all")
    r = gate.spawn_blocking(f"touch {outside}/escaped; touch {workspace}/inside")
    assert r["outcome"] == "ran", r
    sandbox = r["sandbox"]
    assert sandbox is not None and sandbox["backend"] == "nono"
    # The namespace layer's read-only view refuses first (EROFS); without it, Landlock (EACCES).
    refusal = b"Read-only file system" if "mount" in sandbox.get("namespaces", []) else b"Permission denied"
    assert refusal in r["stderr"], r["stderr"]
    assert not (outside / "escaped").exists(), "the kernel refused the write outside"
    assert (workspace / "inside").exists(), "the workspace stays writable"


def test_spawn_is_awaitable_and_a_denied_command_never_runs(
    workspace: Path, store: Store
) -> None:
    gate = Gate("t", _snapshot(workspace, "auto_accept_edits"), store, "deny_all")

    async def main() -> turngate.SpawnResult:
        return await gate.spawn(f"touch {workspace}/never")

    r = asyncio.run(main())
    assert r["outcome"] == "denied" and r["tool_result"]
    assert not (workspace / "never").exists()


def test_a_required_sandbox_that_is_unavailable_refuses_to_run(
    workspace: Path, store: Store
) -> None:
    platform = {**turngate.probe_platform(), "landlock_abi": None}
    ctx = {"workspace_root": str(workspace), "execution_backend": "native", "platform": platform}
    snap = turngate.resolve({"mode": "auto_accept_edits"}, ctx)
    gate = Gate("t", snap, store, "approve_all")
    with pytest.raises(turngate.SandboxUnavailable, match="Landlock"):
        gate.spawn_blocking("true")


# ---- race-free opens, guard, checkers -------------------------------------------------------


def test_open_read_and_write_through_the_gate(workspace: Path, store: Store) -> None:
    snap = _with_rule(_snapshot(workspace, "auto_accept_edits"), "file_read", "deny", "**/.env")
    gate = Gate("t", snap, store)
    with gate.open_write_blocking(workspace / "out.txt") as f:
        f.write(b"hello")
    with gate.open_read_blocking(workspace / "out.txt") as f:
        assert f.read() == b"hello"
    with pytest.raises(turngate.PermissionDenied) as e:
        gate.open_read_blocking(workspace / ".env")
    assert "Permission denied by turngate" in e.value.tool_result


def test_guard_returns_the_denials_tool_result_or_raises(
    workspace: Path, store: Store
) -> None:
    gate = Gate("t", _snapshot(workspace), store, lambda ask: ask["action"]["target"].endswith(".md"))
    ran: list[str] = []

    @gate.guard(kind="file_write", target=lambda path, **_: path)
    def write_file(path: str, text: str = "") -> str:
        ran.append(path)
        return "ok"

    @gate.guard(kind="file_write", target=lambda path, **_: path, on_deny="raise")
    async def write_strict(path: str) -> str:
        ran.append(path)
        return "ok"

    assert write_file(str(workspace / "a.md"), text="x") == "ok"
    refused = write_file(str(workspace / "a.py"))
    assert refused.startswith("Permission denied by turngate")
    assert ran == [str(workspace / "a.md")]
    with pytest.raises(turngate.PermissionDenied):
        asyncio.run(write_strict(str(workspace / "b.py")))
    assert write_file.__name__ == "write_file"


def test_blocking_calls_refuse_to_stall_a_running_loop(workspace: Path, store: Store) -> None:
    gate = Gate("t", _snapshot(workspace), store)

    async def main() -> None:
        with pytest.raises(RuntimeError, match="await"):
            gate.authorize_blocking("file_read", str(workspace / "a"))

    asyncio.run(main())
    with pytest.raises(RuntimeError, match="event loop"):
        gate.authorize("file_read", str(workspace / "a"))


def test_checkers_and_evaluate(workspace: Path) -> None:
    snap = _snapshot(workspace)
    policy = turngate.Policy.mode("supervised")
    f = turngate.check_file(snap["sandbox"], policy, "file_read", workspace / "sub" / ".." / "a")
    assert f["lexical"] == str(workspace / "a")
    assert set(f["verdict"]) == {"effect", "rule", "layer", "reason"}
    n = turngate.check_network(snap["network"], policy, "https://169.254.169.254/latest")
    assert n["verdict"]["effect"] == "deny" and n["address_class"] == "metadata"
    plan = turngate.plan_spawn(
        snap["sandbox"], snap["process"], policy, "cargo test | tee log",
        env={"PATH": "/usr/bin", "GITHUB_TOKEN": "x"},
    )
    assert [c["program"] for c in plan["commands"]] == ["cargo", "tee"]
    assert {"name": "GITHUB_TOKEN", "reason": "secret_name"} in plan["env"]["dropped"]
    assert {"name": b"PATH", "value": b"/usr/bin"} in plan["env"]["vars"]
    # Any Mapping is an env (the stub's `Mapping`), not only a dict: os.environ, a proxy.
    proxy = types.MappingProxyType({"PATH": "/usr/bin", "GITHUB_TOKEN": "x"})

    def kept(env: Any, mode: str) -> dict[bytes, bytes]:
        return {kv["name"]: kv["value"] for kv in turngate.filter_env(env, mode, str(workspace))["vars"]}

    for env in (proxy, os.environ):
        assert kept(env, "all")[b"PATH"] == os.fsencode(env["PATH"])
    assert kept(proxy, "filtered").get(b"GITHUB_TOKEN") is None
    e = turngate.evaluate(snap, "network", "HTTPS://Example.com/x")
    assert e["target"] == "example.com:443" and e["verdict"]["effect"] != "allow"
    with pytest.raises(turngate.InvalidInput, match="file_read or file_write"):
        turngate.check_file(snap["sandbox"], policy, "network", "x")


def test_filtered_env_has_one_shape() -> None:
    # The kept variables are {"name", "value"} dicts of bytes, as in every language; bytes that
    # are not UTF-8 survive.
    env = turngate.filter_env([(b"A\xff", b"\xfe"), ("LANG", "C")], "all", "/w")
    assert env["vars"][:2] == [
        {"name": b"A\xff", "value": b"\xfe"},
        {"name": b"LANG", "value": b"C"},
    ]
    assert all(set(kv) == {"name", "value"} for kv in env["vars"])
    assert all(isinstance(x, bytes) for kv in env["vars"] for x in kv.values())
    assert set(env) == {"vars", "dropped"} and env["dropped"] == []
    env = turngate.filter_env({"LANG": "C", "GITHUB_TOKEN": "x"}, "filtered", "/w")
    assert {"name": b"LANG", "value": b"C"} in env["vars"]
    assert env["dropped"] == [{"name": "GITHUB_TOKEN", "reason": "secret_name"}]


# ---- errors ---------------------------------------------------------------------------------


def test_errors_map_to_their_classes(workspace: Path, tmp_path: Path, store: Store) -> None:
    with pytest.raises(turngate.StoreError, match="nope"):
        Store("/proc/nope/audit.db")
    gate = Gate("t", _snapshot(workspace), store)
    with pytest.raises(turngate.ApprovalError, match="apr_missing"):
        gate.resume("apr_missing", "approve")
    with pytest.raises(turngate.InvalidInput, match="snapshot"):
        Gate("t", {"not": "a snapshot"}, store)
    with pytest.raises(turngate.InvalidInput, match="approver"):
        Gate("t", _snapshot(workspace), store, "approve_some")  # type: ignore[arg-type]
    with pytest.raises(turngate.PolicyError):
        gate.authorize_blocking("teleport", "x")
    with pytest.raises(turngate.InvalidInput, match="decision"):
        gate.resume("apr_x", "perhaps")
    for cls in (
        turngate.StoreError,
        turngate.ApprovalError,
        turngate.RunError,
        turngate.PermissionDenied,
        turngate.SandboxUnavailable,
    ):
        assert issubclass(cls, turngate.TurnGateError)


def test_paths_may_be_pathlib_paths(workspace: Path, store: Store) -> None:
    gate = Gate("t1", _snapshot(workspace), store, "deny_all")
    e = gate.evaluate("shell_command", "ls", cwd=workspace)
    assert e["target"] == "ls"
    plain = gate.evaluate("file_read", str(workspace / "a.txt"))
    assert gate.evaluate("file_read", "a.txt", cwd=workspace)["verdict"] == plain["verdict"]
