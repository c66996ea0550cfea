"""The guarded tools (``Gate.read_file``, ``write_file``, ``edit_file``, ``run_shell``,
``fetch_url``) and the one-line turn (:func:`turn`).

Every decision, text and file operation is the core's (``bindings/src/tools.rs``); this module
gives the tools their Python signatures and does the one thing the core leaves to the
language: ``fetch_url``'s HTTP exchange, over a connection to an address the core vetted (the
name is resolved once, by the core; TLS verifies the URL's host with this Python's trust store,
SNI included). Redirects are reported, never followed.
"""

from __future__ import annotations

# The tool methods are made by module functions (`_awaitable`, `_blocking`) that call the
# mixin's protected helpers.
# pyright: reportPrivateUsage=false

import asyncio
import http.client
import inspect
import os
import socket
import ssl
import time
import types
import uuid
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Coroutine,
    Mapping,
    NamedTuple,
    Optional,
    TypeVar,
    Union,
    cast,
)

from ._turngate import Decision, InvalidInput, Policy, Store, TurnGateError
from ._turngate import _default_store_path, _fetch_done, _fetch_failed, _turn_snapshot
from ._types import ApprovalAnswer, SpawnResult, ToolOutcome

if TYPE_CHECKING:
    from typing_extensions import Concatenate, ParamSpec, Self

    from ._guard import Gate

    _P = ParamSpec("_P")

_T = TypeVar("_T")

_PathLike = Union[str, "os.PathLike[str]"]
OnOutput = Callable[[str, bytes], Any]

#: The default cap of a ``fetch_url`` body (bytes).
FETCH_MAX_BYTES = 1 << 20
#: The default ``fetch_url`` timeout (milliseconds).
FETCH_TIMEOUT_MS = 30_000


def _outcome(step: dict[str, Any]) -> ToolOutcome:
    step = dict(step)
    step.pop("step", None)
    return cast(ToolOutcome, step)


def _content(content: Union[str, bytes]) -> tuple[Optional[bytes], Optional[str]]:
    if isinstance(content, bytes):
        return content, None
    if isinstance(content, str):
        return None, content
    raise TypeError(f"content must be str or bytes, not {type(content).__name__}")


def _stdin(stdin: Union[str, bytes, None]) -> Optional[bytes]:
    if stdin is None or isinstance(stdin, bytes):
        return stdin
    if isinstance(stdin, str):
        return stdin.encode()
    raise TypeError(f"stdin must be str or bytes, not {type(stdin).__name__}")


def _body(body: Union[str, bytes, None]) -> Optional[bytes]:
    """The request body as exact bytes, read once (a subclass's overrides are not called)."""
    if body is None:
        return None
    if isinstance(body, str):
        return str.encode(body)
    if isinstance(body, (bytes, bytearray, memoryview)):
        return memoryview(body).tobytes()
    raise TypeError(f"body must be str or bytes, not {type(body).__name__}")


def _headers(headers: Optional[Mapping[str, str]]) -> Optional[dict[str, Any]]:
    """The caller's headers, read once, for the core to check (it refuses the ones the tool
    sets itself, and any line break)."""
    if headers is None:
        return None
    if not isinstance(headers, Mapping):
        raise TypeError(f"headers must be a mapping of str to str, not {type(headers).__name__}")
    return dict(headers.items())


def _http(plan: dict[str, Any], data: Optional[bytes], timeout_ms: Optional[int]) -> ToolOutcome:
    """The HTTP exchange of an allowed fetch, to a vetted address only: the method and the
    headers are the plan's, as the core checked them, never the caller's objects again.
    ``timeout_ms`` bounds the whole exchange (a server that drips forever is cut off), and
    reading stops at the cap."""
    url: str = plan["url"]
    ms = timeout_ms if timeout_ms is not None else FETCH_TIMEOUT_MS
    deadline = time.monotonic() + ms / 1000

    def left() -> float:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"timed out after {ms} ms")
        return remaining

    sock: Optional[socket.socket] = None
    errors: list[str] = []
    for addr in plan["addrs"]:
        ip, _, port = addr.rpartition(":")
        try:
            sock = socket.create_connection((ip.strip("[]"), int(port)), timeout=left())
            break
        except OSError as e:
            errors.append(f"{addr}: {e}")
    if sock is None:
        return cast(
            ToolOutcome,
            _fetch_failed(url, f"could not connect to {plan['host']} ({'; '.join(errors)})"),
        )
    try:
        if plan["scheme"] == "https":
            # The certificate is checked for the URL's host (SNI too), not the address.
            sock.settimeout(left())
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=plan["host"])
        conn = http.client.HTTPConnection(plan["host"], plan["port"], timeout=left())
        conn.sock = sock  # the connection to the vetted address: http.client never resolves
        headers = {h["name"]: h["value"] for h in plan["headers"]}
        sock.settimeout(left())
        conn.request(plan["method"], plan["path"], body=data, headers=headers)
        resp = conn.getresponse()
        raw = bytearray()
        while len(raw) <= FETCH_MAX_BYTES:
            sock.settimeout(left())
            chunk = resp.read1(FETCH_MAX_BYTES + 1 - len(raw))
            if not chunk:
                break
            raw += chunk
        conn.close()
    except (OSError, http.client.HTTPException, ValueError) as e:
        sock.close()
        # Every socket timeout is what was left of the deadline: say which deadline.
        timed_out = isinstance(e, TimeoutError)
        why = f"timed out after {ms} ms" if timed_out else f"{type(e).__name__}: {e}"
        return cast(ToolOutcome, _fetch_failed(url, why))
    truncated = len(raw) > FETCH_MAX_BYTES
    return cast(
        ToolOutcome,
        _fetch_done(
            url, resp.status, bytes(raw[:FETCH_MAX_BYTES]), truncated, resp.getheader("Location")
        ),
    )


class _Call(NamedTuple):
    """A guarded tool's call as the core takes it (``Gate._tool(name, *data, **kwargs)``) and
    ``then``: what runs on an allowed ``connect`` step (``fetch_url``'s HTTP exchange)."""

    name: str
    data: tuple[Any, ...]
    kwargs: dict[str, Any]
    then: Optional[Callable[[dict[str, Any]], ToolOutcome]] = None


def _awaitable(
    plan: Callable[_P, _Call],
) -> Callable[Concatenate[ToolsMixin, _P], Coroutine[Any, Any, ToolOutcome]]:
    """The awaitable tool method whose arguments ``plan`` turns into its call."""

    parse = _under(plan, "")

    async def method(self: ToolsMixin, /, *args: _P.args, **kwargs: _P.kwargs) -> ToolOutcome:
        self._open()
        call = parse(*args, **kwargs)
        step = await self._tool(call.name, *call.data, **call.kwargs)
        if call.then is None or step["step"] == "done":
            return _outcome(step)
        return await asyncio.to_thread(call.then, step)

    return _named(method, plan, "", plan.__doc__)


def _blocking(plan: Callable[_P, _Call]) -> Callable[Concatenate[ToolsMixin, _P], ToolOutcome]:
    """The blocking twin (``<tool>_blocking``) of ``plan``'s awaitable tool method."""

    parse = _under(plan, "_blocking")

    def method(self: ToolsMixin, /, *args: _P.args, **kwargs: _P.kwargs) -> ToolOutcome:
        self._open()
        call = parse(*args, **kwargs)
        step = self._tool_blocking(call.name, *call.data, **call.kwargs)
        if call.then is None or step["step"] == "done":
            return _outcome(step)
        return call.then(step)

    name = plan.__name__.lstrip("_")
    return _named(method, plan, "_blocking", f":meth:`{name}`, blocking.")


def _under(plan: Callable[_P, _Call], suffix: str) -> Callable[_P, _Call]:
    """A copy of ``plan`` under its method's name, so that a wrong call's ``TypeError`` names
    the method the caller called (``ToolsMixin.read_file() got an unexpected keyword argument
    'x'``), not the private plan function."""
    fn = types.FunctionType(
        plan.__code__, plan.__globals__, plan.__name__, plan.__defaults__, plan.__closure__
    )
    fn.__kwdefaults__ = plan.__kwdefaults__
    fn.__qualname__ = f"ToolsMixin.{plan.__name__.lstrip('_')}{suffix}"
    return cast("Callable[_P, _Call]", fn)


def _named(method: _T, plan: Callable[..., _Call], suffix: str, doc: Optional[str]) -> _T:
    """``method`` named, documented and signed as the tool ``plan`` declares (``help()`` and
    ``inspect.signature`` show the tool's own arguments)."""
    fn = cast(Any, method)
    fn.__name__ = plan.__name__.lstrip("_") + suffix
    fn.__qualname__ = f"ToolsMixin.{fn.__name__}"
    fn.__doc__ = doc
    sig = inspect.signature(plan)
    this = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
    fn.__signature__ = sig.replace(
        parameters=[this, *sig.parameters.values()], return_annotation="ToolOutcome"
    )
    return method


# ---- each tool's arguments, declared once for the awaitable method and its blocking twin ----


def _read_file(
    path: _PathLike,
    *,
    item_id: Optional[str] = None,
    tool: Optional[str] = None,
    approval: Optional[ApprovalAnswer] = None,
    max_bytes: Optional[int] = None,
) -> _Call:
    """Read a file through the gate (relative paths against the snapshot's cwd), opened
    race-free; up to ``max_bytes`` (default 1 MiB) as text in ``content``."""
    args = dict(path=path, item_id=item_id, tool=tool, approval=approval, max_bytes=max_bytes)
    return _Call("read_file", (), args)


def _write_file(
    path: _PathLike,
    content: Union[str, bytes],
    *,
    item_id: Optional[str] = None,
    tool: Optional[str] = None,
    approval: Optional[ApprovalAnswer] = None,
) -> _Call:
    """Write a whole file through the gate: atomically (a temporary file beside it,
    renamed over it) and race-free beneath its root."""
    data, text = _content(content)
    args = dict(path=path, content=text, item_id=item_id, tool=tool, approval=approval)
    return _Call("write_file", (data,), args)


def _edit_file(
    path: _PathLike,
    old: str,
    new: str,
    *,
    item_id: Optional[str] = None,
    tool: Optional[str] = None,
    approval: Optional[ApprovalAnswer] = None,
) -> _Call:
    """Replace exactly one occurrence of ``old`` with ``new``: authorized as a write and
    judged as a read too; zero or several occurrences fail and write nothing."""
    args = dict(path=path, old=old, new=new, item_id=item_id, tool=tool, approval=approval)
    return _Call("edit_file", (), args)


def _run_shell(
    command: str,
    *,
    env: Optional[Mapping[str, str]] = None,
    timeout_ms: Optional[int] = None,
    stdin: Union[str, bytes, None] = None,
    cwd: Optional[_PathLike] = None,
    on_output: Optional[OnOutput] = None,
    item_id: Optional[str] = None,
    tool: Optional[str] = None,
    approval: Optional[ApprovalAnswer] = None,
) -> _Call:
    """Run a shell command through the gate, under the snapshot's sandbox. ``env`` is
    added to the environment (then filtered by the snapshot's env policy), ``timeout_ms``
    is capped by the snapshot's, ``on_output(stream, chunk)`` gets every chunk of output
    (on the event loop; from a worker thread in ``run_shell_blocking``). A program that is
    not there is exit 127, not an exception."""
    args = dict(
        command=command,
        env=dict(env) if env is not None else None,
        timeout_ms=timeout_ms,
        cwd=cwd,
        item_id=item_id,
        tool=tool,
        approval=approval,
    )
    return _Call("run_shell", (_stdin(stdin), on_output), args)


def _fetch_url(
    url: str,
    *,
    method: str = "GET",
    headers: Optional[Mapping[str, str]] = None,
    body: Union[str, bytes, None] = None,
    timeout_ms: Optional[int] = None,
    item_id: Optional[str] = None,
    tool: Optional[str] = None,
    approval: Optional[ApprovalAnswer] = None,
) -> _Call:
    """Fetch an http(s) URL through the gate: the core checks the host, resolves it once
    and vets the addresses; the request goes to one of those only. A 3xx is reported
    with its location, not followed (fetch it again: it is checked again).

    ``method`` (letters only, not ``CONNECT``) and ``headers`` are checked by the core before
    the call is decided and sent exactly as checked; ``Host``, ``Content-Length``,
    ``Transfer-Encoding``, ``Expect`` and the hop-by-hop headers are the tool's own, and a
    value with a line break or a non-ASCII character is refused (:class:`InvalidInput`,
    naming it).
    ``body`` is read once, as exact bytes, and framed by the tool; ``timeout_ms`` (30 s when
    absent) bounds the whole exchange, and the response is read up to 1 MiB."""
    data = _body(body)
    if timeout_ms is not None:
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int):
            raise TypeError(f"timeout_ms must be an int (milliseconds), not {timeout_ms!r}")
        if timeout_ms <= 0:
            # InvalidInput, as the core's refusals: an adapter gives the model its text.
            raise InvalidInput(f"fetch_url: timeout_ms must be positive, not {timeout_ms}")
    args = dict(
        url=url,
        method=method,
        headers=_headers(headers),
        item_id=item_id,
        tool=tool,
        approval=approval,
    )
    then: Callable[[dict[str, Any]], ToolOutcome] = lambda step: _http(step, data, timeout_ms)
    return _Call("fetch_url", (), args, then)


class ToolsMixin:
    """The guarded tools of :class:`turngate.Gate` (mixed into it)."""

    _tool: Callable[..., Any]
    _tool_blocking: Callable[..., Any]

    def _open(self) -> None:
        if getattr(self, "_closed", False):
            raise TurnGateError("this turn's gate is closed")

    read_file = _awaitable(_read_file)
    read_file_blocking = _blocking(_read_file)
    write_file = _awaitable(_write_file)
    write_file_blocking = _blocking(_write_file)
    edit_file = _awaitable(_edit_file)
    edit_file_blocking = _blocking(_edit_file)
    run_shell = _awaitable(_run_shell)
    run_shell_blocking = _blocking(_run_shell)
    fetch_url = _awaitable(_fetch_url)
    fetch_url_blocking = _blocking(_fetch_url)

    # ---- the turn's lifetime -----------------------------------------------------------------

    def close(self) -> None:
        """End the turn: the guarded tools refuse from now on (``TurnGateError``). Idempotent."""
        self._closed = True

    def __enter__(self) -> "Self":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "Self":
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


def turn(
    workspace: _PathLike,
    mode: str = "auto_accept_edits",
    *,
    store: Union[Store, _PathLike, None] = None,
    approver: Any = None,
    policy: Union[Policy, Mapping[str, Any], None] = None,
    turn_id: Optional[str] = None,
) -> "Gate":
    """A turn in one line: the snapshot of ``mode`` over ``workspace`` on this platform, a
    store and a gate. ``store=None`` is the default durable store, the CLI's
    (``$XDG_STATE_HOME/turngate/audit.db``, else ``~/.local/state/turngate/audit.db``); a path
    opens that one. ``approver`` is ``Gate``'s (default ``"deny_all"``; adapters use
    ``"defer_all"``). ``policy`` (a :class:`Policy` or its dict) is the selection's policy.
    Returns a :class:`turngate.Gate`, usable as ``with``/``async with``."""
    from ._guard import Gate as _Gate

    if isinstance(policy, Policy):
        policy_doc: Optional[Mapping[str, Any]] = policy.to_dict()
    else:
        policy_doc = policy
    snapshot = _turn_snapshot(workspace, mode, dict(policy_doc) if policy_doc is not None else None)
    if store is None:
        store = Store(_default_store_path())
    elif not isinstance(store, Store):
        store = Store(os.fspath(store))
    return _Gate(turn_id or f"turn-{uuid.uuid4().hex[:16]}", snapshot, store, approver)


__all__ = ["ToolsMixin", "turn", "Decision", "SpawnResult"]
