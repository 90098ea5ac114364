"""`Assembly`: the parts a `Worker` and `consume()` both run on, built and stopped together."""

from __future__ import annotations

from collections.abc import Callable

from tickwheel.engine.dispatch import Dispatcher
from tickwheel.engine.held import Held
from tickwheel.engine.limiter import Limiter, store_limiter
from tickwheel.engine.metrics import Metrics
from tickwheel.engine.settings import WorkerSettings
from tickwheel.engine.settle import Settler, Throttled
from tickwheel.stores import Store


def _nothing() -> None:
    """What a consumer does when its grace period runs out: nothing runs on its behalf."""


class Assembly:
    """A `Dispatcher` that hands each due timer to `deliver` as a `Held`, the `Settler` its
    timers settle through, the `Limiter` their grants come from, and the `Metrics` they count
    in. `abandon` is called when a stop's grace period is over (`Dispatcher`)."""

    __slots__ = ("dispatcher", "limiter", "metrics", "settler", "throttled")

    def __init__(
        self,
        store: Store,
        settings: WorkerSettings,
        deliver: Callable[[list[Held]], None],
        *,
        metrics: Metrics | None = None,
        ack_every_s: float = 0.0,
        abandon: Callable[[], None] = _nothing,
    ) -> None:
        self.metrics = metrics or Metrics()
        self.throttled = throttled = Throttled()
        self.settler = Settler(store, self.metrics, throttled, ack_every_s=ack_every_s)
        self.dispatcher: Dispatcher = Dispatcher(
            store,
            settings,
            deliver,
            settler=self.settler,
            metrics=self.metrics,
            throttled=throttled,
            abandon=abandon,
        )
        self.limiter: Limiter = store_limiter(store, self.dispatcher.controls, self.metrics)

    async def run(self) -> None:
        """Claim and hand timers over until `stop` (or cancellation), hand back what is still
        held, then stop the limiter."""
        try:
            await self.dispatcher.run()
        finally:
            await self.limiter.close()

    def stop(self, *, grace: bool = True) -> None:
        """Stop claiming and send callbacks waiting for a grant back to the store; `run`
        returns once what is held is settled or handed back (at once without `grace`)."""
        self.dispatcher.stop(grace=grace)
        self.limiter.send_back_all()
