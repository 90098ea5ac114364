"""Every Python example in the README runs as pasted."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLES = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def test_readme_has_examples() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("code", EXAMPLES, ids=[f"example{n}" for n in range(len(EXAMPLES))])
def test_readme_example_runs(code: str, request: pytest.FixtureRequest) -> None:
    env = dict(os.environ)
    if "DATABASE_URL" in code:  # the PostgreSQL examples, on the session's own server
        env["DATABASE_URL"] = request.getfixturevalue("postgres_server").url
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=env,
    )
    assert result.returncode == 0, result.stderr
