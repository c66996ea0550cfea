"""A small client for `turngate serve` (the Turns API out of process, DESIGN §15).

Pure Python, no native code: it only carries JSON-RPC 2.0 over a Unix socket, a spawned
server's stdio, or HTTP (`POST /rpc`, calls only). Every decision is the server's. Params and
results are the protocol types as JSON (snake_case dicts)::

    from turngate.client import connect

    with connect(socket="/run/user/1000/turngate.sock") as c:
        turn = c.call("turn/start", {"profile": {"mode": "supervised"}, "workspace": "."})
        auth = c.call("turn/action/authorize",
                      {"turn_id": turn["turn_id"], "kind": "shell_command", "target": "make"})

Notifications (`turn/permission/request/opened`, `.../resolved`, `turn/event`) are queued
in arrival order; read them with :meth:`Client.notification`.
"""

from __future__ import annotations

import json
import queue
import socket as _socket
import subprocess
import threading
import urllib.error
import urllib.request
from typing import IO, Any, Callable, Dict, List, Optional, Sequence

__all__ = ["Client", "RpcError", "connect"]

Json = Dict[str, Any]


class RpcError(Exception):
    """A JSON-RPC error answered by the server; ``code`` is the JSON-RPC code."""

    def __init__(self, error: Json) -> None:
        super().__init__(str(error.get("message", "JSON-RPC error")))
        self.code: Optional[int] = error.get("code")
        self.data: Any = error.get("data")


class Client:
    """A connection to `turngate serve`. Thread-safe: calls may run from several threads
    at once (an authorize that waits for a person blocks only its own thread)."""

    def __init__(
        self,
        send: Callable[[bytes], None],
        reader: Optional[IO[bytes]],
        close: Callable[[], None],
        http: Optional[Callable[[Json], Json]] = None,
    ) -> None:
        self._send = send
        self._close = close
        self._http = http
        self._lock = threading.Lock()
        self._next = 1
        self._waiting: Dict[int, "queue.Queue[Json]"] = {}
        self._notes: "queue.Queue[Json]" = queue.Queue()
        self._kept: List[Json] = []
        self._closed = False
        if reader is not None:
            t = threading.Thread(target=self._read, args=(reader,), daemon=True)
            t.start()

    def _read(self, reader: IO[bytes]) -> None:
        for line in reader:
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if not isinstance(msg, dict):
                continue
            mid = msg.get("id")
            if isinstance(mid, int) and mid in self._waiting:
                self._waiting[mid].put(msg)
            elif isinstance(msg.get("method"), str):
                self._notes.put(msg)
        self._closed = True
        for q in list(self._waiting.values()):
            q.put({"error": {"code": -32000, "message": "turngate serve closed the connection"}})

    def call(self, method: str, params: Optional[Json] = None, timeout: Optional[float] = None) -> Any:
        """Call ``method``; returns its result or raises :class:`RpcError`."""
        with self._lock:
            mid = self._next
            self._next += 1
        request = {"jsonrpc": "2.0", "id": mid, "method": method, "params": params or {}}
        if self._http is not None:
            msg = self._http(request)
        else:
            if self._closed:
                raise RpcError({"code": -32000, "message": "the connection is closed"})
            q: "queue.Queue[Json]" = queue.Queue()
            self._waiting[mid] = q
            try:
                self._send(json.dumps(request).encode() + b"\n")
                msg = q.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"no answer to {method} within {timeout} s") from None
            finally:
                self._waiting.pop(mid, None)
        if "error" in msg:
            raise RpcError(msg["error"])
        return msg.get("result")

    def notification(
        self,
        method: Optional[str] = None,
        where: Optional[Callable[[Json], bool]] = None,
        timeout: Optional[float] = 30.0,
    ) -> Json:
        """The next notification's params (of ``method``, matching ``where``), in arrival
        order; others read meanwhile are kept for later calls. Raises TimeoutError."""
        def params(n: Json) -> Json:
            p = n.get("params")
            return p if isinstance(p, dict) else {}

        def wanted(n: Json) -> bool:
            return (method is None or n.get("method") == method) and (where is None or where(params(n)))

        for i, n in enumerate(self._kept):
            if wanted(n):
                return params(self._kept.pop(i))
        while True:
            try:
                n = self._notes.get(timeout=timeout)
            except queue.Empty:
                raise TimeoutError(f"no {method or 'notification'} within {timeout} s") from None
            if wanted(n):
                return params(n)
            self._kept.append(n)

    def close(self) -> None:
        """Close the connection. The server keeps this client's pending requests pending."""
        self._close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    socket: Optional[str] = None,
    command: Optional[Sequence[str]] = None,
    http: Optional[str] = None,
    token: Optional[str] = None,
) -> Client:
    """Connect to `turngate serve`: ``socket`` (a Unix socket path), ``command`` (the argv of a
    `turngate serve` to spawn and speak to on its stdio), or ``http`` with the bearer ``token``
    (STATE_DIR/token; calls only, no notifications)."""
    if socket is not None:
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        s.connect(socket)
        reader = s.makefile("rb")
        lock = threading.Lock()

        def send(data: bytes) -> None:
            with lock:
                s.sendall(data)

        def close() -> None:
            try:
                s.shutdown(_socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

        return Client(send, reader, close)
    if command is not None:
        proc = subprocess.Popen(list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        stdin = proc.stdin
        if stdin is None or proc.stdout is None:
            raise OSError("could not open the server's stdio")
        plock = threading.Lock()

        def psend(data: bytes) -> None:
            with plock:
                stdin.write(data)
                stdin.flush()

        def pclose() -> None:
            try:
                stdin.close()
            except OSError:
                pass
            proc.kill()
            proc.wait()

        client = Client(psend, proc.stdout, pclose)
        client.process = proc  # type: ignore[attr-defined]
        return client
    if http is not None:
        if not token:
            raise ValueError("connect(http=...) needs the bearer token")
        base = http.rstrip("/")

        def post(request: Json) -> Json:
            req = urllib.request.Request(
                base + "/rpc",
                data=json.dumps(request).encode(),
                headers={"content-type": "application/json", "authorization": f"Bearer {token}"},
                method="POST",
            )
            try:
                with urllib.request.urlopen(req) as resp:
                    body: Json = json.loads(resp.read())
                    return body
            except urllib.error.HTTPError as e:
                raise RpcError({"code": -32000, "message": f"HTTP {e.code}: {e.read().decode(errors='replace')}"}) from None

        return Client(lambda _b: None, None, lambda: None, http=post)
    raise ValueError("connect() needs socket, command or http")
