"""Every Python example in the README runs as pasted; one that calls the service at
127.0.0.1:8080 runs against a ``tickwheel serve`` of its own, on a free port."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from cli.cli_support import Service

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
SERVICE = "http://127.0.0.1:8080"


def test_readme_has_examples() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("code", EXAMPLES, ids=[f"example{n}" for n in range(len(EXAMPLES))])
def test_readme_example_runs(code: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    env = dict(os.environ)
    if "DATABASE_URL" in code:  # the PostgreSQL examples, on the session's own server
        env["DATABASE_URL"] = request.getfixturevalue("postgres_server").url
    # as `make run` serves it
    served = ("--store", "memory://", "--allow-private-targets")
    service = Service(tmp_path, *served) if SERVICE in code else None
    try:
        if service is not None:
            code = code.replace(SERVICE, service.url)
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
            env=env,
        )
    finally:
        if service is not None:
            service.stop()
    assert result.returncode == 0, result.stderr
