"""A tiny progress bar on stderr: `[#####.....] 12/40 softmax: inductor compile (1m03s)`.

On a terminal it redraws one line; otherwise (CI logs) it prints a line per step.
"""

from __future__ import annotations

import sys
import time


class Progress:
    def __init__(self, total: int, stream=None, width: int = 24):
        self.total = max(total, 1)
        self.done = 0
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.t0 = time.perf_counter()
        self.tty = getattr(self.stream, "isatty", lambda: False)()

    def line(self, label: str) -> str:
        filled = int(self.width * self.done / self.total)
        s = int(time.perf_counter() - self.t0)
        return (f"[{'#' * filled}{'.' * (self.width - filled)}] {self.done}/{self.total} {label} "
                f"({s // 60}m{s % 60:02d}s)")

    def show(self, label: str) -> None:
        text = self.line(label)
        if self.tty:
            self.stream.write("\r\033[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def step(self, label: str = "") -> None:
        self.done = min(self.done + 1, self.total)
        self.show(label)

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
