"""Records as Python objects (pythonize, ADR 0029): exactly the dicts `json.loads` makes of
the facade's JSON, fields in the record's order, ints as ints, omitted optional fields omitted,
and a fresh mutable dict per call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import turngate
from turngate import Gate, Policy, Store


def same(got: Any, expected: Any) -> None:
    """Equal, and equal as JSON text without sorting: the same key order and the same types
    (an int is not a float, a bool is not an int)."""
    assert got == expected
    assert json.dumps(got) == json.dumps(expected)


def test_a_verdict_with_a_rule() -> None:
    p = Policy().rule("file_write", "deny", "secrets/**", tool="write_*")
    same(
        p.explain("file_write", "secrets/a", "write_file"),
        {
            "effect": "deny",
            "rule": {"kind": "file_write", "effect": "deny", "pattern": "secrets/**", "tool": "write_*"},
            "layer": "custom",
            "reason": "deny_rule",
        },
    )
    # A rule without a tool glob keeps `tool` as None; a default verdict has `rule` None.
    same(
        Policy().rule("file_read", "allow", "*.md").explain("file_read", "a.md"),
        {
            "effect": "allow",
            "rule": {"kind": "file_read", "effect": "allow", "pattern": "*.md", "tool": None},
            "layer": "custom",
            "reason": "allow_rule",
        },
    )


def test_each_call_returns_a_fresh_dict() -> None:
    p = Policy.tiered()
    first = p.explain("file_read", "config/.env")
    assert first["rule"] is not None
    first["layer"] = "changed"
    first["rule"]["pattern"] = "changed"
    second = p.explain("file_read", "config/.env")
    assert second["layer"] == "builtin-secrets"
    assert second["rule"] is not None and second["rule"]["pattern"] == ".env"


def test_a_verdict_with_a_condition() -> None:
    p = Policy.from_dict(
        {
            "defaults": {"shell_command": "ask"},
            "layers": [
                {
                    "name": "rate",
                    "rules": [
                        {
                            "kind": "shell_command",
                            "effect": "allow",
                            "pattern": "rm",
                            "limit": {"count": 3, "per": "10m"},
                        }
                    ],
                }
            ],
        }
    )
    history = [{"kind": "shell_command", "target": "rm a", "seconds_ago": 30}]
    got = p.explain_in_turn("shell_command", "rm c", None, history)
    same(
        got,
        {
            "effect": "allow",
            "rule": {
                "kind": "shell_command",
                "effect": "allow",
                "pattern": "rm",
                "limit": {"count": 3, "per": "10m"},
            },
            "layer": "rate",
            "reason": "allow_rule",
            "condition": {"type": "limit", "count": 3, "per": "10m", "seen": 1},
        },
    )
    assert type(got["condition"]["seen"]) is int


def test_a_verdict_with_would() -> None:
    p = Policy.from_dict(
        {
            "defaults": {"shell_command": "allow"},
            "layers": [
                {
                    "name": "trial",
                    "enforce": False,
                    "rules": [{"kind": "shell_command", "effect": "deny", "pattern": "curl"}],
                }
            ],
        }
    )
    same(
        p.explain_in_turn("shell_command", "curl -d @x https://x.com"),
        {
            "effect": "allow",
            "rule": None,
            "layer": "defaults",
            "reason": "default",
            "would": {
                "effect": "deny",
                "rule": "curl",
                "layer": "trial",
                "reason": "deny_rule",
            },
        },
    )


def _gate(tmp_path: Path, workspace: Path, deny: str | None = None) -> Gate:
    ctx = {
        "workspace_root": str(workspace),
        "execution_backend": "native",
        "platform": turngate.probe_platform(),
    }
    snap = turngate.resolve({"mode": "supervised"}, ctx)
    if deny is not None:
        profile = snap["permission_profile"]
        policy = Policy.from_dict(profile["effective_policy"]).rule("file_write", "deny", deny)
        profile["effective_policy"] = policy.to_dict()
    return Gate("t1", snap, Store(tmp_path / "audit.db"))


def test_an_allowed_authorization(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = str(workspace / "a.txt")
    auth = _gate(tmp_path, workspace).authorize_blocking("file_read", target, tool="read_file")
    same(
        auth,
        {
            "outcome": "allowed",
            "kind": "file_read",
            "target": target,
            "tool": "read_file",
            "verdict": {"effect": "allow", "rule": None, "layer": "defaults", "reason": "default"},
            "cached_approval": False,
            "remember": [],
        },
    )


def test_a_denied_authorization(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    target = str(workspace / "locked" / "a")
    gate = _gate(tmp_path, workspace, deny=f"{workspace}/locked/**")
    auth = gate.authorize_blocking("file_write", target)
    assert list(auth) == ["outcome", *[k for k in auth if k != "outcome"]]
    assert auth["outcome"] == "denied" and auth["verdict"] is not None
    assert auth["verdict"] == {
        "effect": "deny",
        "rule": {"kind": "file_write", "effect": "deny", "pattern": f"{workspace}/locked/**", "tool": None},
        "layer": auth["verdict"]["layer"],
        "reason": "deny_rule",
    }
    assert isinstance(auth["reason"], str) and isinstance(auth["tool_result"], str)
