"""Tenant schemas on one PostgreSQL database: pgvector is shared by all of them, so the
first tenant to open a store on a database without it does not take it into its schema."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from archivist.testing import FakeEmbedder
from conftest import indexed, make_conversation


def put(store, conv) -> None:
    """The conversation's messages and their vectors, as the service hands them over."""
    rows, vectors = indexed(conv, FakeEmbedder())
    store.add_conversation(conv, rows, FakeEmbedder().name, vectors)


@pytest.fixture
def fresh_db(pg_dsn: str) -> Iterator[str]:
    """A new database on the test server, with no extension installed yet."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"tenants_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_conninfo(pg_dsn, dbname=name)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_every_tenant_sees_pgvector_and_dropping_one_keeps_the_others(fresh_db: str) -> None:
    import psycopg

    from archivist.store.postgres import PostgresStore

    first = PostgresStore(fresh_db, schema="tenant_a")
    second = PostgresStore(fresh_db, schema="tenant_b")  # failed: type "vector" does not exist
    try:
        for store in (first, second):
            put(store, make_conversation("c", [[("Ana", "I moved to Lisbon.")]]))
        with psycopg.connect(fresh_db, autocommit=True) as con:
            (where,) = con.execute(
                "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n "
                "ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
            ).fetchone()
            assert where == "public"
        first.close()
        with psycopg.connect(fresh_db, autocommit=True) as con:
            con.execute("DROP SCHEMA tenant_a CASCADE")
        put(second, make_conversation("d", [[("Lee", "Still in Porto.")]]))
        assert second.stats()["messages"] == 2
    finally:
        first.close()
        second.close()
