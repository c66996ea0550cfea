#!/usr/bin/env python3
"""The egress proxy's figures (DESIGN §13), measured in one run and printed as one JSON object.

    bench/egress.py TURNGATE_EXE [--srt SRT_EXE]
    bench/egress.py TURNGATE_EXE --latency-only   # the connect latency rounds only

A local HTTP server (this script, `socket.sendfile` of a sparse file, so it serves at kernel
speed) on 127.0.0.1. Measured, interleaved round by round:

- throughput: `curl -o /dev/null` of 1 GiB, directly over loopback (unconfined) vs inside
  `turngate run --mode auto_accept_edits --net restricted --allow-net 127.0.0.1:P` through
  the proxy (absolute-form HTTP), as curl's own `speed_download`;
- connect latency: one small request per new connection, 200 in a row, by the same Python
  client: directly vs through the proxy (each a new decision of the gate, audited). The added
  latency is the difference of the medians. Measured twice: as the machine schedules it, and
  with the server, the client and turngate all on one CPU (`taskset -c 0`, this script run
  again with `--latency-only`): on a 2-vCPU VM every wake-up of a process on the other vCPU is
  an inter-processor interrupt through the hypervisor, whose cost swings with the host's load
  (the direct request alone moved between 0.4 and 1.8 ms from one run to the next), and the
  proxied path has more such hand-offs than the direct one (client, proxy, audit writer,
  server). On one CPU the difference is the work turngate adds, not the host's scheduling.
- the sandbox alone: the same curl inside `turngate run --net enabled` (seccomp, Landlock, the
  namespaces, no proxy), straight to the server: what the sandbox costs a download apart from
  the proxy (the budget stays proxy vs direct loopback);
- with `--srt`, the same download through Anthropic's sandbox-runtime's proxy (the anchor).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import socketserver
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

SIZE = 1 << 30
ROUNDS = int(os.environ.get("EGRESS_ROUNDS", "3"))
REQUESTS = 200
LATENCY_ROUNDS = 5
# sandbox-runtime relays through socat; a download slower than this is reported, not waited for.
SRT_TIMEOUT = 120.0

LATENCY_CLIENT = r"""
import os, socket, sys, time, statistics
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
proxy = os.environ.get("HTTP_PROXY")
if proxy:
    addr = ("127.0.0.1", int(proxy.rsplit(":", 1)[1]))
    target = f"http://{host}:{port}/small"
else:
    addr = (host, port)
    target = "/small"
req = f"GET {target} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n".encode()
times = []
for _ in range(n):
    t = time.perf_counter()
    s = socket.create_connection(addr)
    s.sendall(req)
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    s.close()
    times.append(time.perf_counter() - t)
    assert data.startswith(b"HTTP/1.1 200"), data[:200]
print(statistics.median(times) * 1e3)
"""


class Handler(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        line = self.rfile.readline().decode("latin-1")
        while self.rfile.readline() not in (b"\r\n", b"\n", b""):
            pass
        path = line.split(" ")[1] if " " in line else "/"
        if path.endswith("/big"):
            self.wfile.write(f"HTTP/1.1 200 OK\r\nContent-Length: {SIZE}\r\nConnection: close\r\n\r\n".encode())
            self.wfile.flush()
            with open(self.server.big, "rb") as f:  # type: ignore[attr-defined]
                self.connection.sendfile(f)
            # Half-close and wait for the client to hang up: a close with anything unread
            # would reset the connection and drop the tail still in flight.
            self.connection.shutdown(socket.SHUT_WR)
            self.connection.settimeout(30)
            try:
                while self.connection.recv(65536):
                    pass
            except OSError:
                pass
        else:
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128


def main() -> None:
    turngate = sys.argv[1]
    load_at_start = os.getloadavg()
    srt = sys.argv[sys.argv.index("--srt") + 1] if "--srt" in sys.argv else None
    work = Path(tempfile.mkdtemp(prefix="turngate-egress-bench-"))
    big = work / "big"
    with open(big, "wb") as f:
        f.truncate(SIZE)
    ws = work / "ws"
    ws.mkdir()
    (ws / "lat.py").write_text(LATENCY_CLIENT)
    policy = work / "policy.toml"
    policy.write_text('[defaults]\nnetwork = "ask"\n\n[[layers]]\nname = "bench"\n\n'
                      '[[layers.rules]]\nkind = "shell_command"\neffect = "allow"\npattern = "*"\n')
    server = Server(("127.0.0.1", 0), Handler)
    server.big = str(big)  # type: ignore[attr-defined]
    port = server.server_address[1]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{port}/big"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "LANG": "C"}

    # The gate's audit store on this disk (the default), and on tmpfs where there is one:
    # every decision is one audit row, committed (synchronous=FULL) before the connection.
    shm = Path("/dev/shm")
    tmpfs_store = (Path(tempfile.mkdtemp(prefix="turngate-egress-", dir=shm)) / "audit.db"
                   if shm.is_dir() else None)

    def sandboxed(argv: list[str], store: Path | None = None) -> list[str]:
        return [turngate, "run", "--mode", "auto_accept_edits", "--net", "restricted",
                "--allow-net", f"127.0.0.1:{port}", "--policy", str(policy), "--approver", "deny",
                "--workspace", str(ws), "--store", str(store or work / "audit.db"), "--", *argv]

    def run(argv: list[str], timeout: float | None = None) -> str:
        try:
            r = subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True,
                               timeout=timeout)
        except subprocess.TimeoutExpired:
            raise SystemExit(f"{argv[0]} did not finish within {timeout:.0f} s")
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed: {r.stderr}")
        return r.stdout.strip()

    curl = ["curl", "-sS", "-o", "/dev/null", "-w", "%{speed_download} %{size_download}", url]

    def speed(out: str) -> float:
        """curl's speed, once the whole body arrived."""
        rate, size = out.split()
        if int(size) != SIZE:
            raise SystemExit(f"downloaded {size} bytes, not {SIZE}")
        return float(rate)

    def unproxied(argv: list[str]) -> list[str]:
        """The sandbox without the proxy: the network as the host has it."""
        return [turngate, "run", "--mode", "auto_accept_edits", "--net", "enabled",
                "--policy", str(policy), "--approver", "deny", "--workspace", str(ws),
                "--store", str(work / "audit.db"), "--", *argv]

    # `-p`: the same download through a CONNECT tunnel (how HTTPS goes).
    tunnel_curl = ["curl", "-p", *curl[1:]]
    direct, proxied, tunneled, srt_speed, sandbox_only = [], [], [], [], []
    srt_settings = work / "srt.json"
    srt_settings.write_text(json.dumps({
        "network": {"allowedDomains": [f"127.0.0.1:{port}"], "deniedDomains": [],
                    "allowLocalBinding": False},
        "filesystem": {"denyRead": [], "allowWrite": [str(ws)], "denyWrite": []},
    }))
    srt_error = ""
    latency_only = "--latency-only" in sys.argv
    if not latency_only:
        # A warm-up download (page cache, CPU frequency), not counted.
        run(["curl", "--noproxy", "*", *curl[1:]])
    for _ in range(0 if latency_only else ROUNDS):
        direct.append(speed(run(["curl", "--noproxy", "*", *curl[1:]])))
        proxied.append(speed(run(sandboxed(curl))))
        tunneled.append(speed(run(sandboxed(tunnel_curl))))
        sandbox_only.append(speed(run(unproxied(["curl", "--noproxy", "*", *curl[1:]]))))
        if srt and not srt_error:
            try:
                # srt puts loopback in NO_PROXY; cleared so curl uses srt's proxy.
                srt_speed.append(speed(run([srt, "--settings", str(srt_settings), "--", "env",
                                            "-u", "NO_PROXY", "-u", "no_proxy", *curl],
                                           timeout=SRT_TIMEOUT)))
            except (SystemExit, ValueError) as e:
                srt_error = str(e)[:300]
    lat_direct, lat_proxied, lat_tmpfs = [], [], []
    lat = ["python3", "lat.py", "127.0.0.1", str(port), str(REQUESTS)]
    for _ in range(LATENCY_ROUNDS):
        lat_direct.append(float(run(["python3", str(ws / "lat.py"), *lat[2:]])))
        lat_proxied.append(float(run(sandboxed(lat))))
        if tmpfs_store and not latency_only:
            lat_tmpfs.append(float(run(sandboxed(lat, tmpfs_store))))
    if tmpfs_store:
        shutil.rmtree(tmpfs_store.parent, ignore_errors=True)
    server.shutdown()
    big.unlink()
    if latency_only:
        print(json.dumps({"latency_direct_ms": lat_direct, "latency_proxied_ms": lat_proxied}))
        return
    pinned = json.loads(run(["taskset", "-c", "0", sys.executable, str(Path(__file__).resolve()),
                             turngate, "--latency-only"]))
    out = {
        "loadavg_at_start": load_at_start,
        "loadavg_at_end": os.getloadavg(),
        "size_bytes": SIZE,
        "rounds": ROUNDS,
        "requests": REQUESTS,
        "direct_bytes_per_s": direct,
        "proxied_bytes_per_s": proxied,
        "tunneled_bytes_per_s": tunneled,
        "sandbox_only_bytes_per_s": sandbox_only,
        "srt_bytes_per_s": srt_speed,
        "srt_error": srt_error,
        "latency_direct_ms": lat_direct,
        "latency_proxied_ms": lat_proxied,
        "latency_proxied_tmpfs_store_ms": lat_tmpfs,
        "latency_pinned_direct_ms": pinned["latency_direct_ms"],
        "latency_pinned_proxied_ms": pinned["latency_proxied_ms"],
        "throughput_ratio": statistics.median(proxied) / statistics.median(direct),
        "tunnel_throughput_ratio": statistics.median(tunneled) / statistics.median(direct),
        "sandbox_only_ratio": statistics.median(sandbox_only) / statistics.median(direct),
        "added_latency_ms": statistics.median(lat_proxied) - statistics.median(lat_direct),
        "added_latency_pinned_ms": (statistics.median(pinned["latency_proxied_ms"])
                                    - statistics.median(pinned["latency_direct_ms"])),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
