"""Process-wide settings and failure isolation for long-running inference (the server, batch
scoring)."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

Item = TypeVar("Item")

_M_TRIM_THRESHOLD = -1  # glibc mallopt parameters (malloc.h)
_M_MMAP_MAX = -4


def retain_freed_memory() -> bool:
    """Keep large freed buffers in the process instead of returning them to the OS.

    glibc serves every allocation above 32 MB with its own ``mmap`` and unmaps it on free, so
    each forward pass over a large batch page-faults its buffers in again (about a fifth of a
    64-structure SevenNet-0 pass on one CPU core; docs/benchmarks.md) — a tax on exactly the
    batches a server merges.  Serving them from the heap and not trimming it lets
    the next batch reuse the pages.  Peak memory barely changes (+2 % measured); the process keeps
    its high-water mark between batches.  Returns whether the setting took effect (glibc on Linux only).
    """
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(_M_MMAP_MAX, 0)) and bool(libc.mallopt(_M_TRIM_THRESHOLD, 2**31 - 1))
    except (OSError, AttributeError):  # not glibc
        return False


def each_alone(compute: Callable[[list[Item]], list[Any]], items: Sequence[Item]) -> list[Any]:
    """``compute`` run on each item by itself: per item, its one result or the exception it raised.

    The fallback after a batch fails: rerunning one item at a time gives the error to the item
    that causes it and answers the items it shared the batch with. ``compute`` maps a list of
    items to one result per item."""
    out: list[Any] = []
    for item in items:
        try:
            out.extend(compute([item]))
        except Exception as err:  # noqa: BLE001 - this item's own failure
            out.append(err)
    return out
