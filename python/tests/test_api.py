"""The Python surface: policies, verdicts, errors as native exceptions, protocol dicts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import turngate
from turngate import Policy


def test_default_policy_tiers() -> None:
    p = Policy.tiered()
    assert p.check("file_read", "src/main.py") == "allow"
    assert p.check("file_write", "src/main.py") == "ask"
    assert p.check("file_read", "config/.env") == "deny"
    assert p.check("network", "example.com:443") == "deny"
    assert p.check("shell_command", "rustc --version") == "allow"
    assert Policy.tiered(provider_host="api.example.com").check("network", "api.example.com:443") == "allow"


def test_explain_is_a_typed_verdict() -> None:
    v = Policy.tiered().explain("file_read", "keys/server.pem")
    assert v == {
        "effect": "deny",
        "rule": {"kind": "file_read", "effect": "deny", "pattern": "*.pem", "tool": None},
        "layer": "builtin-secrets",
        "reason": "deny_rule",
    }
    d = Policy.tiered().explain("file_write", "a.txt")
    assert d["rule"] is None and d["layer"] == "defaults" and d["reason"] == "default"


def test_builders_return_new_policies() -> None:
    base = Policy.permissive()
    p = base.layer("project").rule("file_write", "deny", "secrets/*").rule("network", "allow", "api.example.com")
    assert base.check("file_write", "secrets/a") == "allow", "the original is unchanged"
    v = p.explain("file_write", "secrets/a")
    assert (v["effect"], v["layer"]) == ("deny", "project")
    tool_rule = Policy().rule("mcp_read", "deny", "fs/*", tool="mcp__fs__*", layer="mcp")
    assert tool_rule.check("mcp_read", "fs/read", tool="mcp__fs__read") == "deny"
    assert tool_rule.check("mcp_read", "fs/read", tool="other") == "ask"
    assert Policy().with_default("file_read", "allow").check("file_read", "x") == "allow"


def test_merge_never_loosens_and_contain_narrows() -> None:
    supervised = Policy.mode("supervised")
    assert supervised.merge(Policy.permissive()).check("file_write", "a") == "ask"
    capped = Policy.permissive().contain(supervised.named("parent"))
    v = capped.explain("file_write", "a")
    assert (v["effect"], v["layer"]) == ("ask", "parent")


def test_check_batch_matches_check() -> None:
    p = Policy.tiered()
    actions: list[tuple[str, str, str | None]] = [
        ("file_read", "a", None),
        ("file_read", ".env", None),
        ("network", "x.org:80", None),
        ("file_write", "b", "edit"),
    ]
    assert p.check_batch(actions) == [p.check(k, t, tool) for k, t, tool in actions]
    assert p.check_batch([("file_read", "a"), ("file_read", ".env")]) == ["allow", "deny"]
    assert p.check_batch([]) == []
    with pytest.raises(turngate.InvalidInput, match=r"actions\[1\]"):
        p.check_batch([("file_read", "a"), ("file_read",)])  # type: ignore[list-item]
    with pytest.raises(turngate.TurnGateError, match=r"actions\[0\]\.kind"):
        p.check_batch([("bogus", "a")])


def test_errors_are_native_exceptions_with_fields() -> None:
    with pytest.raises(turngate.PolicyError, match="file_raed") as info:
        Policy.tiered().check("file_raed", "x")
    assert isinstance(info.value, turngate.TurnGateError)
    with pytest.raises(turngate.PolicyError) as parse:
        Policy.from_toml('[defaults]\nfile_read = "maybe"\n', origin="p.toml")
    assert (parse.value.path, parse.value.line) == ("defaults.file_read", 2)
    assert "p.toml" in str(parse.value)
    with pytest.raises(turngate.PolicyError, match="yolo"):
        Policy.mode("yolo")
    with pytest.raises(turngate.InvalidInput, match="policy"):
        Policy.from_dict({"layers": [object()]})
    assert issubclass(turngate.SandboxUnavailable, turngate.TurnGateError)
    assert issubclass(turngate.StoreError, turngate.TurnGateError)


def test_policy_round_trips_through_dict_json_toml_and_file(tmp_path: Path) -> None:
    p = Policy.tiered()
    assert Policy.from_dict(p.to_dict()).to_dict() == p.to_dict()
    assert Policy.from_json(p.to_json()).to_dict() == p.to_dict()
    assert Policy.from_toml(p.to_toml()).to_dict() == p.to_dict()
    f = tmp_path / "policy.toml"
    f.write_text(p.to_toml())
    assert Policy.from_file(f).to_dict() == p.to_dict()
    assert Policy.from_file(str(f)).check("file_read", ".env") == "deny"
    with pytest.raises(turngate.PolicyError, match="missing.json"):
        Policy.from_file(tmp_path / "missing.json")


def _context(tmp_path: Path) -> dict[str, object]:
    return {"workspace_root": str(tmp_path), "execution_backend": "native", "platform": turngate.probe_platform()}


def test_resolve_and_cap_with_plain_dicts(tmp_path: Path) -> None:
    ctx = _context(tmp_path)
    parent = turngate.resolve({"mode": "supervised"}, ctx)
    assert parent["permission_profile"]["mode"] == "supervised"
    assert json.loads(json.dumps(parent)) == parent
    cap = turngate.cap_from_parent(parent, "parent_turn")
    child = turngate.resolve({"mode": "full_access"}, ctx, cap)
    assert child["permission_profile"]["mode"] == "supervised", "a child is never broader"
    narrowed = turngate.intersect(turngate.resolve(None, ctx), cap)
    assert narrowed["permission_profile"]["mode"] == "supervised"
    section = turngate.render_permissions_section(parent["permission_profile"])
    assert section is None or isinstance(section, str)
    with pytest.raises(turngate.InvalidInput, match="^selection"):
        turngate.resolve({"mode": "nope"}, ctx)
    with pytest.raises(turngate.SnapshotError) as info:
        turngate.resolve({"mode": "supervised"}, {**ctx, "workspace_root": "relative/dir"})
    assert info.value.code == "invalid_path"


def test_runtime_mapping_and_schemas() -> None:
    m = turngate.map_cli_runtime("codex", "supervised")
    assert isinstance(m, dict) and m
    with pytest.raises(turngate.TurnGateError, match="runtime"):
        turngate.map_cli_runtime("vim", "supervised")
    assert "Policy" in turngate.schema_names()
    assert turngate.schema("Policy")["type"] == "object"
    with pytest.raises(turngate.InvalidInput, match="Nope"):
        turngate.schema("Nope")
    assert turngate.__version__ == turngate.version()


def test_store_replay_policy_lists_the_decisions_a_candidate_flips(tmp_path: Path) -> None:
    store = turngate.Store(str(tmp_path / "audit.db"))
    for target in ("/w/a.rs", "/w/b.log"):
        store.append(
            {
                "turn_id": "t",
                "seq": 0,
                "kind": "decision_allowed",
                "profile_mode": "full_access",
                "profile_source": "composer",
                "action_kind": "file_read",
                "target": target,
                "decision": "allow",
                "reason": "default",
                "decider": "policy",
            }
        )
    candidate = Policy.mode("full_access").merge(
        Policy.from_dict(
            {"layers": [{"name": "logs", "rules": [{"kind": "file_read", "effect": "deny", "pattern": "*.log"}]}]}
        )
    )
    report = store.replay(candidate, turn="t")
    assert report["decisions"] == 2
    flips = report["flips"]
    assert isinstance(flips, list)
    assert [(f["target"], f["before"], f["after"], f["layer"]) for f in flips] == [
        ("/w/b.log", "allow", "deny", "logs")
    ]
    assert len(store.replay("t")) == 2
    assert candidate.lint() == []
    with pytest.raises(TypeError):
        store.replay(42)  # type: ignore[call-overload]


def test_errors_subclass_the_builtin_a_caller_catches() -> None:
    assert issubclass(turngate.PolicyError, ValueError)
    assert issubclass(turngate.InvalidInput, ValueError)
    assert issubclass(turngate.PermissionDenied, PermissionError)
    for cls in (turngate.PolicyError, turngate.InvalidInput, turngate.PermissionDenied):
        assert issubclass(cls, turngate.TurnGateError)
    assert turngate.TurnGateError.__name__ == "TurnGateError"
    with pytest.raises(ValueError, match="file_reed"):
        Policy.tiered().check("file_reed", "x")
    with pytest.raises(turngate.PolicyError) as e:
        Policy.from_json('{"layers": [{"name": "x", "rules": [{"kind": "file_read", "effect": "no", "pattern": "*"}]}]}')
    assert e.value.path is not None
