"""The firing engine: claim due timers from a store, fire them on the due ms, settle the outcome.

Names are imported on first use, so ``from tickwheel.engine import consume`` loads neither the
HTTP client (httptools) nor prometheus-client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickwheel.engine.consume import Delivery, consume
    from tickwheel.engine.guard import check_target_url, is_public_address
    from tickwheel.engine.http import HttpTarget
    from tickwheel.engine.metrics import Metrics
    from tickwheel.engine.outcome import ACKED, GuardedTarget, NotFired, Outcome, Target, Verdict
    from tickwheel.engine.settings import HttpSettings, WorkerSettings
    from tickwheel.engine.worker import Worker

# where each name lives: tickwheel.engine.<module>
_MODULES = {
    "ACKED": "outcome",
    "Delivery": "consume",
    "GuardedTarget": "outcome",
    "HttpSettings": "settings",
    "HttpTarget": "http",
    "Metrics": "metrics",
    "NotFired": "outcome",
    "Outcome": "outcome",
    "Target": "outcome",
    "Verdict": "outcome",
    "Worker": "worker",
    "WorkerSettings": "settings",
    "check_target_url": "guard",
    "consume": "consume",
    "is_public_address": "guard",
}

__all__ = [
    "ACKED",
    "Delivery",
    "GuardedTarget",
    "HttpSettings",
    "HttpTarget",
    "Metrics",
    "NotFired",
    "Outcome",
    "Target",
    "Verdict",
    "Worker",
    "WorkerSettings",
    "check_target_url",
    "consume",
    "is_public_address",
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
