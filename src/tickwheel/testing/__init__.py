"""Tools for testing what receives tickwheel's callbacks, behind the ``testing`` extra.

`Receiver` is an HTTP server on aiohttp that records every request, checks its signature and
answers as told; ``tickwheel receiver`` runs one from the command line (`run_receiver`).
"""

try:
    from tickwheel.testing.receiver import Received, Receiver, Reply, describe, run_receiver
except ModuleNotFoundError as error:
    if error.name != "aiohttp":
        raise
    raise ImportError(
        "tickwheel.testing needs aiohttp: pip install 'tickwheel[testing]'", name=__name__
    ) from error

__all__ = ["Received", "Receiver", "Reply", "describe", "run_receiver"]
