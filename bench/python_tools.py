#!/usr/bin/env python3
"""The guarded tools' cost over the race-free opens they build on, from Python, in one run:

    $TURNGATE_VENV/bin/python bench/python_tools.py

Prints the median of `read_file_blocking` against `open_read_blocking` + read (4 KiB), and
`write_file_blocking` (atomic: temporary + fsync + rename) against `open_write_blocking` +
write, with their ratio. Not wired into bench/run yet."""

import pathlib
import statistics
import tempfile
import time

import turngate

ws = pathlib.Path(tempfile.mkdtemp())
(ws / "a.txt").write_text("x" * 4096)
gate = turngate.turn(ws, store=pathlib.Path(tempfile.mkdtemp()) / "audit.db", approver="deny_all")


def med(f, n=2000):
    for _ in range(200):
        f()
    xs = []
    for _ in range(n):
        t = time.perf_counter_ns()
        f()
        xs.append(time.perf_counter_ns() - t)
    return statistics.median(xs) / 1000


def read_base():
    with gate.open_read_blocking("a.txt") as fh:
        fh.read()


def write_base():
    with gate.open_write_blocking("c.txt") as fh:
        fh.write(b"y" * 4096)


b, t = med(read_base), med(lambda: gate.read_file_blocking("a.txt"))
wb, wt = med(write_base, 500), med(lambda: gate.write_file_blocking("b.txt", "y" * 4096), 500)
print(f"read: open_read_blocking+read {b:.1f} us, read_file_blocking {t:.1f} us, ratio {t / b:.2f}")
print(f"write: open_write_blocking+write {wb:.1f} us, write_file_blocking {wt:.1f} us, ratio {wt / wb:.2f}")
