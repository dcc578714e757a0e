"""The memory file, read: the one decoder every reader uses.

The store, the git hooks, merge, review, transfer, the hub's receive hook and the
knowledge graph all turn a memory file's bytes into a :class:`~gitmem.format.model.Memory`
here, with the same checks: UTF-8 text without NUL bytes, front-matter that passes the
schema, and an ``id`` that agrees with the file's path.
"""

from __future__ import annotations

from gitmem.base.errors import GitmemError, InvalidMemoryError
from gitmem.format import codec, schema
from gitmem.format.layout import expected_path_form, id_from_path
from gitmem.format.model import Memory, memory_from_document


def decode(
    data: bytes, path: str, *, what: str | None = None, require_memory_path: bool = True
) -> Memory:
    """The memory in ``data``, stored at ``path``; raises :class:`InvalidMemoryError`.

    ``what`` starts each message (the store names the path; a hook prints the path
    beside the message itself). ``require_memory_path=False`` reads a file at a path
    that names no memory id too (what the store reads is always at one).
    """
    label = f"{what} " if what else ""
    expected = id_from_path(path)
    if expected is None and require_memory_path:
        raise InvalidMemoryError(f"{label}not at a memory path ({expected_path_form(path)})")
    text = codec.decode(data, what=path)
    if "\x00" in text:
        # The write path refuses NUL (memories are text; git would call the file binary),
        # so a planted one is a broken file, not a memory to carry forward.
        raise InvalidMemoryError(f"{label}contains a NUL byte; memories are text")
    doc = codec.parse(text)
    if not doc.has_front_matter:
        raise InvalidMemoryError(
            f"{label}has no front-matter (it must start with a '---' line)"
        )
    schema.validate(doc.metadata, what=path)
    memory = memory_from_document(doc, path=path)
    if expected is not None and memory.id != expected:
        raise InvalidMemoryError(
            f"{label}carries id {memory.id!r}, but its path says {expected!r}"
        )
    return memory


def file_text(memory: Memory) -> str:
    """The memory's file as it is stored (front-matter and body, byte for byte)."""
    doc = memory.document or codec.Document(memory.to_metadata(), memory.body)
    return codec.serialize(doc)


def read(data: bytes | None, path: str) -> tuple[Memory | None, str | None]:
    """The memory in ``data`` (None when there is no file), or why it is not one."""
    if data is None:
        return None, None
    try:
        return decode(data, path), None
    except (GitmemError, ValueError, TypeError, KeyError) as exc:
        return None, f"{path}: {exc}"
