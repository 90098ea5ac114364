"""The public names are the ones `tickwheel.__all__` promises, sorted and importable."""

from __future__ import annotations

from types import ModuleType

import tickwheel


def test_all_is_sorted_and_complete() -> None:
    assert tickwheel.__all__ == sorted(tickwheel.__all__)
    public = {
        name
        for name, member in vars(tickwheel).items()
        if not name.startswith("_") and not isinstance(member, ModuleType)  # subpackages
    }
    assert public == set(tickwheel.__all__)


def test_exported_members_belong_to_tickwheel() -> None:
    for name in tickwheel.__all__:
        member = getattr(tickwheel, name)
        assert member.__module__.startswith("tickwheel."), name
