"""``python -m fuzz TARGET [libFuzzer options] [CORPUS_DIR...]``: one target under atheris.

Coverage comes from atheris instrumenting gitmem's modules as they are imported. A
crash is written by libFuzzer as ``crash-<sha1>`` in the working directory; copy it to
``tests/fuzz_corpus/<target>/`` so CI replays it (tests/test_fuzz_corpus.py). Example,
ten minutes with the seeds and a scratch corpus:

    python -m fuzz codec -max_total_time=600 -rss_limit_mb=2048 /tmp/corpus-codec fuzz/seeds/codec
"""

from __future__ import annotations

import sys


def main() -> None:
    import atheris

    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m fuzz {codec,config,merge,mcp} [libFuzzer args]")
    name = sys.argv.pop(1)
    # Everything imported inside this block is instrumented for coverage; the targets
    # import the modules they drive lazily, so import them here, while it is open.
    with atheris.instrument_imports(include=["gitmem", "yaml", "jsonschema", "fuzz"]):
        import gitmem.entry.mcp
        import gitmem.features.lifecycle.rules
        import gitmem.format.secrets
        import gitmem.store.merge
        from fuzz import targets
    del gitmem
    target = targets.TARGETS[name]
    if name == "mcp":
        targets._mcp_specs()  # the scratch store, made once before fuzzing starts
    atheris.Setup(sys.argv, target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
