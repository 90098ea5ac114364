"""The celery app of the peers table, imported by ``celery -A celery_tasks worker`` and by the
producer: the no-op job on the bench's Redis, celery's defaults otherwise. Its worker writes a
file once ready (``worker_ready``), so the drain is timed from then."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import worker_ready
from run_log import record

app = Celery("celery_tasks", broker=os.environ["PEERS_REDIS_URL"])
job = app.task(name="job")(record)


@worker_ready.connect
def _ready(**kwargs: Any) -> None:
    Path(os.environ["PEERS_READY_FILE"]).touch()
