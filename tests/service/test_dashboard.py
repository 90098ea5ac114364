"""The dashboard page: public, static, locked down by its CSP, reading the API with the token."""

from __future__ import annotations

import base64
import hashlib
import re

from .conftest import ClientFactory


async def test_the_page_and_its_script_are_served_without_a_token(
    make_client: ClientFactory,
) -> None:
    async with make_client(token="secret-token") as client:
        page = await client.get("/dashboard")
        script = await client.get("/dashboard.js")
        stats = await client.get("/v1/stats")
        with_token = await client.get("/v1/stats", headers={"Authorization": "Bearer secret-token"})
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert '<script src="dashboard.js"></script>' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "secret-token" not in page.text + script.text  # the page holds no secret
    assert (stats.status_code, with_token.status_code) == (401, 200)  # its data needs the token


async def test_the_script_writes_api_data_as_text_never_as_html(
    make_client: ClientFactory,
) -> None:
    async with make_client() as client:
        script = (await client.get("/dashboard.js")).text
    assert "textContent" in script
    assert "innerHTML" not in script
    assert "insertAdjacentHTML" not in script


async def test_the_dashboard_is_not_in_the_openapi_document(make_client: ClientFactory) -> None:
    async with make_client() as client:
        paths = (await client.get("/openapi.json")).json()["paths"]
    assert not [path for path in paths if path.startswith("/dashboard")]


async def test_the_dashboard_lists_schedules_from_the_api(make_client: ClientFactory) -> None:
    async with make_client() as client:
        page = (await client.get("/dashboard")).text
        script = (await client.get("/dashboard.js")).text
        created = await client.post(
            "/v1/schedules", json={"id": "dash", "every": 60, "payload": {"n": 1}}
        )
        # the very request the script makes, with the fields it reads
        listed = await client.get("/v1/schedules?limit=50")
    assert '<tbody id="schedules"></tbody>' in page
    assert 'api("GET", "/v1/schedules?limit=50")' in script
    assert created.status_code == 201, created.text
    assert listed.status_code == 200
    [item] = listed.json()["schedules"]
    for field in ("id", "cron", "timezone", "every", "next_run", "runs", "paused", "queue"):
        assert field in item
        assert re.search(rf"\.{field}\b", script), field


async def test_the_policy_allows_only_the_page_s_own_script_and_style(
    make_client: ClientFactory,
) -> None:
    async with make_client() as client:
        page = await client.get("/dashboard")
    policy = dict(
        directive.partition(" ")[::2]
        for directive in page.headers["content-security-policy"].split("; ")
    )
    [style] = re.findall(r"<style>(.*?)</style>", page.text, re.DOTALL)
    digest = base64.b64encode(hashlib.sha256(style.encode()).digest()).decode()
    assert policy["default-src"] == "'none'"
    assert policy["script-src"] == "'self'"  # no inline script, no eval
    assert policy["style-src"] == f"'sha256-{digest}'"  # no inline style but this block
    assert policy["connect-src"] == "'self'"
    assert policy["require-trusted-types-for"] == "'script'"  # no string reaches an HTML sink
    assert policy["trusted-types"] == "'none'"
    assert "unsafe" not in page.headers["content-security-policy"]
    assert " style=" not in page.text
    assert "<script>" not in page.text  # the one script is dashboard.js


async def test_the_docs_page_loads_nothing_from_another_machine(
    make_client: ClientFactory,
) -> None:
    async with make_client(token="secret-token") as client:
        page = await client.get("/docs")
        assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        served = {asset: await client.get(f"/{asset}") for asset in assets}
    policy = page.headers["content-security-policy"]
    assert "http" not in policy  # no other origin may serve a script, a style or an image
    assert {"docs/swagger-ui-bundle.js", "docs/swagger-ui.css", "docs.js"} <= set(assets)
    for asset, answer in served.items():
        assert "//" not in asset  # relative: served by this service, token or not
        assert answer.status_code == 200, asset
    # the files are those of the Swagger UI release the page names, by their integrity hashes
    for asset, digest in re.findall(
        r'(?:src|href)="([^"]+)"\s+integrity="sha384-([^"]+)"', page.text
    ):
        body = served[asset].content
        assert base64.b64encode(hashlib.sha384(body).digest()).decode() == digest, asset
