"""Peers benchmark (issue 24): tickwheel beside saq, huey, dramatiq, arq, celery, rq, taskiq,
procrastinate and APScheduler, in one run: enqueue, drain, a burst due at one instant and a
spread due over 20 s (lateness, early, lost).

Run ``python bench/peers.py`` (``--jobs N``, default 5,000; ``--spread-s``; ``--peers a,b``;
``--markdown PATH|-``). The peers are never a dependency of tickwheel: each lives in a
throwaway venv of its own (their pins clash: arq wants redis-py < 6, celery's kombu >= 6.1),
which ``--make-venvs`` creates from the package index (``VENVS`` lists what each gets)::

    python bench/peers.py --make-venvs      # /tmp/peers-venvs/<peer>, then the run

Every row, tickwheel's too, is one process running ``scenarios/peers/peer_run.py`` (the
phases and what they time are in its docstring): a peer under its venv's Python, tickwheel
under this one. All share one private redis-server; procrastinate gets a private PostgreSQL
(initdb and pg_ctl in a temp dir, a free port, as ``tests/pg_server.py`` starts it). A peer
not installed, failing or over its time gets a row saying why; workers a row started in
sessions of their own are killed by their process group once the row ends. Traffic goes to
127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.machine import OtherLoad, machine_table, sample_other_load
from harness.redis_server import private_redis
from harness.report import Table, emit, finish, fmt, progress

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pg_server import PostgresServer, pg_binary

PEER_RUN = Path(__file__).parent / "scenarios" / "peers" / "peer_run.py"
PEER_TIMEOUT_S = 600
PHASES = ("drain", "burst", "spread")
ROWS = (
    "tickwheel", "tickwheel-add_many", "tickwheel-scheduler", "saq", "huey", "dramatiq", "arq", "celery", "rq",
    "taskiq", "taskiq-1s", "procrastinate", "apscheduler",
)  # fmt: skip
VENVS: dict[str, list[str]] = {
    "saq": ["saq", "redis", "typing_extensions"],  # saq imports it undeclared
    "huey": ["huey", "redis"],
    "dramatiq": ["dramatiq[redis]"],
    "arq": ["arq"],
    "celery": ["celery[redis]"],
    "rq": ["rq"],
    "taskiq": ["taskiq", "taskiq-redis"],
    "procrastinate": ["procrastinate", "psycopg[binary]"],
    "apscheduler": ["apscheduler"],
}


@dataclass
class Row:
    name: str
    found: dict[str, Any] = field(default_factory=dict)
    why: str = ""  # why there are no figures
    other_cpus: float = 0.0


def venv_of(name: str) -> str:
    return name.split("-")[0]


def make_venvs(root: Path) -> None:
    """Create the peers' venvs that are missing, each from the package index."""
    for name, packages in VENVS.items():
        python = root / name / "bin" / "python"
        if python.exists():
            continue
        progress(f"venv {root / name}: pip install {' '.join(packages)}")
        subprocess.run(["python3", "-m", "venv", str(root / name)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *packages], check=True)


def kill_groups(directory: Path) -> None:
    """SIGKILL the process group of each worker a row started and left running."""
    for path in directory.glob("*.pgid"):
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.killpg(int(path.read_text()), signal.SIGKILL)
        path.unlink()


def run_row(name: str, args: argparse.Namespace, redis_url: str, pg_url: str, pids: Any) -> Row:
    """One row in a process of its own; its figures, or why there are none."""
    if name.startswith("tickwheel"):
        python = Path(sys.executable)
    else:
        python = args.venvs / venv_of(name) / "bin" / "python"
    if not python.exists():
        return Row(name, why=f"not installed: no {python} (run with --make-venvs)")
    command = [
        str(python), str(PEER_RUN), name, "--redis", redis_url, "--postgres", pg_url,
        "--jobs", str(args.jobs), "--spread-s", str(args.spread_s),
    ]  # fmt: skip
    if name == "tickwheel-add_many":
        command += ["--phases", "enqueue"]  # its other columns are tickwheel's row
    if name == "tickwheel-scheduler":
        command += ["--phases", "enqueue,burst,spread"]  # no worker to start after adds
    env = dict(os.environ, PEERS_PGID_DIR=str(pids))
    env.pop("PYTHONPATH", None)
    other = OtherLoad(args.redis_pid)
    before = os.times()
    started = time.monotonic()
    try:
        out = subprocess.run(
            command, capture_output=True, text=True, timeout=PEER_TIMEOUT_S, check=True, env=env
        )
    except subprocess.CalledProcessError as error:
        last = (error.stderr.strip().splitlines() or ["no output"])[-1]
        return Row(name, why=f"failed: {last[:160]}")
    except subprocess.TimeoutExpired:
        return Row(name, why=f"over {PEER_TIMEOUT_S} s")
    finally:
        kill_groups(pids)
    after = os.times()
    children_s = (after.children_user + after.children_system) - (
        before.children_user + before.children_system
    )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    # the row's own process and its children are not "other"
    other_cpus = max(0.0, other.other() - children_s / (time.monotonic() - started))
    return Row(name, found, other_cpus=other_cpus)


def ms(value: float | None) -> str:
    if value is None:
        return "—"
    return fmt(value, 1) if abs(value) < 100 else fmt(value)


def figures(row: Row) -> list[str]:
    f = row.found
    if row.why:
        return [row.name, "—", row.why, *["—"] * 11]
    enqueue_only = row.name == "tickwheel-add_many"
    late = "" if f.get("burst_in_time", True) and f.get("spread_in_time", True) else " (late start)"
    cells = [
        row.name + late,
        f["version"],
        fmt(f["enqueue_per_s"]),
        fmt(f.get("drain_per_s")),
        ms(f.get("burst_last_ms")),
        ms(f.get("burst_p99_ms")),
        fmt(f.get("burst_lost")),
        ms(f.get("spread_p50_ms")),
        ms(f.get("spread_p99_ms")),
        fmt(None if enqueue_only else f["burst_early"] + f["spread_early"]),
        fmt(f.get("spread_lost")),
        fmt(None if enqueue_only else sum(f.get(f"{p}_again", 0) for p in PHASES)),
        fmt(None if enqueue_only else f["grace_s"]),
        f"{row.other_cpus:.2f}",
    ]
    return cells


def tables(rows: list[Row], args: argparse.Namespace) -> list[Table]:
    main = Table(
        f"Peers: {args.jobs:,} jobs a phase; burst due at one instant, spread over "
        f"{args.spread_s:g} s",
        [
            "library", "version", "enqueue /s", "drain /s", "burst: last ran ms",
            "burst p99 ms", "burst lost", "spread p50 ms", "spread p99 ms", "early",
            "spread lost", "ran twice", "grace s", "other CPUs",
        ],
    )  # fmt: skip
    main.rows = [figures(row) for row in rows]
    main.notes = [
        "enqueue: one call per job, sequential (tickwheel-add_many: 1,000 a call); drain: "
        "jobs due now enqueued beforehand, from the worker's start (a worker process: once "
        "ready) until the last ran (tickwheel-scheduler: none, its timers fire as added); burst: every job due at one instant "
        "(3 s + 3 x the enqueue's time ahead), 'last ran' is from that instant; spread: "
        "due evenly; lateness = when the no-op job ran (this host's clock, µs) - its due ms",
        "early: runs before the due time, burst and spread; lost: not run within the grace "
        "after the last due time: 15 s (taskiq with its default scheduler: 75 s) plus 1.5 x "
        "the row's drain time for as many jobs, at most 300 s (the 'grace s' column); ran "
        "twice: a job run again in any phase; '(late start)': the timed phases' enqueue "
        "outlasted their lead (3 s + 3 x the enqueue column's time), so the first due jobs "
        "were not all enqueued by their due time",
        "other CPUs: what processes other than the row's own (its worker processes) and the "
        "redis-server kept busy during that row; PostgreSQL's backends count as other",
    ]
    how = Table("How each ran", ["library", "worker settings", "scheduling at a time"])
    how.rows = [
        [row.name, row.found.get("settings", "—"), row.found.get("timing", "—")] for row in rows
    ]
    return [main, how]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=5_000)
    parser.add_argument("--spread-s", type=float, default=20.0)
    parser.add_argument("--peers", default=",".join(ROWS), help="rows, comma-separated")
    parser.add_argument("--venvs", type=Path, default=Path("/tmp/peers-venvs"))
    parser.add_argument("--make-venvs", action="store_true")
    parser.add_argument("--markdown", metavar="PATH|-")
    args = parser.parse_args(argv)
    start_s = time.monotonic()
    if args.make_venvs:
        make_venvs(args.venvs)
    out: list[Table] = []
    emit(machine_table(sample_other_load()), out)
    postgres = PostgresServer()
    with private_redis("tickwheel-bench-peers-") as server, tempfile.TemporaryDirectory() as pids:
        try:
            postgres.start()
            version = subprocess.run(
                [pg_binary("postgres"), "--version"], capture_output=True, text=True, check=False
            ).stdout.strip()
            out[0].rows += server.rows()
            out[0].rows.append(
                ["postgres", f"{version} on 127.0.0.1:{postgres.port} (own, fsync off)"]
            )
            args.redis_pid = server.pid
            rows = []
            for name in args.peers.split(","):
                progress(name)
                rows.append(run_row(name, args, server.url, postgres.url, Path(pids)))
                progress(f"{name}: {rows[-1].why or 'done'}")
        finally:
            postgres.remove()
    for table in tables(rows, args):
        emit(table, out)
    finish(out, start_s, args.markdown, "Peers benchmark")


if __name__ == "__main__":
    main()
