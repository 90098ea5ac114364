"""The firing engine: claim due timers from a store, fire them on the due ms, settle the outcome."""

from tickwheel.engine.consume import Delivery, consume
from tickwheel.engine.guard import check_target_url, is_public_address
from tickwheel.engine.http import HttpTarget
from tickwheel.engine.metrics import Metrics
from tickwheel.engine.outcome import ACKED, Outcome, Target, Verdict
from tickwheel.engine.settings import WorkerSettings
from tickwheel.engine.worker import Worker

__all__ = [
    "ACKED",
    "Delivery",
    "HttpTarget",
    "Metrics",
    "Outcome",
    "Target",
    "Verdict",
    "Worker",
    "WorkerSettings",
    "check_target_url",
    "consume",
    "is_public_address",
]
