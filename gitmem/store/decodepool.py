"""A first index build's files decoded on a second processor.

Building the index from nothing (a clone, ``gitmem reindex``) is mostly decoding: at a
million memories about 40% of a five-minute build on one processor. The files are
independent, so a forked worker process decodes batches of them into row values (plain
strings and numbers: a decoded ``Memory`` costs more to pickle and unpickle than to
decode again) while the building process reads the next blobs and inserts rows.

The worker is a fork, so the decode function travels with it (set in :data:`_WORK`
before the fork, never pickled); it only ever decodes bytes it is handed. It is used
only where forking is safe and pays: Linux, two or more processors, no other thread in
the process, and a tree of more than :data:`PARALLEL_FROM` memory files. It is forked
when the pool is made, not at its first batch: a fork starts with every page of its
parent (shared, but counted in both processes' resident size), so the build makes it
when it is small, after giving back what its version rows cached (gitmem.store.index,
``_first_build_pool``). Anything it cannot do (a worker that died) is done in the
building process instead.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from gitmem.base.errors import GitmemError, InvalidInputError
from gitmem.format.layout import expected_path_form, id_from_path
from gitmem.format.model import Memory

PARALLEL_FROM = 5000
"""Memory files a tree must have more of for its build to fork a worker (small stores
never fork)."""
BATCH = 500
"""Files per batch handed to the worker."""

Decode = Callable[[bytes, str], Memory]
PartsOf = Callable[[Memory, str], Any]
Item = tuple[str, str, bytes | str]
"""(path, blob id, the blob's bytes, or the error the building process met reading it or
checking its path: see :func:`read`)."""
Decoded = tuple[str, str, str | None, Any]
"""(path, blob id, the memory's id or None, its row parts or the error text)."""

_WORK: tuple[Decode, PartsOf] | None = None


def read(path: str, blob: Callable[[], bytes]) -> bytes:
    """The bytes of the file at ``path`` for decoding (``blob`` reads them); raises
    GitmemError when ``path`` is not a memory path (checked first) or the blob cannot be
    read. Every build reads its files through here, with or without a worker."""
    if id_from_path(path) is None:
        raise InvalidInputError(f"{path} is not at a memory path ({expected_path_form(path)})")
    return blob()


def decode_batch(items: Sequence[Item], decode: Decode, parts_of: PartsOf) -> list[Decoded]:
    out: list[Decoded] = []
    for path, blob, data in items:
        try:
            if isinstance(data, str):
                out.append((path, blob, None, data))  # what reading it said
                continue
            memory = decode(data, path)
        except GitmemError as exc:
            out.append((path, blob, None, str(exc)))
            continue
        out.append((path, blob, memory.id, parts_of(memory, blob)))
    return out


def _work(items: Sequence[Item]) -> list[Decoded]:
    assert _WORK is not None  # set before the fork
    return decode_batch(items, *_WORK)


def usable() -> bool:
    """Whether a worker may be forked here (see the module's text)."""
    return (
        sys.platform == "linux"
        and (os.cpu_count() or 1) > 1
        and threading.active_count() == 1
        and "fork" in multiprocessing.get_all_start_methods()
    )


class DecodePool:
    """One forked worker decoding batches."""

    def __init__(self, decode: Decode, parts_of: PartsOf) -> None:
        global _WORK
        _WORK = (decode, parts_of)
        self._executor = ProcessPoolExecutor(
            max_workers=1, mp_context=multiprocessing.get_context("fork")
        )
        # The executor forks at its first task: forked now, the worker starts with what the
        # building process holds now (the caller's choice of when), not what it holds by
        # the first batch.
        self._executor.submit(int).result()

    def submit(self, items: Sequence[Item]) -> Future[list[Decoded]]:
        return self._executor.submit(_work, items)

    def close(self) -> None:
        global _WORK
        self._executor.shutdown(wait=True, cancel_futures=True)
        _WORK = None
