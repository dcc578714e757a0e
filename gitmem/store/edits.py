"""A memory's file edited as text (``gitmem edit``) as one :meth:`Store.update_from_text`;
when that refuses it, the text and its base version are kept under
``<gitdir>/gitmem/edits/`` and the next edit of the memory starts from them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gitmem.base import paths
from gitmem.base.errors import GitmemError
from gitmem.format.memfile import file_text
from gitmem.format.model import Memory
from gitmem.store.core import Store

Editor = Callable[[bytes], bytes | None]
"""Shows the text to a person and returns what they saved (None: nothing saved)."""


@dataclass(frozen=True)
class Edited:
    memory: Memory
    """The memory after the edit."""
    changed: bool
    """Whether the edit made a new version (an edit that changes nothing commits nothing)."""


def edit(
    store: Store,
    memory_id: str,
    editor: Editor,
    *,
    message: str | None = None,
    discard: bool = False,
    notice: Callable[[str], None] = lambda _: None,
) -> Edited:
    """Edit ``memory_id``'s file with ``editor`` as one update; a kept unfinished edit is offered
    again unless ``discard``. A refused update keeps what was typed (the error's hint, or
    ``notice``, says where)."""
    memory = store.read(memory_id)
    pending, base_file = paths.edit_files(store.db(memory.store_scope).gitdir, memory_id)
    base = memory.version
    if discard:
        pending.unlink(missing_ok=True)
        base_file.unlink(missing_ok=True)
    if pending.exists():
        text = pending.read_bytes()
        with contextlib.suppress(OSError, ValueError):
            base = int(base_file.read_text().strip())
        notice(f"resuming your unfinished edit of {memory_id} ({pending})")
    else:
        text = file_text(memory).encode("utf-8")
    edited = editor(text)
    if edited is None:  # only when the editor could not save; nothing to apply
        edited = text
    try:
        updated = store.update_from_text(memory_id, edited, expected_version=base, message=message)
    except Exception as exc:
        _keep(pending, base_file, edited, base)
        keep = (
            f"your edit is kept in {pending}; run gitmem edit {memory_id} to fix and retry "
            "(--discard starts over)"
        )
        if isinstance(exc, GitmemError):
            exc.hint = f"{exc.hint}; {keep}" if exc.hint else keep
        else:
            notice(keep)
        raise
    pending.unlink(missing_ok=True)
    base_file.unlink(missing_ok=True)
    return Edited(updated, updated.version != memory.version)


def _keep(pending: Path, base_file: Path, text: bytes, base: int) -> None:
    pending.parent.mkdir(parents=True, exist_ok=True)
    pending.write_bytes(text)
    base_file.write_text(f"{base}\n")
