"""``python -m bench``: run the benchmarks and write the markdown table."""

from __future__ import annotations

import sys

from bench.run import main

if __name__ == "__main__":
    sys.exit(main())
