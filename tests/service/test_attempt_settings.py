"""The attempt-history settings of `serve` and `worker` reach the store: flags, variables,
bounds."""

from __future__ import annotations

import pytest

from tickwheel.errors import InvalidArgument
from tickwheel.service.settings import ServiceSettings


def test_the_store_keeps_what_the_settings_say() -> None:
    default = ServiceSettings().store_settings()
    assert (default.attempt_history, default.attempt_retention_ms) == (20, 7 * 86_400_000)
    chosen = ServiceSettings(attempt_history=0, attempt_retention_s=3600).store_settings()
    assert (chosen.attempt_history, chosen.attempt_retention_ms) == (0, 3_600_000)


def test_variables_set_them_and_flags_win(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKWHEEL_ATTEMPT_HISTORY", "5")
    monkeypatch.setenv("TICKWHEEL_ATTEMPT_RETENTION", "86400")
    from_env = ServiceSettings.from_env()
    assert (from_env.attempt_history, from_env.attempt_retention_s) == (5, 86_400)
    assert ServiceSettings.from_env(attempt_history=7).attempt_history == 7


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("attempt_history", -1),
        ("attempt_history", 1001),
        ("attempt_history", True),
        ("attempt_history", 2.5),
        ("attempt_retention_s", -1),
        ("attempt_retention_s", 10**12),
        ("attempt_retention_s", float("nan")),
    ],
)
def test_out_of_range_values_name_the_field(field: str, value: object) -> None:
    with pytest.raises(InvalidArgument, match=field):
        ServiceSettings(**{field: value})  # type: ignore[arg-type]
