"""Runs every ``tests/conformance/*.json`` vector file, exactly as the Rust runners
(``core/tests/conformance_policy.rs``, ``core/tests/snapshot_conformance.rs``,
``core/tests/conformance_checkers.rs``) do.

Each vector is one pytest case. A vector file whose suite this runner does not
know fails the run unless it is listed in ``NOT_RUN_HERE`` with a reason.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Optional

import pytest

import turngate
from conftest import CONFORMANCE

# Suites this runner knows nothing about yet, each with the reason. Any other unknown suite
# found on disk is a failure (see test_every_suite_on_disk_is_run).
NOT_RUN_HERE: dict[str, str] = {}


def _load(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict), f"{path}: not an object"
    return doc


def _files() -> list[Path]:
    return sorted(CONFORMANCE.glob("*.json"))


# ---- suite policy ---------------------------------------------------------------------------


def _builtin(name: str) -> turngate.Policy:
    if name == "default":
        return turngate.Policy.tiered()
    if name == "permissive":
        return turngate.Policy.permissive()
    return turngate.Policy.mode(name)


def _policy_of(v: Any) -> turngate.Policy:
    if isinstance(v, str):
        return _builtin(v)
    return turngate.Policy.from_dict(v)


def _build(v: dict[str, Any]) -> turngate.Policy:
    builtin, policy = v.get("builtin"), v.get("policy")
    if isinstance(builtin, str) and policy is None:
        p = _builtin(builtin)
    elif isinstance(builtin, str):
        p = _builtin(builtin).merge(_policy_of(policy))
    elif builtin is None:
        p = _policy_of(policy)
    else:
        raise AssertionError(f"bad builtin {builtin!r}")
    for m in v.get("merge") or []:
        p = p.merge(_policy_of(m))
    for c in v.get("contain") or []:
        p = p.contain(_policy_of(c))
    return p


def run_policy(v: dict[str, Any]) -> None:
    policy = _build(v)
    action = v["action"]
    assert set(action) <= {"kind", "target", "tool"}, f"unknown action field in {action}"
    verdict = policy.explain(action["kind"], action["target"], action.get("tool"))
    rule = verdict["rule"]
    got = {**verdict, "rule": rule["pattern"] if rule is not None else None}
    # `check` is `explain(..)["effect"]`: they must never disagree.
    assert policy.check(action["kind"], action["target"], action.get("tool")) == verdict["effect"]
    assert policy.check_batch([(action["kind"], action["target"], action.get("tool"))]) == [
        verdict["effect"]
    ]
    assert got == v["expect"], f"expected {v['expect']}, got {got}"


# ---- suite policy_serde ---------------------------------------------------------------------


def run_policy_serde(v: dict[str, Any]) -> None:
    text = v["text"]
    fmt = v["format"]
    parse: Callable[[str], turngate.Policy]
    if fmt == "json":
        parse = turngate.Policy.from_json
    elif fmt == "toml":
        parse = turngate.Policy.from_toml
    else:
        raise AssertionError(f"bad format {fmt!r}")
    want_policy, want_error = v.get("expect_policy"), v.get("expect_error")
    try:
        p = parse(text)
    except turngate.PolicyError as e:
        assert want_error is not None, f"unexpected error: {e}"
        assert want_policy is None
        got = {"path": e.path, "line": e.line, "column": e.column}
        expected = {k: want_error.get(k) for k in ("path", "line", "column")}
        assert got == expected, f"expected {expected}, got {got} ({e})"
        for needle in want_error.get("contains", []):
            assert needle in str(e), f"message {str(e)!r} lacks {needle!r}"
        return
    assert want_error is None, f"expected an error {want_error}, got a policy {p.to_json()}"
    assert p.to_dict() == want_policy, f"expected {want_policy}, got {p.to_dict()}"
    # Round trip through both formats.
    assert turngate.Policy.from_json(p.to_json()).to_dict() == p.to_dict(), "json round trip"
    assert turngate.Policy.from_toml(p.to_toml()).to_dict() == p.to_dict(), "toml round trip"
    assert turngate.Policy.from_dict(p.to_dict()).to_dict() == p.to_dict(), "dict round trip"


# ---- snapshot suites ------------------------------------------------------------------------


def subset(expect: Any, actual: Any, path: str) -> None:
    """`expect` matches `actual` when every key of an expected object matches, arrays have
    the same length and match element-wise, and scalars are equal (null matches missing)."""
    if isinstance(expect, dict) and isinstance(actual, dict):
        for k, ev in expect.items():
            subset(ev, actual.get(k), f"{path}.{k}")
        return
    if isinstance(expect, list) and isinstance(actual, list):
        assert len(expect) == len(actual), (
            f"{path}: expected {len(expect)} elements, got {len(actual)}: {actual}"
        )
        for i, (ev, av) in enumerate(zip(expect, actual)):
            subset(ev, av, f"{path}[{i}]")
        return
    # JSON equality: bool is not a number, and 1 == 1.0 only for genuine numbers.
    same = type(expect) is type(actual) or (
        isinstance(expect, (int, float))
        and isinstance(actual, (int, float))
        and not isinstance(expect, bool)
        and not isinstance(actual, bool)
    )
    assert same and expect == actual, f"{path}: expected {expect!r}, got {actual!r}"


def materialize(v: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """The vector with ``{tmp}`` replaced by the temporary directory ``tmp`` in every string, and
    every path of its ``dirs`` created there (a snapshot's roots must exist)."""
    base = json.dumps(os.path.realpath(tmp))[1:-1]
    out: dict[str, Any] = json.loads(json.dumps(v).replace("{tmp}", base))
    for d in out.get("dirs", []):
        Path(d).mkdir(parents=True, exist_ok=True)
    return out


def _cap_of(v: dict[str, Any]) -> Optional[dict[str, Any]]:
    if "cap" in v:
        cap: dict[str, Any] = v["cap"]
        return cap
    parent = v.get("cap_from_parent")
    if parent is None:
        return None
    snapshot = turngate.resolve(parent.get("selection"), parent["context"])
    return turngate.cap_from_parent(snapshot, parent["origin"])


def _shell_outcome(snapshot: dict[str, Any]) -> str:
    try:
        turngate.ensure_native_shell_allowed(snapshot)
    except turngate.SandboxUnavailable:
        return "sandbox_unavailable"
    except turngate.SnapshotError as e:
        return "provider_native_on_native_shell" if e.code == "provider_native_on_native_shell" else "other_error"
    return "allowed"


def run_snapshot_resolve(v: dict[str, Any]) -> None:
    cap = _cap_of(v)
    needle = v.get("expect_error")
    try:
        s = turngate.resolve(v.get("selection"), v["context"], cap)
    except turngate.TurnGateError as e:
        assert needle is not None, f"unexpected error: {e}"
        assert needle in str(e), f"error `{e}` does not name `{needle}`"
        return
    assert needle is None, f"expected an error naming `{needle}`, got a snapshot: {json.dumps(s)}"
    subset(v.get("expect"), s, "snapshot")
    # A snapshot round-trips through JSON: intersecting with an empty cap-free resolve is not
    # defined, so check the JSON text form instead.
    assert json.loads(json.dumps(s)) == s
    if "native_shell" in v:
        got = _shell_outcome(s)
        assert got == v["native_shell"], f"native_shell: expected {v['native_shell']}, got {got}"


def run_snapshot_prompt(v: dict[str, Any]) -> None:
    s = turngate.resolve(v.get("selection"), v["context"], _cap_of(v))
    got = turngate.render_permissions_section(s["permission_profile"])
    if "expect" in v:
        assert got == v["expect"], f"expected {v['expect']!r}\n got {got!r}"
    for needle in v.get("expect_contains") or []:
        assert got is not None, "expected a section, got none"
        assert needle in got, f"section does not contain `{needle}`:\n{got}"


def run_snapshot_runtime(v: dict[str, Any]) -> None:
    got = turngate.map_cli_runtime(v["runtime"], v["mode"])
    subset(v["expect"], got, "mapping")


# ---- suites reducer and scope_hash (core/tests/reduce_conformance.rs) -----------------------


def run_reducer(v: dict[str, Any]) -> None:
    assert set(v) <= {"why", "inputs", "expected"}, f"unknown vector field in {sorted(v)}"
    got = turngate.reduce_all(v["inputs"])
    assert got == v["expected"], f"\n got {json.dumps(got, indent=1)}\nwant {json.dumps(v['expected'], indent=1)}"
    # One input at a time from a JSON round-tripped state gives the same answer.
    state: Optional[dict[str, Any]] = None
    for item in v["inputs"]:
        state = turngate.reduce(json.loads(json.dumps(state)), item)
    assert (state if state is not None else turngate.reduce_all([])) == got, "stepwise"


def run_scope_hash(v: dict[str, Any]) -> None:
    assert set(v) <= {"why", "action", "cwd", "scope", "scope_hash"}, f"unknown vector field in {sorted(v)}"
    action = v.get("action")
    if action is not None:
        scope = turngate.scope_from_action(action["kind"], action["target"], action.get("tool"), v.get("cwd"))
        assert scope == v["scope"], f"normalized scope: expected {v['scope']}, got {scope}"
    assert turngate.scope_hash(v["scope"]) == v["scope_hash"]


# ---- checker suites (as core/tests/conformance_checkers.rs) ---------------------------------


def _shell_sandbox(cwd: str) -> dict[str, Any]:
    return {
        "mode": "unrestricted",
        "cwd": cwd,
        "filesystem": {"entries": []},
        "tmp": "host",
        "network": {
            "mode": "enabled",
            "allowed_domains": [],
            "denied_domains": [],
            "allow_localhost": False,
            "allow_unix_sockets": False,
            "allowed_tcp_ports": [],
        },
        "backend_requirement": "optional",
        "backend_preference": "none",
    }


_SHELL_PROCESS: dict[str, Any] = {
    "shell_enabled": True,
    "inherit_stdin": False,
    "inherit_session": False,
    "env": "filtered",
    "max_duration_ms": 1000,
    "denied_commands": [],
    "allowed_command_families": [],
}


def run_checkers_network(doc: dict[str, Any], v: dict[str, Any]) -> None:
    defaults = doc["defaults"]
    net = {**defaults["network"], **(v.get("network") or {})}
    policy = turngate.Policy.from_dict(v.get("policy", defaults["policy"]))
    got = turngate.check_network(net, policy, v["target"])
    verdict = got["verdict"]
    expect = v["expect"]
    assert verdict["effect"] == expect["effect"], f"got {verdict}, want {expect}"
    if "reason" in expect:
        assert verdict["reason"] == expect["reason"], f"got {verdict}, want {expect}"


def run_checkers_shell(doc: dict[str, Any], v: dict[str, Any]) -> None:
    import tempfile

    policy = turngate.Policy.from_dict(doc["policy"])
    line, expect = v["line"], v["expect"]
    with tempfile.TemporaryDirectory() as tmp:
        plan = turngate.plan_spawn(_shell_sandbox(tmp), _SHELL_PROCESS, policy, line)
    parsed = turngate.parse_command_line(line)
    assert policy.check("shell_command", line) == expect["effect"], "explain disagrees"
    verdict = plan["verdict"]
    assert verdict["effect"] == expect["effect"], f"plan gave {verdict}"
    for p in expect.get("programs_include", []):
        assert p in parsed["programs"], f"program {p} not reported: {parsed}"
    unresolved = expect.get("unresolved_include")
    if unresolved is not None:
        if not unresolved:
            assert not parsed["unresolved"], f"expected nothing unresolved: {parsed}"
        for u in unresolved:
            assert u in parsed["unresolved"], f"unresolved {u} not reported: {parsed}"


def _text(v: Any) -> bytes:
    if isinstance(v, str):
        return v.encode()
    assert isinstance(v, dict) and isinstance(v.get("hex"), str), f"bad text {v!r}"
    return bytes.fromhex(v["hex"])


def run_checkers_env(doc: dict[str, Any], v: dict[str, Any]) -> None:
    name, value = _text(v["name"]), _text(v["value"])
    mode = v["mode"] if v["mode"] in ("all", "none") else "filtered"
    env = turngate.filter_env([(name, value)], mode, "/w")
    kept = any(kv["name"] == name for kv in env["vars"])
    dropped = env["dropped"]
    reason = dropped[0]["reason"] if dropped else None
    expect = v["expect"]
    assert kept == expect["kept"], f"kept={kept} reason={reason}"
    if "reason" in expect:
        assert reason == expect["reason"], f"kept={kept} reason={reason}"


# ---- suite gate ------------------------------------------------------------------------------


def run_gate(v: dict[str, Any]) -> None:
    """Selection + workspace + calls with scripted answers -> outcomes and audit rows, exactly
    as core/tests/gate_conformance.rs runs them (a BrokerApprover answered by a subscriber)."""
    import asyncio
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for path, content in (v.get("files") or {}).items():
            p = Path(tmp) / path
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(content)
        for link, target in (v.get("symlinks") or {}).items():
            p = Path(tmp) / link
            p.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, p)
        root = str(Path(tmp).resolve())
        platform = {
            "os": "linux", "landlock_abi": 7, "seccomp": True, "user_namespaces": True,
            "seatbelt": False, "restricted_token": False,
        }
        ctx = {"workspace_root": root, "execution_backend": "native", "platform": platform}
        snapshot = turngate.resolve(v["selection"], ctx)
        store = turngate.Store(str(Path(tmp) / "audit.db"))
        broker = turngate.Broker(
            turngate.Policy.from_dict(snapshot["permission_profile"]["effective_policy"])
        )
        gate = turngate.Gate("turn-1", snapshot, store, broker, broker=broker)

        async def main() -> None:
            answers: list[str] = []
            asked = [0]
            sub = broker.subscribe()

            async def responder() -> None:
                async for n in sub:
                    if n["method"] == "turn/permission/request/requested":
                        asked[0] += 1
                        broker.respond(n["params"]["id"], answers.pop(0) if answers else "deny")

            task = asyncio.ensure_future(responder())
            for i, step in enumerate(v["steps"]):
                if "answer" in step:
                    answers.append(step["answer"])
                before = asked[0]
                auth = await gate.authorize(step["kind"], step["target"], tool=step.get("tool"))
                verdict = None if auth["outcome"] == "deferred" else auth["verdict"]
                cached = auth["cached_approval"] if auth["outcome"] == "allowed" else False
                got: dict[str, Any] = {
                    "outcome": auth["outcome"],
                    "cached": cached,
                    "reason": verdict["reason"] if verdict is not None else None,
                    "asked": asked[0] > before,
                }
                expect = dict(step["expect"])
                part = expect.pop("denial_includes", None)
                if part is not None:
                    assert auth["outcome"] == "denied" and part in auth["reason"], (
                        f"step {i}: the denial does not say {part!r}: {auth!r}"
                    )
                for key, want in expect.items():
                    assert got[key] == want, f"step {i}: {key}: expected {want}, got {got}"
            sub.cancel()
            task.cancel()

        asyncio.run(main())
        rows = [
            [e["kind"], e.get("decision"), e["cached_approval_used"]]
            for e in store.replay("turn-1")
        ]
        assert rows == v["expect_audit"], f"audit rows: expected {v['expect_audit']}, got {rows}"


CHECKER_RUNNERS: dict[str, Callable[[dict[str, Any], dict[str, Any]], None]] = {
    "checkers_network": run_checkers_network,
    "checkers_shell": run_checkers_shell,
    "checkers_env": run_checkers_env,
}


# ---- tooling suites (as core/tests/conformance_tooling.rs) ---------------------------------


def _build_tooling(v: dict[str, Any]) -> turngate.Policy:
    own: Optional[turngate.Policy] = None
    if v.get("policy") is not None:
        own = _policy_of(v["policy"])
    elif v.get("policy_toml") is not None:
        own = turngate.Policy.from_toml(v["policy_toml"])
    builtin = v.get("builtin")
    if isinstance(builtin, str):
        p = _builtin(builtin) if own is None else _builtin(builtin).merge(own)
    else:
        assert own is not None, "neither builtin nor policy"
        p = own
    for c in v.get("contain") or []:
        p = p.contain(_policy_of(c))
    return p


def run_policy_turn(v: dict[str, Any]) -> None:
    policy = _build_tooling(v)
    a = v["action"]
    got = policy.explain_in_turn(a["kind"], a["target"], a.get("tool"), v["history"])
    got["rule"] = got["rule"]["pattern"] if got.get("rule") else None
    assert got == v["expect"], f"expected {v['expect']}, got {got}"


def run_policy_lint(v: dict[str, Any]) -> None:
    got = [{"code": f["code"], "path": f["path"]} for f in _build_tooling(v).lint()]
    assert got == v["expect"], f"expected {v['expect']}, got {got}"


def run_replay(v: dict[str, Any]) -> None:
    got = _build_tooling(v).replay_events(v["events"], v.get("options"))
    assert got == v["expect"], f"expected {v['expect']}, got {got}"


# ---- suite changes_serde (as core/tests/conformance_changes.rs) -----------------------------


def run_changes_serde(v: dict[str, Any]) -> None:
    needle = v.get("expect_error")
    if needle is None:
        got = turngate.parse_change_set(v["change_set"])
        assert got == v["change_set"], f"expected {v['change_set']}, got {got}"
        return
    with pytest.raises(turngate.InvalidInput) as e:
        turngate.parse_change_set(v["change_set"])
    assert needle in str(e.value), f"`{e.value}` does not name `{needle}`"


# ---- suite tools (as bindings/tests/tools_conformance.rs) ------------------------------------


def _tool_call(gate: Any, step: dict[str, Any], outcomes: list[Any]) -> Any:
    kw: dict[str, Any] = {"item_id": step.get("item_id")}
    a = step.get("approval")
    if a is not None:
        rid = (
            outcomes[a["request_of"]]["request_id"] or "no-such-request"
            if "request_of" in a
            else a["request_id"]
        )
        kw["approval"] = {"request_id": rid, "decision": a["decision"]}
    tool = step["tool"]
    if tool == "read_file":
        return gate.read_file_blocking(step["path"], max_bytes=step.get("max_bytes"), **kw)
    if tool == "write_file":
        return gate.write_file_blocking(step["path"], step["content"], **kw)
    if tool == "edit_file":
        return gate.edit_file_blocking(step["path"], step["old"], step["new"], **kw)
    if tool == "run_shell":
        return gate.run_shell_blocking(
            step["command"],
            env=step.get("env"),
            timeout_ms=step.get("timeout_ms"),
            stdin=step.get("stdin"),
            cwd=step.get("cwd"),
            **kw,
        )
    if tool == "fetch_url":
        return gate.fetch_url_blocking(
            step["url"], method=step.get("method", "GET"), headers=step.get("headers"), **kw
        )
    raise AssertionError(f"unknown tool {tool}")


def run_tools(v: dict[str, Any]) -> None:
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as state:
        for path, content in (v.get("files") or {}).items():
            p = Path(tmp) / path
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(content)
        for link, target in (v.get("symlinks") or {}).items():
            os.symlink(target, Path(tmp) / link)
        root = Path(tmp).resolve()
        ctx = {
            "workspace_root": str(root),
            "execution_backend": "native",
            "platform": turngate.probe_platform(),
        }
        snapshot = turngate.resolve(v["selection"], ctx)
        store = turngate.Store(str(Path(state) / "audit.db"))
        gates = {t: turngate.Gate(t, snapshot, store, v["approver"]) for t in ("turn-1", "turn-2")}
        outcomes: list[Any] = []
        for i, step in enumerate(v["steps"]):
            if "expect_error" in step:
                with pytest.raises(Exception) as err:
                    _tool_call(gates[step.get("turn", "turn-1")], step, outcomes)
                _store_error(step["expect_error"], err.value, f"step {i}")
                outcomes.append(None)
                continue
            got = _tool_call(gates[step.get("turn", "turn-1")], step, outcomes)
            for key, want in step["expect"].items():
                if key.endswith("_includes"):
                    field = key[: -len("_includes")]
                    for part in want if isinstance(want, list) else [want]:
                        assert part in (got[field] or ""), f"step {i}: {field} does not say {part!r}: {got}"
                elif key == "target_rel":
                    assert got["target"] == str(root / want), f"step {i}: target: {got}"
                elif key == "has_request":
                    assert (got["request"] is not None) == want, f"step {i}: request: {got}"
                    assert (got["request_id"] is not None) == want, f"step {i}: request_id: {got}"
                else:
                    assert got[key] == want, f"step {i}: {key}: expected {want!r}, got {got}"
            outcomes.append(got)
        for path, want in (v.get("expect_files") or {}).items():
            p = root / path
            assert (p.read_text() if p.exists() else None) == want, f"file {path}"
        if "expect_item_ids" in v:
            ids = [e.get("item_id") for e in store.replay("turn-1") if e["kind"] != "profile_selected"]
            assert ids == v["expect_item_ids"], f"audit item ids: {ids}"


STORE_ERRORS: dict[str, type[BaseException]] = {
    "Approval": turngate.ApprovalError,
    "InvalidInput": turngate.InvalidInput,
    "Store": turngate.StoreError,
}


def _store_error(want: dict[str, Any], err: BaseException, where: str) -> None:
    assert isinstance(err, STORE_ERRORS[want["kind"]]), f"{where}: expected {want}, got {err!r}"
    for part in want.get("includes", []):
        assert part in str(err), f"{where}: the error does not say {part!r}: {err}"


def run_store(v: dict[str, Any]) -> None:
    """A store, a gate on it, and steps that authorize, resolve through the store, wait and
    resume with the recorded decision, exactly as bindings/tests/store_conformance.rs runs them."""
    import asyncio
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as state:
        for name, content in (v.get("files") or {}).items():
            (Path(tmp) / name).write_text(content)
        root = Path(tmp).resolve()
        name = v["store"]["path"]
        path = name if name == ":memory:" else str(Path(state) / name)
        durability = v["store"].get("durability")
        try:
            store = turngate.Store(path, durability=durability)
        except turngate.TurnGateError as err:
            assert "expect_open_error" in v, f"open failed: {err!r}"
            _store_error(v["expect_open_error"], err, "open")
            if "expect_no_file" in v:
                assert not (Path(state) / v["expect_no_file"]).exists()
            return
        assert "expect_open_error" not in v, f"opened, expected {v['expect_open_error']}"
        ctx = {"workspace_root": str(root), "execution_backend": "native",
               "platform": turngate.probe_platform()}
        snapshot = turngate.resolve(v["selection"], ctx)
        gates = {t: turngate.Gate(t, snapshot, store, v["approver"]) for t in ("turn-1", "turn-2")}
        results: list[Any] = []

        def request_id(step: dict[str, Any]) -> str:
            if "request_of" in step:
                got = results[step["request_of"]] or {}
                return str((got.get("request") or {}).get("id", "no-such-request"))
            return str(step["request_id"])

        def run(step: dict[str, Any]) -> Any:
            gate = gates[step.get("turn", "turn-1")]
            op = step["op"]
            if op == "authorize":
                return gate.authorize_blocking(step["kind"], step["target"])
            if op == "resolve":
                via = turngate.Store(path) if step.get("via") == "second_connection" else store
                return via.resolve(request_id(step), step["resolution"], step["reason"])
            if op == "wait":
                timeout = step.get("timeout_ms", 5000)

                async def wait() -> dict[str, Any]:
                    return await gate.wait_resolved(request_id(step), timeout_ms=timeout)

                got = asyncio.run(wait())
                return {"resolution": (got.get("resolution") or {}).get("resolution")}
            if op == "resume":
                return gate.resume(request_id(step))
            if op == "replay_fresh_memory":
                return turngate.Store.memory().replay("turn-1")
            raise AssertionError(f"unknown op {op}")

        for i, step in enumerate(v["steps"]):
            where = f"step {i} ({v['why']})"
            try:
                got = run(step)
            except turngate.TurnGateError as err:
                assert "expect_error" in step, f"{where}: {err!r}"
                _store_error(step["expect_error"], err, where)
                results.append(None)
                continue
            assert "expect_error" not in step, f"{where}: expected {step['expect_error']}, got {got}"
            for key, want in step["expect"].items():
                if key == "rows":
                    assert len(got) == want, f"{where}: rows {got}"
                elif key == "target_rel":
                    assert got["target"] == str(root / want), f"{where}: target {got}"
                else:
                    assert got.get(key) == want, f"{where}: {key}: expected {want!r}, got {got}"
            results.append(got)
        if "expect_audit" in v:
            kinds = [e["kind"] for e in store.replay("turn-1")]
            assert kinds == v["expect_audit"], f"audit: {kinds}"


RUNNERS: dict[str, Callable[[dict[str, Any]], None]] = {
    "changes_serde": run_changes_serde,
    "policy_turn": run_policy_turn,
    "policy_lint": run_policy_lint,
    "replay": run_replay,
    "policy": run_policy,
    "policy_serde": run_policy_serde,
    "snapshot_resolve": run_snapshot_resolve,
    "snapshot_cap": run_snapshot_resolve,
    "snapshot_prompt": run_snapshot_prompt,
    "snapshot_runtime": run_snapshot_runtime,
    "reducer": run_reducer,
    "scope_hash": run_scope_hash,
    "gate": run_gate,
    "tools": run_tools,
    "store": run_store,
}


def _cases() -> list[Any]:
    cases = []
    for path in _files():
        doc = _load(path)
        suite = doc.get("suite")
        if suite not in RUNNERS and suite not in CHECKER_RUNNERS:
            continue
        for i, v in enumerate(doc["vectors"]):
            cases.append(
                pytest.param(suite, doc, v, id=f"{path.stem}[{i}] {v.get('why', '')[:60]}")
            )
    return cases


@pytest.mark.parametrize(("suite", "doc", "vector"), _cases())
def test_vector(suite: str, doc: dict[str, Any], vector: dict[str, Any], tmp_path: Path) -> None:
    assert str(vector.get("why", "")).strip(), "vector without a why"
    if suite.startswith("snapshot_"):
        vector = materialize(vector, tmp_path)
    if suite in CHECKER_RUNNERS:
        CHECKER_RUNNERS[suite](doc, vector)
    else:
        RUNNERS[suite](vector)


def test_every_suite_on_disk_is_run() -> None:
    files = _files()
    assert files, f"no vector files in {CONFORMANCE}"
    unknown = []
    for path in files:
        doc = _load(path)
        suite = doc.get("suite")
        assert isinstance(suite, str), f"{path.name}: no suite"
        assert doc.get("vectors"), f"{path.name}: no vectors"
        if suite not in RUNNERS and suite not in CHECKER_RUNNERS and suite not in NOT_RUN_HERE:
            unknown.append(f"{path.name} (suite {suite!r})")
    assert not unknown, (
        "vector files whose suite the Python runner does not run, with no reason listed in "
        f"NOT_RUN_HERE: {', '.join(unknown)}"
    )


def test_every_known_suite_has_vectors() -> None:
    present = {_load(p).get("suite") for p in _files()}
    missing = sorted(set(RUNNERS) - present)
    assert not missing, f"no vector file for suites {missing}"
