"""``gitmem serve``: a read-only web view of a store for people (docs/web.md).

Needs the ``web`` extra (Jinja2, markdown-it-py, nh3); :func:`missing` names what is absent.
"""

from __future__ import annotations

import importlib.util

REQUIRED = ("jinja2", "markdown_it", "nh3")


def missing() -> list[str]:
    """The modules of the ``web`` extra that are not installed."""
    return [name for name in REQUIRED if importlib.util.find_spec(name) is None]
