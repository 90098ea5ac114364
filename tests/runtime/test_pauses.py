"""`steady_gc` sets the collector up for a long-running timer process."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from tickwheel.runtime import steady_gc
from tickwheel.runtime.pauses import GC_THRESHOLDS


@pytest.fixture
def restored_gc() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored_gc")
def test_steady_gc_freezes_startup_objects_and_raises_the_thresholds() -> None:
    held: list[list[int]] = [[]]
    steady_gc()
    assert gc.get_threshold() == GC_THRESHOLDS
    collectable = {id(member) for member in gc.get_objects()}
    assert id(held) not in collectable  # frozen: collections no longer walk it
