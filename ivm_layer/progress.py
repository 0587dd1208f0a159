"""A progress bar for long work (initial loads, the demo): drawn on a terminal only."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """``[#####.....]  42%  420,000/1,000,000 rows  310,000 rows/s`` on ``stream``, redrawn at
    most ten times a second; silent when ``enabled`` is False, or None and ``stream`` is not a
    terminal, and for totals below ``minimum`` (short work needs no bar)."""

    def __init__(self, total: int, label: str, enabled: bool | None = None, stream: TextIO | None = None,
                 width: int = 30, minimum: int = 50_000):
        self.total = max(int(total), 0)
        self.label = label
        self.stream = stream or sys.stderr
        if enabled is None:
            enabled = bool(getattr(self.stream, "isatty", lambda: False)()) and self.total >= minimum
        self.enabled = enabled and self.total > 0
        self.width = width
        self.done = 0
        self.start = time.perf_counter()
        self._drawn = 0.0

    def advance(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self._drawn < 0.1 and self.done < self.total:
            return
        self._drawn = now
        filled = self.width * min(self.done, self.total) // self.total
        pct = 100 * min(self.done, self.total) // self.total
        rate = self.done / max(now - self.start, 1e-9)
        self.stream.write(f"\r{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {pct:3d}% "
                          f"{self.done:,}/{self.total:,} rows {rate:,.0f} rows/s")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
