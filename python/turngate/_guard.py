"""``Gate.guard``: put an ordinary Python tool function behind the gate.

What runs is what was decided: a guarded function runs with the action the gate allowed, or
not at all. For a file kind the function receives the resolved absolute path the gate checked
(a relative path is resolved against the snapshot's ``sandbox.cwd``, never the process's cwd);
when a reviewer approved a *modified* action, the function runs that action instead. A guard
that cannot hand the function the allowed action refuses the call.
"""

from __future__ import annotations

import functools
import inspect
import os
import pathlib
from typing import Any, Callable, Literal, Optional, TypeVar, Union, cast

from ._turngate import PermissionDenied
from ._turngate import Gate as _Gate
from ._tools import ToolsMixin
from ._types import Authorization

F = TypeVar("F", bound=Callable[..., Any])

_FILE_KINDS = ("file_read", "file_write")


def _refusal(auth: Authorization) -> str:
    # The core words every refusal (a denial or a deferral) for the model.
    if auth["outcome"] == "allowed":
        return auth["outcome"]
    return auth["tool_result"] or auth["reason"] or auth["outcome"]


def _denied(tool_result: str, reason: str, kind: str, target: str) -> PermissionDenied:
    err = PermissionDenied(tool_result)
    err.reason = reason
    err.tool_result = tool_result
    err.kind = kind
    err.target = target
    return err


def _raise(auth: Authorization, kind: str, target: str) -> None:
    reason = auth["reason"] if auth["outcome"] != "allowed" else auth["outcome"]
    raise _denied(_refusal(auth), reason, kind, target)


class _Refused:
    """A refusal the guard itself makes after an allow it cannot carry out as decided."""

    def __init__(self, kind: str, target: str, reason: str) -> None:
        self.kind = kind
        self.target = target
        self.reason = reason
        # The same shape as the core's denial text, so a model reads every refusal alike.
        self.tool_result = (
            f"Permission denied by turngate: {kind} `{target}`: {reason}. "
            "Continue with an allowed alternative."
        )


def _text(value: Any) -> str:
    """The target's text, read once, as an exact ``str`` (``str.__str__`` copies a subclass,
    which could otherwise carry its own ``__fspath__`` or ``__str__`` on to the function)."""
    if isinstance(value, (str, bytes, os.PathLike)):
        return str.__str__(os.fsdecode(value))
    return str.__str__(str(value))


# pathlib's own classes, the only path types the guard rebuilds: a subclass (or any other
# PathLike) may compute its path anew on every read, so it would not stay the path checked.
_PATHLIB = {
    pathlib.PurePath,
    pathlib.PurePosixPath,
    pathlib.PureWindowsPath,
    pathlib.Path,
    pathlib.PosixPath,
    pathlib.WindowsPath,
}


def _like(original: Any, path: str) -> Any:
    """The checked ``path`` as a value that cannot change: a ``pathlib`` path when the caller
    passed one of pathlib's own classes, ``bytes`` for ``bytes``, and otherwise a plain ``str``
    (never the caller's object, whose ``__fspath__`` the function would call again)."""
    if type(original) in _PATHLIB:
        return type(original)(path)
    if isinstance(original, bytes):
        return os.fsencode(path)
    return path


class Gate(_Gate, ToolsMixin):
    """The gate of one turn: every side-effecting tool call goes through it.

    See the extension's ``Gate`` for the methods; this subclass adds :meth:`guard`, the
    guarded tools (``read_file``, ``write_file``, ``edit_file``, ``run_shell``,
    ``fetch_url``) and ``close()``/``with``/``async with`` (``turngate._tools``).
    """

    def guard(
        self,
        kind: str,
        target: Union[str, Callable[..., Any]],
        *,
        tool: Optional[str] = None,
        on_deny: Literal["return", "raise"] = "return",
    ) -> Callable[[F], F]:
        """Decorate a tool function so every call is authorized first, and runs as decided.

        ``target`` names the parameter that holds the action's target, e.g.
        ``target="path"``; the function then runs with that argument replaced by what the
        gate allowed: for ``file_read``/``file_write`` the resolved absolute path that was
        checked (a relative path is resolved against the snapshot's ``sandbox.cwd``, never the
        process's cwd), and when a reviewer approved a modified action, its target. It is
        passed as a plain ``str`` (``bytes`` for ``bytes``, the same class for one of
        pathlib's own path classes), never as the caller's object, which the function would
        read again. ``target``
        may instead be a callable of the call's arguments (by name, defaults applied) that
        returns the target, e.g. ``target=lambda path, **_: path``; the guard then cannot
        pass anything to the function, so it runs the function only when the allowed action
        is exactly the one the callable returned (for a file kind: an absolute path with no
        symlink, ``..`` or ``.`` left), and otherwise refuses the call, naming the path the
        gate would allow. ``tool`` names the tool in rules and audit rows (default: the
        function's name).

        A reviewer's modified action of another kind than ``kind``, or one the policy denies,
        never runs. When the gate refuses (denied, deferred for later, or an allow the guard
        cannot carry out as decided), the function does not run and the decorator, by default
        (``on_deny="return"``), **returns the refusal's ``tool_result``** - a string the model
        can read and adapt to, which is what an agent framework expects from a tool. With
        ``on_deny="raise"`` it raises :class:`PermissionDenied` instead (``reason`` and
        ``tool_result`` attached).

        An ``async def`` tool is authorized with ``await gate.authorize(...)``; a plain
        function with ``gate.authorize_blocking(...)`` (so call it from a worker thread, not
        from inside a running event loop - agent frameworks run sync tools in threads).
        """
        if on_deny not in ("return", "raise"):
            raise ValueError(f"on_deny must be 'return' or 'raise', not {on_deny!r}")
        if not isinstance(target, str) and not callable(target):
            raise TypeError(
                "target must be the name of the parameter holding the target, or a callable "
                f"of the call's arguments, not {target!r}"
            )

        def decorate(fn: F) -> F:
            name = tool or fn.__name__
            sig = inspect.signature(fn)
            param = target if isinstance(target, str) else None
            extract = None if isinstance(target, str) else target
            if param is not None:
                p = sig.parameters.get(param)
                if p is None or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                    raise ValueError(
                        f"target={param!r}: {fn.__name__} has no parameter named {param!r} "
                        "(name the parameter that holds the action's target)"
                    )

            def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> inspect.BoundArguments:
                bound = sig.bind(*args, **kwargs)
                bound.apply_defaults()
                return bound

            def requested(bound: inspect.BoundArguments) -> str:
                if extract is None:
                    value = bound.arguments[cast(str, param)]
                    if value is None:
                        raise TypeError(f"{fn.__name__}: the target argument {param!r} is None")
                    return _text(value)
                value = extract(**bound.arguments)
                if type(value) not in (str, bytes) and type(value) not in _PATHLIB:
                    # The function reads its own arguments, so the target must be a value
                    # that names one path however often it is read.
                    raise TypeError(
                        f"{fn.__name__}: target= returned a {type(value).__name__}; a callable "
                        "target must return a str, bytes or pathlib path (a PathLike or str "
                        "subclass may name another path when the function reads it again; "
                        "give target= the parameter's name to pass the checked path instead)"
                    )
                return _text(value)

            def refuse(auth: Union[Authorization, _Refused], value: str) -> Any:
                if isinstance(auth, _Refused):
                    if on_deny == "raise":
                        raise _denied(auth.tool_result, auth.reason, auth.kind, auth.target)
                    return auth.tool_result
                if on_deny == "raise":
                    _raise(auth, kind, value)
                return _refusal(auth)

            def decided(
                bound: inspect.BoundArguments, value: str, auth: Authorization
            ) -> Union[inspect.BoundArguments, Authorization, _Refused]:
                """The call to make for ``auth``: the arguments carrying the allowed action, or
                the refusal (the gate's, or the guard's when the arguments cannot carry it)."""
                if auth["outcome"] != "allowed":
                    return auth
                target = auth["target"]
                if auth["kind"] != kind:
                    return _Refused(
                        auth["kind"],
                        target,
                        f"the approved action is a {auth['kind']}, and {name} performs only "
                        f"{kind}; {name} did not run",
                    )
                if kind in _FILE_KINDS:
                    # The allowed target in its checked form: the core's canonical path (a
                    # reviewer's modified path may be relative, or name a symlink).
                    recheck = self.evaluate(kind, target, name)
                    verdict, allowed = recheck["verdict"], recheck["target"]
                    if verdict["effect"] == "deny" or not os.path.isabs(allowed):
                        return _Refused(
                            kind,
                            target,
                            f"the approved target is refused on re-check ({verdict['reason']}); "
                            f"{name} did not run",
                        )
                    if os.path.isabs(target) and allowed != os.path.normpath(target):
                        # The path approved no longer resolves to itself: a symlink was put
                        # in its way after the check.
                        return _Refused(
                            kind,
                            target,
                            f"the approved path now resolves to `{allowed}`; {name} did not run",
                        )
                    changed = value != allowed
                else:
                    allowed = target
                    changed = allowed != self.evaluate(kind, value, name)["target"]
                if param is not None:
                    # Always the checked text, changed or not: the caller's own object would
                    # be read again by the function, and may then name another path.
                    checked = allowed if changed else value
                    bound.arguments[param] = _like(bound.arguments[param], checked)
                    return bound
                if changed:
                    return _Refused(
                        kind,
                        value,
                        f"the gate allows `{allowed}`, which {name}'s guard cannot pass to it "
                        "(its target= is a callable, not a parameter name); call it again "
                        f"with `{allowed}`",
                    )
                return bound

            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                    bound = bind(args, kwargs)
                    value = requested(bound)
                    call = decided(bound, value, await self.authorize(kind, value, tool=name))
                    if not isinstance(call, inspect.BoundArguments):
                        return refuse(call, value)
                    return await fn(*call.args, **call.kwargs)

                return cast(F, guarded_async)

            @functools.wraps(fn)
            def guarded(*args: Any, **kwargs: Any) -> Any:
                bound = bind(args, kwargs)
                value = requested(bound)
                call = decided(bound, value, self.authorize_blocking(kind, value, tool=name))
                if not isinstance(call, inspect.BoundArguments):
                    return refuse(call, value)
                return fn(*call.args, **call.kwargs)

            return cast(F, guarded)

        return decorate
