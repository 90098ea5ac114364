"""`BoundedHttpTools`: uvicorn's httptools protocol with the request head bounded.

httptools (llhttp) parses a request head of any size, buffering a header value across reads for
as long as a client sends it; h11 bounds what it buffers but costs about twice the CPU a
request. This protocol keeps httptools' parser and counts the head as it arrives: a request
target over `MAX_REQUEST_TARGET_BYTES` is answered 414, headers over `MAX_REQUEST_HEADER_BYTES`
or more than `MAX_REQUEST_HEADERS` of them 431, and the connection is closed. A head that has not
ended within the limit is refused as soon as the read that crosses it is parsed, so a connection
buffers at most the limit and one read (256 KiB) of it.
"""

from __future__ import annotations

import json

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from tickwheel.service.gate import MAX_REQUEST_HEADER_BYTES

MAX_REQUEST_HEADERS = 100
"""Header lines one request may carry (Apache's and hyper's default): a browser sends ~20."""
MAX_REQUEST_TARGET_BYTES = 8 * 1024
"""The request target (path and query); the API's longest take a cursor of 512 characters."""
# the request line's method and version, and the blank line ending the head
_HEAD_SLACK = 64


class HeadTooLargeError(Exception):
    """Raised in a parser callback to stop parsing a head over a bound; carries the answer."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


def _refusal(status: int, code: str, message: str) -> bytes:
    body = json.dumps({"error": {"code": code, "message": message, "field": None}}).encode()
    head = (
        b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
        % len(body)
    )
    return STATUS_LINE[status] + head + body


_REFUSALS = {
    414: _refusal(
        414,
        "uri_too_long",
        f"the request target is over the limit of {MAX_REQUEST_TARGET_BYTES} bytes",
    ),
    431: _refusal(
        431,
        "headers_too_large",
        f"the request headers are over the limit of {MAX_REQUEST_HEADER_BYTES} bytes "
        f"or {MAX_REQUEST_HEADERS} lines",
    ),
}


class BoundedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol that refuses a request head over the bounds and closes."""

    _head_bytes = 0  # bytes read since the last head ended, while a head is being read
    _in_head = True
    _target_bytes = 0
    _header_bytes = 0
    _header_count = 0
    _refused = 0  # the status a callback refused the head with

    def data_received(self, data: bytes) -> None:
        self._unset_keepalive_if_required()
        if self._in_head:
            self._head_bytes += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError:
            if self._refused:
                self._refuse(self._refused)
            else:
                self.logger.warning("Invalid HTTP request received.")
                self.send_400_response("Invalid HTTP request received.")
            return
        limit = MAX_REQUEST_TARGET_BYTES + MAX_REQUEST_HEADER_BYTES + _HEAD_SLACK
        if self._in_head and self._head_bytes > limit and not self.transport.is_closing():
            self._refuse(431)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._target_bytes = self._header_bytes = self._header_count = 0

    def on_url(self, url: bytes) -> None:
        self._target_bytes += len(url)
        if self._target_bytes > MAX_REQUEST_TARGET_BYTES:
            self._stop(414)
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value) + 4
        self._header_count += 1
        if (
            self._header_bytes > MAX_REQUEST_HEADER_BYTES
            or self._header_count > MAX_REQUEST_HEADERS
        ):
            self._stop(431)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._in_head = False
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_head = True
        self._head_bytes = 0
        super().on_message_complete()

    def _stop(self, status: int) -> None:
        self._refused = status
        raise HeadTooLargeError(status)

    def _refuse(self, status: int) -> None:
        self.transport.write(_REFUSALS[status])
        self.transport.close()
