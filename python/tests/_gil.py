"""Whether Rust released the GIL: how long a pure-Python loop in this thread stalls while `work`
runs in another. Holding the GIL through a scan stalls the loop for the whole scan at least once;
released, the loop only waits out thread switches (the switch interval is shortened meanwhile)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable


def max_gap_while(work: Callable[[], object], attempts: int = 3) -> tuple[float, float]:
    """Runs `work` in a thread; returns (the longest gap between two iterations of a pure-Python
    loop in this thread meanwhile, how long `work` took). On a loaded machine the OS may deschedule
    the loop for a while whatever Rust does, so the measurement is made `attempts` times and the
    run with the smallest longest gap is returned: Rust holding the GIL through a scan stalls the
    loop in every run, so the verdict does not change, only a busy machine's noise goes."""
    runs = [_one_gap(work) for _ in range(attempts)]
    return min(runs)


def _one_gap(work: Callable[[], object]) -> tuple[float, float]:
    done = threading.Event()
    took: list[float] = []

    def run() -> None:
        try:
            t0 = time.perf_counter()
            work()
            took.append(time.perf_counter() - t0)
        finally:
            done.set()

    old = sys.getswitchinterval()
    sys.setswitchinterval(0.0005)
    try:
        t = threading.Thread(target=run)
        t.start()
        last, gap = time.perf_counter(), 0.0
        while not done.is_set():
            now = time.perf_counter()
            gap, last = max(gap, now - last), now
        t.join()
    finally:
        sys.setswitchinterval(old)
    return gap, took[0]
