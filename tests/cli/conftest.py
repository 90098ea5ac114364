"""The CLI's tests run commands in process against a real ``tickwheel serve``: `tw`."""

from .cli_support import tw

__all__ = ["tw"]
