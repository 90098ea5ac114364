"""Callbacks over HTTP: the target the engine fires through, and what it stands on.

`HttpTarget` (``http.py``) implements the engine's `Target` the way an httpx transport
implements ``BaseTransport``: the engine hands it a timer and gets an `Outcome` back, and knows
nothing of HTTP. Under it: the HTTP/1.1 client (``httpclient.py``) with its connections
(``connection.py``), pools (``pool.py``), slot shares (``shares.py``) and name lookups
(``resolver.py``); which addresses a callback may reach (``guard.py``); request signatures
(``signing.py``); and the target's settings (``settings.py``).

Names are imported on first use, so ``import tickwheel.callbacks`` loads no HTTP parser.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tickwheel.callbacks.guard import check_target_url, is_public_address
    from tickwheel.callbacks.http import HttpTarget
    from tickwheel.callbacks.settings import HttpSettings
    from tickwheel.callbacks.signing import sign, verify_signature

# where each name lives: tickwheel.callbacks.<module>
_MODULES = {
    "HttpSettings": "settings",
    "HttpTarget": "http",
    "check_target_url": "guard",
    "is_public_address": "guard",
    "sign": "signing",
    "verify_signature": "signing",
}

__all__ = [
    "HttpSettings",
    "HttpTarget",
    "check_target_url",
    "is_public_address",
    "sign",
    "verify_signature",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
