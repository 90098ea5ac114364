"""``tickwheel migrate``: bring a store's schema up to this tickwheel's version."""

from __future__ import annotations

from typing import Annotated

import typer

from tickwheel.cli.app import app, fail, out
from tickwheel.errors import TickwheelError
from tickwheel.stores.redaction import redact


@app.command()
def migrate(
    store: Annotated[
        str,
        typer.Option("--store", envvar="TICKWHEEL_STORE", help="The store URL to migrate."),
    ],
) -> None:
    """Apply the schema migrations a PostgreSQL store lacks; safe while workers run.

    SQLite files migrate when opened, and Redis keeps no schema: for them there is nothing
    to do.
    """
    scheme = store.partition("://")[0].lower()
    if scheme not in {"postgresql", "postgres"}:
        out.print(
            f"nothing to migrate: a {scheme}:// store needs no migrate step",
            markup=False,
            soft_wrap=True,
        )
        return
    from tickwheel.stores.postgres.connect import migrate as migrate_postgres

    try:
        before, after = migrate_postgres(store)
    except TickwheelError as error:
        fail(str(error))
    if before == after:
        out.print(
            f"{redact(store)}: schema at version {after}, nothing to do",
            markup=False,
            soft_wrap=True,
        )
    else:
        out.print(
            f"{redact(store)}: schema migrated from version {before} to {after}",
            markup=False,
            soft_wrap=True,
        )
