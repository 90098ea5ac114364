"""The public names are the ones `tickwheel.__all__` promises, sorted and importable."""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType

import tickwheel


def test_all_is_sorted_and_complete() -> None:
    assert tickwheel.__all__ == sorted(tickwheel.__all__)
    public = {
        name
        for name in dir(tickwheel)  # the names loaded on first use included
        if not name.startswith("_")
        and not isinstance(getattr(tickwheel, name), ModuleType)  # subpackages
    }
    assert public == set(tickwheel.__all__)


def test_exported_members_belong_to_tickwheel() -> None:
    for name in tickwheel.__all__:
        member = getattr(tickwheel, name)
        assert member.__module__.startswith("tickwheel."), name


def test_a_name_whose_extra_is_missing_says_which_to_install() -> None:
    # a fresh interpreter in which the service extra's packages cannot be imported
    code = (
        "import sys\n"
        "for name in ('httptools', 'prometheus_client'):\n"
        "    sys.modules[name] = None\n"
        "import tickwheel\n"
        "tickwheel.Worker, tickwheel.consume  # the engine itself needs no extra\n"
        "try:\n"
        "    tickwheel.HttpTarget\n"
        "except ImportError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "pip install 'tickwheel[service]'" in result.stdout


def test_redis_names_the_redis_extra_when_redis_py_is_missing() -> None:
    code = (
        "import sys\n"
        "sys.modules['redis'] = None\n"
        "import tickwheel\n"
        "for attempt in (lambda: tickwheel.RedisStore,\n"
        "                lambda: tickwheel.open_store('redis://127.0.0.1:1/0')):\n"
        "    try:\n"
        "        attempt()\n"
        "    except ImportError as error:\n"
        "        print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert result.stdout.count("pip install 'tickwheel[redis]'") == 2, result.stdout
