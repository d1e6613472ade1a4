"""PostgreSQL writes the server rolls back whole are run again; a lost connection is
opened again. The failures are the server's own: a trigger raises the SQLSTATE of a
deadlock (or another error) the first times a row is written, counted by a sequence
(which no rollback takes back), and another session ends the store's backend."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from archivist.errors import StoreError
from archivist.testing import FakeEmbedder
from conftest import indexed, make_conversation


@pytest.fixture
def pg(pg_dsn: str) -> Iterator:
    import psycopg

    from archivist.store.postgres import PostgresStore

    schema = f"retry_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(pg_dsn, schema=schema)
    try:
        yield store
    finally:
        store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute(f'DROP SCHEMA "{schema}" CASCADE')


def fail_first(pg_dsn: str, schema: str, table: str, times: int, errcode: str) -> None:
    """Writes to ``table`` raise ``errcode`` the first ``times`` times they are tried."""
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute(f'CREATE SEQUENCE "{schema}".tries')
        con.execute(
            f'CREATE FUNCTION "{schema}".fail_first() RETURNS trigger LANGUAGE plpgsql AS $$ '
            f"BEGIN IF nextval('\"{schema}\".tries') <= {times} THEN "
            f"RAISE EXCEPTION 'injected' USING ERRCODE = '{errcode}'; END IF; "
            "RETURN NEW; END $$"
        )
        con.execute(
            f'CREATE TRIGGER fail_first BEFORE INSERT OR UPDATE ON "{schema}".{table} '
            f'FOR EACH ROW EXECUTE FUNCTION "{schema}".fail_first()'
        )


def tries(pg_dsn: str, schema: str) -> int:
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as con:
        return con.execute(f'SELECT last_value FROM "{schema}".tries').fetchone()[0]


def test_a_deadlock_victim_runs_again_and_writes_once(pg, pg_dsn: str) -> None:
    fail_first(pg_dsn, pg.schema, "meta", 2, "40P01")  # deadlock_detected
    pg.set_meta("colour", "teal")
    assert pg.meta("colour") == "teal"
    assert tries(pg_dsn, pg.schema) == 3


def test_a_conversation_retried_after_a_serialization_failure_is_stored_once(
    pg, pg_dsn: str
) -> None:
    fail_first(pg_dsn, pg.schema, "messages", 1, "40001")  # serialization_failure
    conv = make_conversation(
        "c1", [[("Ana", "hi there"), ("Lee", "we moved to Leeds"), ("Ana", "nice")]]
    )
    rows, vectors = indexed(conv, FakeEmbedder())
    result = pg.add_conversation(conv, rows, FakeEmbedder().name, vectors)
    assert result.added == 3
    assert pg.stats()["messages"] == 3
    again = pg.add_conversation(conv, rows, FakeEmbedder().name, vectors)
    assert (again.added, again.unchanged, pg.stats()["messages"]) == (0, 3, 3)


def test_a_write_that_keeps_failing_gives_up_in_one_line(pg, pg_dsn: str) -> None:
    fail_first(pg_dsn, pg.schema, "meta", 100, "40P01")
    with pytest.raises(StoreError) as err:
        pg.set_meta("colour", "teal")
    assert "set_meta failed 5 times" in str(err.value)
    assert "\n" not in str(err.value)
    assert pg.meta("colour") is None
    assert tries(pg_dsn, pg.schema) == 5


def test_other_errors_are_not_run_again(pg, pg_dsn: str) -> None:
    import psycopg

    fail_first(pg_dsn, pg.schema, "meta", 100, "P0001")  # raise_exception
    with pytest.raises(psycopg.Error):
        pg.set_meta("colour", "teal")
    assert tries(pg_dsn, pg.schema) == 1


def _end_backend(pg_dsn: str, pg) -> None:
    import psycopg

    pid = pg._db.raw.info.backend_pid
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        con.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_write_after_the_server_dropped_the_connection_reconnects(pg, pg_dsn: str) -> None:
    pg.set_meta("before", "1")
    _end_backend(pg_dsn, pg)
    pg.set_meta("after", "2")  # the write that found the connection gone runs again
    assert (pg.meta("before"), pg.meta("after")) == ("1", "2")


def test_a_read_on_a_dropped_connection_fails_in_one_line_and_the_next_reconnects(
    pg, pg_dsn: str
) -> None:
    pg.set_meta("k", "v")
    _end_backend(pg_dsn, pg)
    with pytest.raises(StoreError, match="lost the connection to PostgreSQL") as err:
        pg.meta("k")
    assert "\n" not in str(err.value)
    assert pg.meta("k") == "v"  # read from the store's own schema: its search path is back


def test_two_processes_appending_to_one_conversation_never_share_a_position(
    pg, pg_dsn: str
) -> None:
    """Two stores on their own connections (as two server processes hold them) append
    turns to one conversation at the same moments: every turn is stored once, at its own
    position, whichever committed first (the conversation's row is locked before the
    stored positions are read)."""
    import threading

    import psycopg

    from archivist.store.postgres import PostgresStore

    other = PostgresStore(pg_dsn, schema=pg.schema)
    with psycopg.connect(pg_dsn, autocommit=True) as con:  # a slow insert widens the race
        con.execute(
            f'CREATE FUNCTION "{pg.schema}".slow() RETURNS trigger LANGUAGE plpgsql AS $$ '
            "BEGIN PERFORM pg_sleep(0.02); RETURN NEW; END $$"
        )
        con.execute(
            f'CREATE TRIGGER slow BEFORE INSERT ON "{pg.schema}".messages '
            f'FOR EACH ROW EXECUTE FUNCTION "{pg.schema}".slow()'
        )
    embedder = FakeEmbedder()
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def append(store, who: str) -> None:
        try:
            for n in range(8):
                turn = [(who, f"{who} says thing {n}")]
                conv = make_conversation("shared", [turn], id_prefix=f"{who}{n}-")
                rows, vectors = indexed(conv, embedder)
                start.wait() if n == 0 else None
                store.add_conversation(conv, rows, embedder.name, vectors)
        except BaseException as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [threading.Thread(target=append, args=a) for a in ((pg, "Ana"), (other, "Lee"))]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        other.close()
    assert failures == []
    stored = [m for _, m in pg.conversation_messages("shared")]
    assert len(stored) == 16
    assert len({m.seq for m in stored}) == 16
