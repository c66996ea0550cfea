"""Argument shapes only Python has, declared by hand: no facade record declares them (the
records' TypedDicts are generated into ``_types.py``, which re-exports these)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Literal, Union

if sys.version_info >= (3, 11):
    from typing import TypedDict
else:
    from typing_extensions import TypedDict

if TYPE_CHECKING:
    from ._turngate import Decision


class ApprovalAnswer(TypedDict):
    """A guarded tool's ``approval=``: this call continues deferred request ``request_id``
    with the person's answer (a ``Decision``, ``True`` for allow_once, ``False`` for deny, or
    a decision's name)."""

    request_id: str
    decision: Union["Decision", bool, Literal["allow_once", "allow_for_turn", "deny"]]


__all__ = ["ApprovalAnswer"]
