"""The dashboard: one static page that reads the JSON API, so it holds no data and no secret.

The page and its script are public (the API calls they make carry the token the user types);
a strict Content-Security-Policy keeps any other script off the page.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

PAGES = {
    "/dashboard": ("dashboard.html", "text/html"),
    "/dashboard.js": ("dashboard.js", "text/javascript"),
}
_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
)


@cache
def _read(name: str) -> bytes:
    return resources.files("tickwheel.service").joinpath("static", name).read_bytes()


def dashboard_routes() -> APIRouter:
    """Serve the page and its script, outside the OpenAPI document."""
    router = APIRouter(include_in_schema=False)
    for path, (name, media_type) in PAGES.items():

        async def page(name: str = name, media_type: str = media_type) -> Response:
            return Response(
                _read(name),
                media_type=f"{media_type}; charset=utf-8",
                headers={"Content-Security-Policy": _POLICY, "X-Content-Type-Options": "nosniff"},
            )

        router.add_api_route(path, page, methods=["GET"])
    return router
