"""No module of gitmem imports itself through others, counting every import: at module
level, inside functions and under ``TYPE_CHECKING`` (lint-imports checks packages too)."""

from __future__ import annotations

import grimp


def test_no_import_cycle_between_modules() -> None:
    graph = grimp.build_graph("gitmem", exclude_type_checking_imports=False, cache_dir=None)
    cycles = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            back = graph.find_shortest_chain(importer=imported, imported=module)
            if back is not None:
                cycles.append(" -> ".join((module, *back)))
    assert cycles == []
