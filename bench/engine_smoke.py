"""Superseded by the benchmark suite: ``python -m bench.engine_smoke ARGS`` runs
``python -m bench ARGS`` (``ivm bench``); see ``bench/README.md``."""

from __future__ import annotations

import sys

from .__main__ import main

if __name__ == "__main__":
    print("bench.engine_smoke is now `ivm bench` / `python -m bench`; running that.", file=sys.stderr)
    sys.exit(main())
