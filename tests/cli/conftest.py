"""The CLI's tests run commands in process against a real ``tickwheel serve``: `tw`."""

from service.cli_support import tw

__all__ = ["tw"]
