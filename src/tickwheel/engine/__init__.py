"""The firing engine: claim due timers from a store, fire them on the due ms, settle the outcome."""

from tickwheel.engine.guard import check_target_url, is_public_address
from tickwheel.engine.outcome import ACKED, Outcome, Target, Verdict

__all__ = ["ACKED", "Outcome", "Target", "Verdict", "check_target_url", "is_public_address"]
