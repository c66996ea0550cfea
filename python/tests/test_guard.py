"""``Gate.guard``: the guarded function runs the action that was decided, or nothing.

A file tool receives the resolved absolute path the gate checked (a relative path resolves
against the snapshot's ``sandbox.cwd``, never the process's cwd); a reviewer's modified action
replaces the original; a modified action the policy denies, or of another kind, runs nothing.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any, Callable

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


def _deny(snap: JSON, kind: str, pattern: str) -> JSON:
    profile = snap["permission_profile"]
    policy = turngate.Policy.from_dict(profile["effective_policy"]).rule(kind, "deny", pattern)
    profile["effective_policy"] = policy.to_dict()
    return snap


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    w = (tmp_path / "ws").resolve()
    w.mkdir()
    return w


@pytest.fixture
def elsewhere(tmp_path: Path) -> Path:
    e = (tmp_path / "elsewhere").resolve()
    e.mkdir()
    return e


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "audit.db")


def _writer(gate: Gate, seen: list[Any], **guard: Any) -> Callable[..., Any]:
    @gate.guard(kind="file_write", **guard)
    def write_file(path: Any, text: str = "new") -> str:
        seen.append(path)
        Path(path).write_text(text)
        return "ok"

    return write_file


# ---- the path that was checked --------------------------------------------------------------


def test_a_relative_path_is_written_inside_the_workspace_after_chdir_away(
    workspace: Path, elsewhere: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    seen: list[Any] = []
    write_file = _writer(gate, seen, target="path")
    monkeypatch.chdir(elsewhere)
    assert write_file("notes.txt", text="hi") == "ok"
    assert (workspace / "notes.txt").read_text() == "hi"
    assert not (elsewhere / "notes.txt").exists()
    assert seen == [str(workspace / "notes.txt")]


def test_the_checked_path_replaces_a_positional_argument_and_keeps_its_type(
    workspace: Path, elsewhere: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    seen: list[Any] = []
    write_file = _writer(gate, seen, target="path")
    (workspace / "sub").mkdir()
    monkeypatch.chdir(elsewhere)
    assert write_file(Path("sub/../sub/./n.txt"), "x") == "ok"
    assert seen == [workspace / "sub" / "n.txt"] and isinstance(seen[0], Path)
    assert (workspace / "sub" / "n.txt").read_text() == "x"
    # A second call is authorized again and receives its own checked path.
    assert write_file("m.txt", "y") == "ok"
    assert seen[1] == str(workspace / "m.txt")
    assert not (elsewhere / "m.txt").exists()


def test_a_symlink_inside_the_workspace_is_passed_resolved(
    workspace: Path, store: Store
) -> None:
    (workspace / "real").mkdir()
    (workspace / "link").symlink_to(workspace / "real")
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    seen: list[Any] = []
    write_file = _writer(gate, seen, target="path")
    assert write_file(str(workspace / "link" / "a.txt")) == "ok"
    assert seen == [str(workspace / "real" / "a.txt")]


def test_a_path_swapped_for_a_symlink_while_the_approver_decides_runs_nothing(
    workspace: Path, store: Store
) -> None:
    target, other = workspace / "a.txt", workspace / "other.txt"
    other.write_text("other")

    def approver(ask: JSON) -> Decision:
        # What an attacker racing the check would do: after the check, before the write.
        target.symlink_to(other)
        return Decision.approve()

    gate = Gate("t", _snapshot(workspace), store, approver)
    seen: list[Any] = []
    refused = _writer(gate, seen, target="path")(str(target))
    assert refused.startswith("Permission denied by turngate") and "now resolves" in refused
    assert seen == [] and other.read_text() == "other"


class _Flip(os.PathLike[str]):
    """A path that names ``first`` once, then ``then``: what a caller racing the guard would
    pass so that the function's own ``open()`` reads a path that was never checked."""

    def __init__(self, first: Path, then: Path) -> None:
        self.paths = [str(first), str(then)]
        self.reads = 0

    def __fspath__(self) -> str:
        self.reads += 1
        return self.paths[0] if self.reads == 1 else self.paths[1]

    def __str__(self) -> str:
        return self.__fspath__()


class _FlipPath(type(Path())):  # type: ignore[misc]
    """A ``pathlib`` subclass that flips the same way: rebuilding it with the checked path
    must not rebuild the flip."""

    reads = 0

    def __fspath__(self) -> str:
        type(self).reads += 1
        return str(self) if type(self).reads == 1 else "/etc/hostname"


def _reader(gate: Gate, seen: list[Any]) -> Callable[..., Any]:
    @gate.guard(kind="file_read", target="path")
    def read_file(path: Any) -> str:
        seen.append(path)
        with open(path) as f:
            return f.read()

    return read_file


def test_the_function_gets_the_checked_path_not_a_second_fspath(
    workspace: Path, elsewhere: Path, store: Store
) -> None:
    (workspace / "ok.txt").write_text("fine")
    (elsewhere / "secret.txt").write_text("SECRET")
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    seen: list[Any] = []
    out = _reader(gate, seen)(_Flip(workspace / "ok.txt", elsewhere / "secret.txt"))
    assert out == "fine"
    # The function received the checked text itself, not the caller's object to read again.
    assert seen == [str(workspace / "ok.txt")]


def test_a_pathlib_subclass_is_not_rebuilt_around_the_checked_path(
    workspace: Path, store: Store
) -> None:
    (workspace / "ok.txt").write_text("fine")
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    seen: list[Any] = []
    out = _reader(gate, seen)(_FlipPath(workspace / "ok.txt"))
    assert out == "fine"
    assert seen == [str(workspace / "ok.txt")] and type(seen[0]) is str


def test_a_str_subclass_reaches_the_function_as_the_plain_checked_str(
    workspace: Path, store: Store
) -> None:
    class Sneaky(str):
        def __fspath__(self) -> str:
            return "/etc/hostname"

    (workspace / "ok.txt").write_text("fine")
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    seen: list[Any] = []
    assert _reader(gate, seen)(Sneaky(str(workspace / "ok.txt"))) == "fine"
    assert seen == [str(workspace / "ok.txt")] and type(seen[0]) is str


@pytest.mark.parametrize("escape", ["../outside.txt", "link_out/x.txt", "ABSOLUTE"])
def test_paths_leaving_the_workspace_run_nothing(
    workspace: Path, elsewhere: Path, store: Store, monkeypatch: pytest.MonkeyPatch, escape: str
) -> None:
    (workspace / "link_out").symlink_to(elsewhere)
    target = str(elsewhere / "abs.txt") if escape == "ABSOLUTE" else escape
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    seen: list[Any] = []
    write_file = _writer(gate, seen, target="path")
    monkeypatch.chdir(elsewhere)
    refused = write_file(target)
    assert refused.startswith("Permission denied by turngate"), refused
    assert seen == [] and sorted(os.listdir(elsewhere)) == []


def test_a_callable_target_runs_only_the_exact_checked_path(
    workspace: Path, elsewhere: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    seen: list[Any] = []
    write_file = _writer(gate, seen, target=lambda path, **_: path)
    monkeypatch.chdir(elsewhere)
    refused = write_file("notes.txt")
    # The function cannot be handed the checked path, so it does not run; the model is told
    # which path the gate would allow.
    assert refused.startswith("Permission denied by turngate"), refused
    assert str(workspace / "notes.txt") in refused
    assert seen == [] and not (elsewhere / "notes.txt").exists()
    assert not (workspace / "notes.txt").exists()
    # Called with the checked absolute path itself, it runs.
    assert write_file(str(workspace / "notes.txt")) == "ok"
    assert (workspace / "notes.txt").read_text() == "new"


def test_a_callable_target_refusal_raises_when_asked_to(
    workspace: Path, elsewhere: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    seen: list[Any] = []
    write_file = _writer(gate, seen, target=lambda path, **_: path, on_deny="raise")
    monkeypatch.chdir(elsewhere)
    with pytest.raises(turngate.PermissionDenied) as e:
        write_file("notes.txt")
    assert e.value.kind == "file_write" and e.value.target == "notes.txt"
    assert str(workspace / "notes.txt") in e.value.tool_result
    assert seen == []


def test_a_target_name_that_is_not_a_parameter_is_refused_at_decoration(
    workspace: Path, store: Store
) -> None:
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    with pytest.raises(ValueError, match="no parameter named 'file'"):
        _writer(gate, [], target="file")
    with pytest.raises(ValueError, match="no parameter named 'kw'"):

        @gate.guard(kind="file_write", target="kw")
        def f(**kw: Any) -> None: ...

    with pytest.raises(TypeError, match="'path' is None"):
        _writer(gate, [], target="path")(None)
    with pytest.raises(TypeError, match="target must be"):
        gate.guard(kind="file_write", target=3)  # type: ignore[arg-type]


# ---- a reviewer's modified action -----------------------------------------------------------


def test_a_modified_approval_writes_the_modified_path_and_leaves_the_original(
    workspace: Path, store: Store
) -> None:
    original, modified = workspace / "a.txt", workspace / "b.txt"
    original.write_text("original")
    gate = Gate(
        "t", _snapshot(workspace), store,
        lambda ask: Decision.approve(modified=("file_write", str(modified))),
    )
    seen: list[Any] = []
    write_file = _writer(gate, seen, target="path")
    assert write_file(str(original)) == "ok"
    assert original.read_text() == "original"
    assert modified.read_text() == "new"
    assert seen == [str(modified)]


def test_a_relative_modified_path_resolves_in_the_workspace(
    workspace: Path, elsewhere: Path, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(
        "t", _snapshot(workspace), store,
        lambda ask: Decision.approve(modified={"kind": "file_write", "target": "b.txt"}),
    )
    seen: list[Any] = []
    write_file = _writer(gate, seen, target="path")
    monkeypatch.chdir(elsewhere)
    assert write_file("a.txt") == "ok"
    assert seen == [str(workspace / "b.txt")]
    assert (workspace / "b.txt").exists() and not (workspace / "a.txt").exists()
    assert os.listdir(elsewhere) == []


def test_a_modified_approval_with_a_callable_target_runs_nothing(
    workspace: Path, store: Store
) -> None:
    original = workspace / "a.txt"
    original.write_text("original")
    gate = Gate(
        "t", _snapshot(workspace), store,
        lambda ask: Decision.approve(modified=("file_write", str(workspace / "b.txt"))),
    )
    seen: list[Any] = []
    write_file = _writer(gate, seen, target=lambda path, **_: path)
    refused = write_file(str(original))
    assert refused.startswith("Permission denied by turngate") and "b.txt" in refused
    assert seen == [] and original.read_text() == "original"
    assert not (workspace / "b.txt").exists()


@pytest.mark.parametrize("target", ["ABS", ".env"])
def test_a_modified_approval_whose_target_is_denied_runs_nothing(
    workspace: Path, store: Store, target: str
) -> None:
    original = workspace / "a.txt"
    original.write_text("original")
    denied = str(workspace / ".env") if target == "ABS" else target
    snap = _deny(_snapshot(workspace), "file_write", "**/.env")
    gate = Gate(
        "t", snap, store, lambda ask: Decision.approve(modified=("file_write", denied))
    )
    seen: list[Any] = []
    write_file = _writer(gate, seen, target="path")
    refused = write_file(str(original))
    assert refused.startswith("Permission denied by turngate"), refused
    assert seen == [] and original.read_text() == "original"
    assert not (workspace / ".env").exists()


def test_a_modified_approval_outside_the_workspace_runs_nothing(
    workspace: Path, elsewhere: Path, store: Store
) -> None:
    original = workspace / "a.txt"
    original.write_text("original")
    gate = Gate(
        "t", _snapshot(workspace), store,
        lambda ask: Decision.approve(modified=("file_write", str(elsewhere / "x.txt"))),
    )
    seen: list[Any] = []
    refused = _writer(gate, seen, target="path")(str(original))
    assert refused.startswith("Permission denied by turngate"), refused
    assert seen == [] and os.listdir(elsewhere) == [] and original.read_text() == "original"


@pytest.mark.parametrize(
    "modified",
    [("shell_command", "touch pwned"), ("file_read", "a.txt"), ("network", "example.com:443")],
)
def test_a_modified_approval_of_another_kind_runs_nothing(
    workspace: Path, store: Store, modified: tuple[str, str]
) -> None:
    original = workspace / "a.txt"
    original.write_text("original")
    gate = Gate("t", _snapshot(workspace), store, lambda ask: Decision.approve(modified=modified))
    seen: list[Any] = []
    write_file = _writer(gate, seen, target="path")
    refused = write_file(str(original))
    assert refused.startswith("Permission denied by turngate"), refused
    assert "performs only file_write" in refused
    assert seen == [] and original.read_text() == "original"
    with pytest.raises(turngate.PermissionDenied) as e:
        _writer(gate, seen, target="path", on_deny="raise")(str(original))
    assert e.value.kind == modified[0]
    assert seen == []


def test_an_async_tool_runs_the_modified_path(workspace: Path, store: Store) -> None:
    original, modified = workspace / "a.txt", workspace / "b.txt"
    original.write_text("original")

    async def approver(ask: JSON) -> Decision:
        return Decision.approve(modified=("file_write", "b.txt"))

    gate = Gate("t", _snapshot(workspace), store, approver)
    seen: list[Any] = []

    @gate.guard(kind="file_write", target="path")
    async def write_file(path: str, text: str = "new") -> str:
        seen.append(path)
        Path(path).write_text(text)
        return "ok"

    assert asyncio.run(write_file(str(original))) == "ok"
    assert seen == [str(modified)] and original.read_text() == "original"
    assert modified.read_text() == "new"


def test_a_modified_shell_command_replaces_the_named_argument(
    workspace: Path, store: Store
) -> None:
    gate = Gate(
        "t", _snapshot(workspace), store,
        lambda ask: Decision.approve(modified=("shell_command", "echo safer")),
    )
    seen: list[str] = []

    @gate.guard(kind="shell_command", target="cmd")
    def run(cmd: str) -> str:
        seen.append(cmd)
        return "ran"

    @gate.guard(kind="shell_command", target=lambda cmd: cmd)
    def run_opaque(cmd: str) -> str:
        seen.append(cmd)
        return "ran"

    assert run("echo original") == "ran"
    assert seen == ["echo safer"]
    assert run_opaque("echo original").startswith("Permission denied by turngate")
    assert seen == ["echo safer"]


def test_a_callable_target_refuses_an_object_the_function_would_read_again(
    workspace: Path, elsewhere: Path, store: Store
) -> None:
    (workspace / "ok.txt").write_text("fine")
    (elsewhere / "secret.txt").write_text("SECRET")
    gate = Gate("t", _snapshot(workspace), store, "approve_all")
    seen: list[Any] = []

    @gate.guard(kind="file_read", target=lambda path: path)
    def read_file(path: Any) -> str:
        seen.append(path)
        with open(path) as f:
            return f.read()

    with pytest.raises(TypeError, match=r"read_file: target= returned a _Flip"):
        read_file(_Flip(workspace / "ok.txt", elsewhere / "secret.txt"))
    assert seen == []
    # Plain values still run.
    assert read_file(str(workspace / "ok.txt")) == "fine"
    assert read_file(workspace / "ok.txt") == "fine"


def test_an_approval_without_remember_runs_one_call_and_the_next_asks_again(
    workspace: Path, store: Store
) -> None:
    asks: list[JSON] = []

    def approver(ask: JSON) -> Decision:
        asks.append(ask)
        return Decision.approve() if len(asks) == 1 else Decision.deny("once was enough")

    gate = Gate("t", _snapshot(workspace), store, approver)
    seen: list[Any] = []
    write_file = _writer(gate, seen, target="path")
    assert write_file("a.txt", "1") == "ok"
    refused = write_file("a.txt", "2")
    assert refused.startswith("Permission denied by turngate") and "once was enough" in refused
    assert len(asks) == 2 and seen == [str(workspace / "a.txt")]
    assert (workspace / "a.txt").read_text() == "1"
