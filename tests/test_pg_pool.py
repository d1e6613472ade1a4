"""A PostgreSQL store's threads share a pool of connections: one thread's open write
transaction no longer holds up another thread's reads and writes, the pool never opens
more than its size, and closing it closes what is given back."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest

from archivist.errors import ConfigError, StoreError


def _store(pg_dsn: str, pool_size: int):
    from archivist.store.postgres import PostgresStore

    return PostgresStore(pg_dsn, schema=f"pool_{uuid.uuid4().hex[:10]}", pool_size=pool_size)


@pytest.fixture
def stores(pg_dsn: str) -> Iterator[list]:
    import psycopg

    made: list = []
    yield made
    for store in made:
        store.close()
        with psycopg.connect(pg_dsn, autocommit=True) as con:
            con.execute(f'DROP SCHEMA "{store.schema}" CASCADE')


def _hold_a_write(store, started: threading.Event, release: threading.Event) -> threading.Thread:
    """A thread that writes a meta row inside a transaction and keeps it open."""

    def run() -> None:
        with store._db.transaction() as db:
            db.execute("INSERT INTO meta(key, value) VALUES ('held', '1')")
            started.set()
            release.wait(30)

    thread = threading.Thread(target=run)
    thread.start()
    assert started.wait(30)
    return thread


def test_a_thread_reads_and_writes_while_another_holds_a_transaction_open(
    pg_dsn: str, stores: list
) -> None:
    store = _store(pg_dsn, pool_size=2)
    stores.append(store)
    started, release = threading.Event(), threading.Event()
    holder = _hold_a_write(store, started, release)
    try:
        done = threading.Event()

        def other() -> None:
            store.set_meta("colour", "teal")  # its own connection and transaction
            assert store.meta("held") is None  # the open transaction is not seen
            done.set()

        worker = threading.Thread(target=other)
        worker.start()
        assert done.wait(10), "the second thread waited for the first one's transaction"
        worker.join()
    finally:
        release.set()
        holder.join()
    assert (store.meta("held"), store.meta("colour")) == ("1", "teal")
    assert store._db.size == 2


def test_a_pool_of_one_makes_the_second_thread_wait_its_turn(pg_dsn: str, stores: list) -> None:
    store = _store(pg_dsn, pool_size=1)
    stores.append(store)
    started, release = threading.Event(), threading.Event()
    holder = _hold_a_write(store, started, release)
    seen: list = []
    worker = threading.Thread(target=lambda: seen.append(store.meta("held")))
    worker.start()
    worker.join(0.5)
    assert worker.is_alive(), "a second connection was opened past the pool's size"
    release.set()
    holder.join()
    worker.join(10)
    assert seen == ["1"]  # it ran after the commit, on the one connection


def test_eight_threads_share_at_most_the_pool_size_of_connections(
    pg_dsn: str, stores: list
) -> None:
    store = _store(pg_dsn, pool_size=3)
    stores.append(store)
    errors: list[BaseException] = []
    gate = threading.Barrier(8)

    def run(i: int) -> None:
        try:
            gate.wait(10)
            for j in range(20):
                store.set_meta(f"k{i}", str(j))
                assert store.meta(f"k{i}") == str(j)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert [store.meta(f"k{i}") for i in range(8)] == ["19"] * 8
    assert 1 <= store._db._opened <= 3 and len(store._db._idle) == store._db._opened


def test_closing_the_store_closes_a_connection_given_back_later(pg_dsn: str, stores: list) -> None:
    store = _store(pg_dsn, pool_size=2)
    stores.append(store)  # closed again at the end: closing twice is harmless
    started, release = threading.Event(), threading.Event()
    holder = _hold_a_write(store, started, release)
    store.close()  # the holder's connection is still taken
    release.set()
    holder.join()
    assert store._db._opened == 0 and not store._db._idle
    with pytest.raises(StoreError, match="closed"):
        store.meta("held")


def test_a_pool_needs_a_connection(pg_dsn: str) -> None:
    with pytest.raises(ConfigError, match="at least one connection"):
        _store(pg_dsn, pool_size=0)


def test_warming_a_store_opens_its_whole_pool_once_each_backend_having_read_the_tables(
    pg_dsn: str, stores: list
) -> None:
    import psycopg

    store = _store(pg_dsn, pool_size=3)
    stores.append(store)
    assert store._db._opened == 1  # a new store opens one connection, the rest on demand
    store.warm()
    assert store._db._opened == 3 and len(store._db._idle) == 3
    backends = {c.info.backend_pid for c in store._db._idle}
    with psycopg.connect(pg_dsn, autocommit=True) as con:
        # each warmed backend ran the priming statement last, naming every table
        last = dict(
            con.execute(
                "SELECT pid, query FROM pg_stat_activity WHERE pid = ANY(%s)", (list(backends),)
            ).fetchall()
        )
    primed = [q for pid, q in last.items() if "FROM person_identities" in q]
    assert len(primed) == 2  # the two it opened; the first connection ran the migrations
    store.warm()  # nothing left to open
    assert store._db._opened == 3
    store.set_meta("k", "v")  # the warmed connections serve as any other
    assert store.meta("k") == "v"
