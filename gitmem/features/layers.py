"""Where layered documents live: the four layers, their root folders, and the path ids
(``projects/{project}/{file_type}``, ...) built from names checked as safe path segments.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping

from gitmem.base.errors import InvalidInputError
from gitmem.format.layout import check_id, is_path_id


class Layer(enum.StrEnum):
    SHARED_PROJECT = "shared-project"
    SKILL = "skill-specific"
    COMMAND = "command"
    AGENT = "agent"


LAYER_ROOTS: Mapping[Layer, str] = {
    Layer.SHARED_PROJECT: "projects",
    Layer.SKILL: "skills",
    Layer.COMMAND: "commands",
    Layer.AGENT: "agents",
}
_ROOT_LAYERS = {root: layer for layer, root in LAYER_ROOTS.items()}
_NAMES: Mapping[Layer, tuple[str, ...]] = {
    Layer.SHARED_PROJECT: ("project",),
    Layer.SKILL: ("skill", "project"),
    Layer.COMMAND: ("project",),
    Layer.AGENT: ("agent",),
}
"""The names in a layer's document ids, between its root folder and the file type."""


def parse_layer(value: Layer | str) -> Layer:
    try:
        return Layer(value)
    except ValueError:
        raise InvalidInputError(
            f"layer {value!r} is not one of {', '.join(str(x) for x in Layer)}"
        ) from None


def _name(value: str | None, what: str, layer: Layer) -> str:
    if value is None or value == "":
        raise InvalidInputError(f"the {layer} layer needs a {what}")
    check_id(value, what=what)
    return value


def document_id(
    layer: Layer | str,
    file_type: str,
    *,
    project: str | None = None,
    skill: str | None = None,
    command: str | None = None,
    agent: str | None = None,
) -> str:
    """The path id of a layered document; every name is checked as one safe path segment."""
    kind = parse_layer(layer)
    file_type = _name(file_type, "file type", kind)
    if kind is Layer.COMMAND and command is not None:
        check_id(command, what="command")
    given = {"project": project, "skill": skill, "agent": agent}
    names = [_name(given[what], what, kind) for what in _NAMES[kind]]
    return "/".join([LAYER_ROOTS[kind], *names, file_type])


def placement(memory_id: str) -> dict[str, str] | None:
    """Layer and names of a layered document id (None for any other id)."""
    if not is_path_id(memory_id):
        return None
    parts = memory_id.split("/")
    layer = _ROOT_LAYERS.get(parts[0])
    if layer is None or len(parts) != len(_NAMES[layer]) + 2:
        return None
    return {
        "layer": layer,
        **dict(zip(_NAMES[layer], parts[1:-1], strict=True)),
        "file_type": parts[-1],
    }


def layer_fields(memory_id: str) -> dict[str, str]:
    """The layer fields a layered document's front-matter carries (its agent is in the path;
    the front-matter's ``agent`` names the writer); empty for any other id."""
    where = placement(memory_id) or {}
    return {k: str(where[k]) for k in ("layer", "file_type", "project", "skill") if where.get(k)}
