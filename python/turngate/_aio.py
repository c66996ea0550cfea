"""Helpers the extension uses to run an ``async def`` approver on an event loop."""

from __future__ import annotations

import inspect
from typing import Any, Awaitable


async def _await(aw: Awaitable[Any]) -> Any:
    return await aw


def as_coroutine(aw: Awaitable[Any]) -> Any:
    """``aw`` as a coroutine object (``run_coroutine_threadsafe`` takes only coroutines)."""
    return aw if inspect.iscoroutine(aw) else _await(aw)
