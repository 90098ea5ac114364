"""The PostgreSQL store (the ``postgres`` extra: psycopg 3)."""

from tickwheel.stores.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
