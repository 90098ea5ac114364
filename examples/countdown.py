"""Schedule timers on the in-process Scheduler and watch them fire: python examples/countdown.py."""

from __future__ import annotations

import threading
import time

from tickwheel import Scheduler


def main() -> None:
    done = threading.Event()
    start = time.time()

    def announce(name: str, when: float) -> None:
        late_ms = (time.time() - when) * 1000
        print(f"{time.time() - start:6.3f}s  {name:<10} fired {late_ms:+.2f} ms from its due time")

    with Scheduler() as scheduler:
        for seconds in (0.25, 0.5, 1.0, 1.5):
            scheduler.call_at(start + seconds, announce, f"t+{seconds}s", start + seconds)
        scheduler.call_at(start + 1.6, done.set)
        done.wait()


if __name__ == "__main__":
    main()
