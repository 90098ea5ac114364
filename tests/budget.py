"""How many examples a property test runs: its full count, or its count under the ``ci``
Hypothesis profile (registered in tests/conftest.py) that `make test` loads.

The strategies, the steps per example and the checks stay the same; only the number of
examples changes. Each test names both counts because their cost differs by two orders of
magnitude (a wheel step is microseconds, a Redis Cluster step three round trips). Run with
the default profile (plain ``pytest``) for the full counts, e.g. after changing the wheel, a
heap or a store script.
"""

from __future__ import annotations

from hypothesis import settings

CI_PROFILE = "ci"


def examples(*, full: int, ci: int) -> int:
    """`ci` while the ``ci`` profile is loaded (``--hypothesis-profile=ci``), else `full`."""
    return ci if settings.get_current_profile_name() == CI_PROFILE else full
