"""Coverage-guided fuzzing of what a shared store feeds gitmem (issue 11).

``fuzz/targets.py`` holds the targets: plain functions of bytes, importable without
the fuzzer, so ``tests/test_fuzz_corpus.py`` replays every kept input in CI.
``python -m fuzz TARGET`` runs one under atheris (libFuzzer); see docs/security.md.
"""
