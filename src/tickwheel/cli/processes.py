"""The process commands: serve, worker, receiver (with the ``testing`` extra) and bench."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from tickwheel.cli.app import app, err, fail
from tickwheel.cli.attempt_options import AttemptHistoryOption, AttemptRetentionOption
from tickwheel.cli.secret_files import secret_from
from tickwheel.errors import InvalidArgument, StoreUnavailable, TickwheelError

MAX_GRACE_S = 3600.0
"""The longest --grace: a stop that waits longer than an hour is a hung process."""
MAX_LEASE_S = 3600.0
"""The longest --lease: a dead worker's timers come back after it, however late."""
MAX_CONCURRENCY = 10_000
"""The most callbacks in flight at once; each holds a socket, so more runs out of descriptors."""

GraceOption = Annotated[
    float | None,
    typer.Option(
        max=MAX_GRACE_S,
        help="Seconds running callbacks get to finish on SIGTERM before hand-back (default: 10).",
    ),
]
LeaseOption = Annotated[
    float | None,
    typer.Option(
        min=1.0,
        max=MAX_LEASE_S,
        help="Seconds a claimed timer stays this worker's if it dies: another takes it after "
        "(renewed while alive; default: 6).",
    ),
]
OccurrenceRetentionOption = Annotated[
    int | None,
    typer.Option(
        min=0,
        max=86_400,
        metavar="SECONDS",
        help="How long a schedule's done occurrences are kept (default: 3600).",
    ),
]
QueueOption = Annotated[
    list[str] | None,
    typer.Option("--queue", help="Fire only this queue (repeat for more; default: every queue)."),
]
SigningSecretOption = Annotated[
    str | None, typer.Option(help="Sign callbacks with HMAC-SHA256.", show_default=False)
]
SigningSecretFileOption = Annotated[
    str | None,
    typer.Option(
        metavar="PATH",
        help="Read the signing secret from this file (keeps it out of `ps`).",
        show_default=False,
    ),
]
_STEP = re.compile(r"\[(\d+)/(\d+)\] (.*)")


def _settings_or_exit(**overrides: Any) -> Any:
    from tickwheel.service.settings import ServiceSettings

    try:
        return ServiceSettings.from_env(**overrides)
    except InvalidArgument as error:
        fail(str(error), 2)


def _tenants_or_exit(path: str | None) -> Any:
    """The tenants of the tokens file at `path` (None without one); a bad file exits 2."""
    if path is None:
        return None
    from tickwheel.service.tenants import load_tenants

    try:
        return load_tenants(path)
    except InvalidArgument as error:
        fail(str(error), 2)


def _worker_settings(
    *,
    queues: tuple[str, ...] | None = None,
    concurrency: int | None = None,
    grace: float | None,
    lease: float | None,
) -> Any:
    """Return `WorkerSettings` with the options given on the command line, or exit 2."""
    from tickwheel.engine.settings import WorkerSettings

    tuning: dict[str, Any] = {
        "queues": queues,
        "concurrency": concurrency,
        "grace_s": grace,
        "lease_ms": None if lease is None else round(lease * 1000),
    }
    try:
        return WorkerSettings(
            **{name: value for name, value in tuning.items() if value is not None}
        )
    except InvalidArgument as error:
        fail(str(error), 2)


def _run_or_exit(main: Any) -> None:
    import logging

    from tickwheel.service.serve import run

    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        run(main)
    except InvalidArgument as error:
        fail(str(error), 2)
    except (OSError, StoreUnavailable, TickwheelError) as error:
        fail(str(error))
    except KeyboardInterrupt:  # a second Ctrl-C while stopping
        raise typer.Exit(130) from None


@app.command()
def serve(
    ctx: typer.Context,
    host: Annotated[
        str | None, typer.Option(help="Address to listen on (default: 127.0.0.1).")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port to listen on, 0 for any (default: 8080).")
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(
            "--store",
            help="memory://, sqlite:///path.db, redis://host:port/db, redis+cluster://host:port "
            "or postgresql://user@host:port/db (default: sqlite:///./tickwheel.db).",
        ),
    ] = None,
    allow_private_targets: Annotated[
        bool, typer.Option(help="Let callbacks reach loopback and private addresses.")
    ] = False,
    token: Annotated[
        str | None, typer.Option(help="Require Authorization: Bearer TOKEN.", show_default=False)
    ] = None,
    token_file: Annotated[
        str | None,
        typer.Option(
            metavar="PATH",
            help="Read the token from this file (keeps it out of `ps`).",
            show_default=False,
        ),
    ] = None,
    tokens: Annotated[
        str | None,
        typer.Option(
            "--tokens",
            metavar="FILE",
            help="Tenants: a TOML file of [[token]] tables (name, token or token_file, queues, "
            "role, quotas); --token is then one more admin (env TICKWHEEL_TOKENS_FILE).",
            show_default=False,
        ),
    ] = None,
    signing_secret: SigningSecretOption = None,
    signing_secret_file: SigningSecretFileOption = None,
    insecure: Annotated[
        bool,
        typer.Option(
            "--insecure",
            help="Serve on a non-loopback address without a token (anyone reaching it may use it).",
        ),
    ] = False,
    allowed_hosts: Annotated[
        str | None,
        typer.Option(
            metavar="HOST,...",
            help="Host header names served besides loopback ones and --host, comma-separated "
            "(* for any, behind a proxy that checks the Host); others get 421.",
            show_default=False,
        ),
    ] = None,
    no_worker: Annotated[bool, typer.Option("--no-worker", help="Serve the API only.")] = False,
    api_workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=64,
            help="Processes answering the API on the one port, for more cores (default: 1; "
            "a store they share, not memory://).",
        ),
    ] = None,
    max_queues: Annotated[
        int | None, typer.Option(min=1, help="Queues the store may hold (default: 100000).")
    ] = None,
    max_schedules: Annotated[
        int | None, typer.Option(min=1, help="Schedules the store may hold (default: 100000).")
    ] = None,
    max_limits: Annotated[
        int | None, typer.Option(min=1, help="Host limits the store may hold (default: 100000).")
    ] = None,
    min_schedule_interval: Annotated[
        int | None,
        typer.Option(min=1, metavar="SECONDS", help="Least time between occurrences (default: 1)."),
    ] = None,
    occurrence_retention: OccurrenceRetentionOption = None,
    attempt_history: AttemptHistoryOption = None,
    attempt_retention: AttemptRetentionOption = None,
    queue: QueueOption = None,
    grace: GraceOption = None,
    lease: LeaseOption = None,
) -> None:
    """Run the HTTP API and a worker in one process (TICKWHEEL_* variables set the defaults)."""
    from tickwheel.service.serve import serve as run_service
    from tickwheel.service.settings import split_hosts

    settings = _settings_or_exit(
        host=host,
        port=port,
        store_url=store,
        allow_private_targets=True if allow_private_targets else None,
        token=secret_from(ctx, "token", token, token_file),
        signing_secret=secret_from(ctx, "signing_secret", signing_secret, signing_secret_file),
        worker=False if no_worker else None,
        insecure=True if insecure else None,
        allowed_hosts=None if allowed_hosts is None else split_hosts(allowed_hosts),
        tenants=_tenants_or_exit(tokens),
        max_queues=max_queues,
        max_schedules=max_schedules,
        max_limits=max_limits,
        min_schedule_interval_s=min_schedule_interval,
        occurrence_retention_s=occurrence_retention,
        api_workers=api_workers,
        attempt_history=attempt_history,
        attempt_retention_s=attempt_retention,
    )
    worker_settings = _worker_settings(
        queues=tuple(queue) if queue else None, grace=grace, lease=lease
    )
    _run_or_exit(run_service(settings, worker_settings=worker_settings))


@app.command()
def worker(
    ctx: typer.Context,
    store: Annotated[
        str | None,
        typer.Option(
            "--store", help="The store URL (default: TICKWHEEL_STORE or the SQLite file)."
        ),
    ] = None,
    queue: QueueOption = None,
    allow_private_targets: Annotated[
        bool, typer.Option(help="Let callbacks reach loopback and private addresses.")
    ] = False,
    signing_secret: SigningSecretOption = None,
    signing_secret_file: SigningSecretFileOption = None,
    concurrency: Annotated[
        int | None,
        typer.Option(
            min=1, max=MAX_CONCURRENCY, help="Callbacks in flight at once (default: 512)."
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            min=0, max=65535, help="Serve Prometheus metrics on 127.0.0.1:PORT/metrics (0: any)."
        ),
    ] = None,
    grace: GraceOption = None,
    lease: LeaseOption = None,
    occurrence_retention: OccurrenceRetentionOption = None,
    attempt_history: AttemptHistoryOption = None,
    attempt_retention: AttemptRetentionOption = None,
) -> None:
    """Run a worker alone: fire due timers of a shared store (Redis) next to `serve --no-worker`."""
    from tickwheel.service.serve import work

    settings = _settings_or_exit(
        store_url=store,
        allow_private_targets=True if allow_private_targets else None,
        signing_secret=secret_from(ctx, "signing_secret", signing_secret, signing_secret_file),
        occurrence_retention_s=occurrence_retention,
        attempt_history=attempt_history,
        attempt_retention_s=attempt_retention,
    )
    worker_settings = _worker_settings(
        queues=tuple(queue) if queue else None,
        concurrency=concurrency,
        grace=grace,
        lease=lease,
    )
    _run_or_exit(
        work(
            settings.store_url,
            worker_settings,
            signing_secret=settings.signing_secret,
            allow_private_targets=settings.allow_private_targets,
            metrics_port=metrics_port,
            store_settings=settings.store_settings(),
        )
    )


@app.command()
def receiver(
    ctx: typer.Context,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 9000,
    secret: Annotated[
        str | None,
        typer.Option(
            envvar="TICKWHEEL_SIGNING_SECRET",
            help="Verify Tickwheel-Signature with it.",
            show_default=False,
        ),
    ] = None,
    secret_file: Annotated[
        str | None,
        typer.Option(
            envvar="TICKWHEEL_SIGNING_SECRET_FILE",
            metavar="PATH",
            help="Read the secret from this file (keeps it out of `ps`).",
            show_default=False,
        ),
    ] = None,
    accept_v1: Annotated[
        bool,
        typer.Option(
            "--accept-v1",
            help="Accept a signature without v2 (v1 binds the body alone), while migrating "
            "from senders that sign v1 only.",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option(help="Do not print each request.")] = False,
) -> None:
    """Run a tiny callback receiver that prints every request and checks its signature."""
    try:
        from tickwheel.testing import run_receiver
    except ImportError as error:  # the testing extra is not installed
        fail(str(error), 2)

    secret = secret_from(ctx, "secret", secret, secret_file)
    try:
        run_receiver(host, port, secret, quiet, accept_v1=accept_v1)
    except OSError as error:
        fail(f"cannot listen on {host}:{port}: {error.strerror or error}")


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def bench(
    ctx: typer.Context,
    bench_dir: Annotated[
        Path | None,
        typer.Option(
            "--bench-dir",
            metavar="DIR",
            help="A checkout's bench/ directory (default: bench/ of the checkout around the "
            "current directory).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run the engine benchmark (bench/engine.py); extra arguments go to it."""
    raise typer.Exit(_run_bench(_bench_script(bench_dir), list(ctx.args)))


def _bench_script(bench_dir: Path | None) -> Path:
    """Return bench/engine.py of `bench_dir`, or of the checkout the current directory is in.

    The benchmarks live in the repository, not in the package: an installed tickwheel has none,
    so a checkout has to be named or stood in.
    """
    if bench_dir is not None:
        script = bench_dir / "engine.py"
        if not script.is_file():
            fail(f"{script} not found: --bench-dir names the bench/ directory of a checkout", 2)
        return script
    here = Path.cwd()
    for root in (here, *here.parents):
        script = root / "bench" / "engine.py"
        if script.is_file():
            return script
    fail(
        "bench/engine.py not found: run `tickwheel bench` inside a tickwheel checkout "
        "(git clone, then cd into it), or give --bench-dir",
        2,
    )


def _run_bench(script: Path, args: list[str]) -> int:
    """Run the benchmark with this interpreter under a progress bar; return its exit status.

    The benchmark draws its own bar only on a terminal; piped, it writes ``[done/total] what``
    lines to stderr, which drive the bar here (on stderr, when that is a terminal) instead of
    scrolling by. Its stdout passes through as is, so ``tickwheel bench > results.md`` works.
    """
    import os
    import subprocess
    import threading

    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, str(script), *args]
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    )
    task = progress.add_task("bench/engine.py", total=None)

    def follow(stream: Any) -> None:
        for line in stream:
            text = line.rstrip("\n")
            step = _STEP.fullmatch(text)
            if step and not progress.disable:
                done, total, what = int(step[1]), int(step[2]), step[3]
                progress.update(task, completed=done, total=total, description=what[:50])
            else:
                progress.console.print(text, markup=False, highlight=False, soft_wrap=True)

    with (
        progress,
        subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        ) as child,
    ):
        assert child.stdout is not None
        assert child.stderr is not None
        errors = threading.Thread(target=follow, args=(child.stderr,), daemon=True)
        errors.start()
        try:
            for line in child.stdout:
                sys.stdout.write(line)
                sys.stdout.flush()
            status = child.wait()
            errors.join(timeout=5)
            return status
        except KeyboardInterrupt:
            child.terminate()
            child.wait()
            return 130
