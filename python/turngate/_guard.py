"""``Gate.guard``: put an ordinary Python tool function behind the gate."""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable, Literal, Optional, TypeVar, cast

from ._turngate import Authorization, PermissionDenied
from ._turngate import Gate as _Gate

F = TypeVar("F", bound=Callable[..., Any])


def _refusal(auth: Authorization) -> str:
    # The core words every refusal (a denial or a deferral) for the model.
    return auth.tool_result or auth.reason or auth.outcome


def _raise(auth: Authorization) -> None:
    err = PermissionDenied(_refusal(auth))
    err.reason = auth.reason or auth.outcome
    err.tool_result = _refusal(auth)
    err.kind = auth.kind
    err.target = auth.target
    raise err


class Gate(_Gate):
    """The gate of one turn: every side-effecting tool call goes through it.

    See the extension's ``Gate`` for the methods; this subclass adds :meth:`guard`.
    """

    def guard(
        self,
        kind: str,
        target: Callable[..., str],
        *,
        tool: Optional[str] = None,
        on_deny: Literal["return", "raise"] = "return",
    ) -> Callable[[F], F]:
        """Decorate a tool function so every call is authorized first.

        ``target`` receives the call's arguments by name (defaults applied) and returns the
        action's target, e.g. ``target=lambda path, **_: path``. ``tool`` names the tool in
        rules and audit rows (default: the function's name).

        When the gate allows the call, the function runs with its own arguments and its
        result is returned. When it refuses (denied, or deferred for later), the function
        does not run and the decorator, by default (``on_deny="return"``), **returns the
        denial's ``tool_result``** - a string the model can read and adapt to, which is what
        an agent framework expects from a tool. With ``on_deny="raise"`` it raises
        :class:`PermissionDenied` instead (``reason`` and ``tool_result`` attached).

        An ``async def`` tool is authorized with ``await gate.authorize(...)``; a plain
        function with ``gate.authorize_blocking(...)`` (so call it from a worker thread, not
        from inside a running event loop - agent frameworks run sync tools in threads).
        """
        if on_deny not in ("return", "raise"):
            raise ValueError(f"on_deny must be 'return' or 'raise', not {on_deny!r}")

        def decorate(fn: F) -> F:
            name = tool or fn.__name__
            sig = inspect.signature(fn)

            def target_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
                bound = sig.bind(*args, **kwargs)
                bound.apply_defaults()
                t = target(**bound.arguments)
                if not isinstance(t, str):
                    t = str(t)
                return t

            def refuse(auth: Authorization) -> Any:
                if on_deny == "raise":
                    _raise(auth)
                return _refusal(auth)

            if inspect.iscoroutinefunction(fn):

                @functools.wraps(fn)
                async def guarded_async(*args: Any, **kwargs: Any) -> Any:
                    auth = await self.authorize(kind, target_of(args, kwargs), tool=name)
                    if not auth.allowed:
                        return refuse(auth)
                    return await fn(*args, **kwargs)

                return cast(F, guarded_async)

            @functools.wraps(fn)
            def guarded(*args: Any, **kwargs: Any) -> Any:
                auth = self.authorize_blocking(kind, target_of(args, kwargs), tool=name)
                if not auth.allowed:
                    return refuse(auth)
                return fn(*args, **kwargs)

            return cast(F, guarded)

        return decorate
