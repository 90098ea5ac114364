"""The firing engine: claim due timers from a store, fire them on the due ms, settle the outcome.

The engine fires through a `Target` and never makes a call itself: the HTTP target is
`tickwheel.callbacks`'s, a floor above. Names are imported on first use, so
``from tickwheel.engine import consume`` does not load prometheus-client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickwheel.engine.consume import Delivery, consume
    from tickwheel.engine.metrics import Metrics
    from tickwheel.engine.outcome import ACKED, GuardedTarget, NotFired, Outcome, Target, Verdict
    from tickwheel.engine.settings import WorkerSettings
    from tickwheel.engine.worker import Worker

# where each name lives: tickwheel.engine.<module>
_MODULES = {
    "ACKED": "outcome",
    "Delivery": "consume",
    "GuardedTarget": "outcome",
    "Metrics": "metrics",
    "NotFired": "outcome",
    "Outcome": "outcome",
    "Target": "outcome",
    "Verdict": "outcome",
    "Worker": "worker",
    "WorkerSettings": "settings",
    "consume": "consume",
}

__all__ = [
    "ACKED",
    "Delivery",
    "GuardedTarget",
    "Metrics",
    "NotFired",
    "Outcome",
    "Target",
    "Verdict",
    "Worker",
    "WorkerSettings",
    "consume",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    loaded = importlib.import_module(f"{__name__}.{module}")
    # every name of the module at once, looked up once: importing `consume.py` binds the
    # package's `consume` to the module, which the function must then replace
    for other, home in _MODULES.items():
        if home == module:
            globals()[other] = getattr(loaded, other)
    return globals()[name]
