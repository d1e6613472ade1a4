"""The store registry: which backend a Settings names, opened (its driver imported lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..clock import Clock, system_clock
from ..errors import ConfigError

if TYPE_CHECKING:
    from ..config import Settings
    from .base import Store


def open_store(settings: Settings, clock: Clock = system_clock) -> Store:
    """The configured backend: a SQLite file (default) or a PostgreSQL schema, stamping
    its rows with ``clock``."""
    if settings.store == "postgres":
        try:
            from .postgres import PostgresStore
        except ImportError as e:  # psycopg is optional
            raise ConfigError(
                "store 'postgres' needs psycopg: pip install 'archivist[postgres]' "
                "(from a clone: pip install '.[postgres]')"
            ) from e
        return PostgresStore(
            settings.pg_dsn,
            schema=settings.pg_schema,
            clock=clock,
            pool_size=settings.pg_pool_size,
        )
    from .sqlite import SQLiteStore

    return SQLiteStore(settings.resolved_db_path(), clock=clock)
