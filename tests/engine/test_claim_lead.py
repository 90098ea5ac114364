"""`ClaimLead`: how far ahead of their due time timers are claimed."""

from __future__ import annotations

from tickwheel.engine.claim_lead import ClaimLead
from tickwheel.engine.settings import WorkerSettings

SETTINGS = WorkerSettings(batch=1_000, lookahead_ms=250, lease_ms=6_000)


def test_slow_claims_lengthen_the_lead_up_to_half_a_lease() -> None:
    lead = ClaimLead(SETTINGS)
    assert lead.ms == 250
    lead.took(0.020)
    assert lead.ms == 250  # three claims of 20 ms fit in the lookahead
    lead.took(2.0)
    assert lead.ms == 3_000


def test_a_room_of_many_batches_is_claimed_before_its_ms() -> None:
    lead = ClaimLead(SETTINGS)
    lead.took(0.020)
    lead.cover(20_000)  # 20 claims and as many again, starting half a lead before the due time
    assert lead.ms == 1_600
    lead.cover(2_000)  # a worker's room again: three claims
    assert lead.ms == 250
