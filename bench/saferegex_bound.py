"""What the costliest patterns ``saferegex`` accepts cost to compile: ``python -m
bench.saferegex_bound``.

Each shape is grown to the largest count :func:`gitmem.format.saferegex.size` still accepts
and compiled in a process of its own (its wall time and peak RSS, which includes the
interpreter's own ~12 MB); the issue's reproduction is shown refused.
"""

from __future__ import annotations

import subprocess
import sys

import regex

from gitmem.format import saferegex

SHAPES = [
    "a{%d}",
    "(?:ab){%d}",
    "(a){%d}",
    "(?=a){%d}",
    "(?<!a){%d}",
    "(?>a){%d}",
    "(?:a++){%d}",
    "(?:\\w){%d}",
    "(?i:[a-zß]){%d}",
    "(?:\\p{L}){%d}",
    "(?:\\b){%d}",
    "(a)(?:\\1){%d}",
    "(?:a|b|c){%d}",
    "(?:(?:ab){10,11}){%d}",
    "(?:a{100}){%d}",
    "(?:(?:abc){e<=1}){%d}",
    "(?f)(?:ß){%d}",
]
PROBE = """
import resource, sys, time, regex
t = time.perf_counter()
regex.compile(sys.argv[1], regex.VERSION0)
took = time.perf_counter() - t
print(f"{took:.3f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")
"""


def largest(shape: str) -> int:
    """The largest count the bound accepts for ``shape``."""
    low, high = 1, saferegex.MAX_SIZE
    while low < high:
        mid = (low + high + 1) // 2
        if saferegex.size(shape % mid, regex.VERSION0) <= saferegex.MAX_SIZE:
            low = mid
        else:
            high = mid - 1
    return low


def main() -> None:
    print(f"{'pattern':32} {'size':>8} {'compile s':>10} {'peak MB':>8}")
    for shape in SHAPES:
        pattern = shape % largest(shape)
        done = subprocess.run(
            [sys.executable, "-c", PROBE, pattern], capture_output=True, text=True, check=True
        )
        took, peak = done.stdout.split()
        size = saferegex.size(pattern, regex.VERSION0)
        print(f"{pattern:32} {size:>8,} {took:>10} {peak:>8}")
    issue = r"((\\{1000}){1000}){12}"
    try:
        saferegex.compile(issue)
    except saferegex.PatternError as exc:
        print(f"{issue}: refused ({exc.reason})")


if __name__ == "__main__":
    main()
