"""The static pages: the dashboard and the API docs, each reading the JSON API from the browser.

The pages and their scripts are public and hold no data and no secret (the API calls they make
carry the token the user types). They are served from a fixed table, read once when the app is
built, by handlers that read nothing of the request. A strict Content-Security-Policy keeps
any other script off them: the dashboard runs only its own script, allows only its own style
block (by hash) and, through Trusted Types, no string-to-HTML sink at all. The docs page runs
Swagger UI 5.35.0 from files shipped in the package (``static/swagger-ui/``, the npm release's
files, checked against its integrity hashes): it works without internet, and no request leaves
the machine.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Awaitable, Callable
from importlib import resources

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_LOCKED = "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"


def _read(name: str) -> bytes:
    return resources.files("tickwheel.service").joinpath("static", *name.split("/")).read_bytes()


def _style_hashes(html: bytes) -> str:
    """The CSP sources allowing exactly the page's own ``<style>`` blocks."""
    blocks = re.findall(rb"<style>(.*?)</style>", html, re.DOTALL)
    return " ".join(
        f"'sha256-{base64.b64encode(hashlib.sha256(block).digest()).decode()}'" for block in blocks
    )


_DASHBOARD_POLICY = (
    "default-src 'none'; script-src 'self'; "
    f"style-src {_style_hashes(_read('dashboard.html'))}; connect-src 'self'; "
    f"require-trusted-types-for 'script'; trusted-types 'none'; {_LOCKED}"
)
# Swagger UI sets style attributes as it renders, hence 'unsafe-inline' for styles alone
_DOCS_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    f"img-src 'self' data:; connect-src 'self'; {_LOCKED}"
)
_CSS = "text/css; charset=utf-8"
_HTML = "text/html; charset=utf-8"
_JS = "text/javascript; charset=utf-8"
PAGES = {
    "/dashboard": ("dashboard.html", _HTML, _DASHBOARD_POLICY),
    "/dashboard.js": ("dashboard.js", _JS, _DASHBOARD_POLICY),
    "/docs": ("docs.html", _HTML, _DOCS_POLICY),
    "/docs.js": ("docs.js", _JS, _DOCS_POLICY),
    "/docs/swagger-ui-bundle.js": ("swagger-ui/swagger-ui-bundle.js", _JS, _DOCS_POLICY),
    "/docs/swagger-ui.css": ("swagger-ui/swagger-ui.css", _CSS, _DOCS_POLICY),
}
"""Path -> packaged file, media type and policy: the only files these routes can answer."""


def _endpoint(name: str, media_type: str, policy: str) -> Callable[[Request], Awaitable[Response]]:
    content = _read(name)
    headers = {"Content-Security-Policy": policy, "X-Content-Type-Options": "nosniff"}

    async def page(request: Request) -> Response:
        return Response(content, media_type=media_type, headers=headers)

    return page


def static_routes() -> list[Route]:
    """The pages as plain routes: outside the OpenAPI document and without parameters."""
    return [Route(path, _endpoint(*PAGES[path]), methods=["GET"]) for path in PAGES]
