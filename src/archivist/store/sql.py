"""Pure SQL builders: each returns ``(sql, params)`` and is testable as a string.

User text never reaches FTS5 unquoted: ``fts_query`` turns any input, including
FTS operators and stray quotes, into a disjunction of quoted terms.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from ..errors import InputError

# Text helpers live in archivist.lang.text; re-exported here for the store code.
from ..lang.text import STOPWORDS, fts_query, person_key, query_terms  # noqa: F401
from ..model import text_problem
from .dialect import SQLITE, Dialect


def term_probe_sql(table: str, term: str, cap: int) -> tuple[str, list]:
    """Count the documents holding ``term``, stopping at ``cap`` (cost bounded by cap),
    and the highest rowid counted (how far into the log ``cap`` documents reach)."""
    match = 'search_text : "' + term.replace('"', '""') + '"'
    return (
        f"SELECT count(*), max(rowid) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? "
        "ORDER BY rowid LIMIT ?)",
        [match, int(cap)],
    )


def scope_token(kind: str, value: str) -> str:
    """An opaque FTS token for a conversation ("c") or person ("p"): safe for any id."""
    digest = hashlib.sha1(person_key(value).encode("utf-8")).hexdigest()[:16]
    return f"{kind}{digest}"


def scope_text(conversation: str, people: Iterable[str]) -> str:
    """The ``scope`` column of a message: its conversation token and its people's tokens."""
    tokens = [scope_token("c", conversation)]
    tokens += sorted({scope_token("p", p) for p in people if p.strip()})
    return " ".join(tokens)


def scope_match(f: Filters) -> str | None:
    """The FTS MATCH clause for the conversation/person part of the filters (None if none)."""
    parts = []
    if (convs := f.conversations()) is not None:
        parts.append("(" + " OR ".join(scope_token("c", c) for c in convs) + ")")
    if f.person is not None:
        parts.append(scope_token("p", f.person))
    if f.speaker is not None:  # a speaker is one of the message's people
        parts.append(scope_token("p", f.speaker))
    return "scope : (" + " AND ".join(parts) + ")" if parts else None


@dataclass(frozen=True)
class Filters:
    """Restrictions on which messages a search may return (all optional, AND-ed)."""

    conversation: str | tuple[str, ...] | None = None
    person: str | None = None  # sent or received by this person
    speaker: str | None = None  # sent by this person
    session: int | None = None
    since: datetime | None = None
    until: datetime | None = None

    def __post_init__(self) -> None:
        """Names and ids the store could not bind (NUL byte, lone surrogate) are bad input."""
        for name in ("conversation", "person", "speaker"):
            value = getattr(self, name)
            for v in (value,) if isinstance(value, str) else value or ():
                if isinstance(v, str) and (problem := text_problem(v)):
                    raise InputError(f"{name} {v!r} {problem}")

    def conversations(self) -> tuple[str, ...] | None:
        """The conversations the filters allow (None: any)."""
        if self.conversation is None:
            return None
        return (self.conversation,) if isinstance(self.conversation, str) else self.conversation

    def is_empty(self) -> bool:
        return all(
            v is None
            for v in (
                self.conversation,
                self.person,
                self.speaker,
                self.session,
                self.since,
                self.until,
            )
        )


@dataclass(frozen=True)
class _Columns:
    """How one table answers the filters: SQL templates with ``{a}`` for its alias."""

    person: str
    speaker: str
    session: str
    time: str  # epoch seconds; ``{epoch}`` stands for the dialect's ISO-text conversion


_EPISODE_PEOPLE = (
    "{a}.id IN (SELECT em.episode_id FROM episode_messages em JOIN message_people mp "
    "ON mp.msg_rowid = em.msg_rowid WHERE mp.person = ?)"
)
_COLUMNS = {
    "messages": _Columns(
        person="{a}.rowid IN (SELECT msg_rowid FROM message_people WHERE person = ?)",
        speaker="{a}.speaker_key = ?",
        session="{a}.session = ?",
        time="{a}.ts_epoch",
    ),
    "claims": _Columns(
        person="({a}.speaker_key = ? OR {a}.subject_key = ?)",  # said by or about
        speaker="{a}.speaker_key = ?",
        session="{a}.episode_id IN (SELECT id FROM episodes WHERE session = ?)",
        time="{a}.said_epoch",
    ),
    "episodes": _Columns(
        person=_EPISODE_PEOPLE,
        speaker=_EPISODE_PEOPLE,  # episodes have no speaker: those the person took part in
        session="{a}.session = ?",
        time="{epoch}",
    ),
}
KEYS = {"messages": ("m", "rowid"), "claims": ("c", "id"), "episodes": ("e", "id")}


def where(f: Filters, table: str, alias: str, dialect: Dialect = SQLITE) -> tuple[str, list]:
    """WHERE fragment (without WHERE) restricting rows of ``table`` (as ``alias``) to ``f``."""
    cols = _COLUMNS[table]
    time = cols.time.format(a=alias, epoch=dialect.epoch(f"{alias}.start_ts"))
    parts: list[str] = []
    params: list = []
    if (convs := f.conversations()) is not None:
        cond, ps = dialect.in_ids(f"{alias}.conversation", convs)
        parts.append(cond)
        params += ps
    if f.person is not None:
        parts.append(cols.person.format(a=alias))
        params += [person_key(f.person)] * cols.person.count("?")
    if f.speaker is not None:
        parts.append(cols.speaker.format(a=alias))
        params.append(person_key(f.speaker))
    if f.session is not None:
        parts.append(cols.session.format(a=alias))
        params.append(int(f.session))
    if f.since is not None:
        parts.append(f"{time} >= ?")
        params.append(f.since.timestamp())
    if f.until is not None:
        parts.append(f"{time} <= ?")
        params.append(f.until.timestamp())
    return (" AND ".join(parts) or dialect.true), params


def filter_clause(f: Filters, alias: str = "m") -> tuple[str, list]:
    """WHERE fragment (without WHERE) restricting message rows ``alias`` to the filters."""
    return where(f, "messages", alias)


def claim_filter_clause(
    f: Filters, alias: str = "c", dialect: Dialect = SQLITE
) -> tuple[str, list]:
    """WHERE fragment for claims: a person filter matches the speaker or the subject."""
    return where(f, "claims", alias, dialect)


def ranked_sql(table: str, match: str, f: Filters, limit: int) -> tuple[str, list]:
    """BM25 over ``{table}_fts`` (text column only), scope tokens in the MATCH, SQL filters."""
    alias, key = KEYS[table]
    scope = scope_match(f)
    full = f"{scope} AND {match}" if scope else match
    cond, params = where(f, table, alias)
    sql = (
        f"SELECT {alias}.{key}, bm25({table}_fts, 1.0, 0.0) AS score FROM {table}_fts "
        f"JOIN {table} {alias} ON {alias}.{key} = {table}_fts.rowid "
        f"WHERE {table}_fts MATCH ? AND {cond} "
        "ORDER BY score LIMIT ?"
    )
    return sql, [full, *params, int(limit)]


def filtered_keys_sql(table: str, f: Filters, dialect: Dialect = SQLITE) -> tuple[str, list]:
    """Keys of the rows of ``table`` the filters admit (exact vector search), in no
    order: callers sort them. ``ORDER BY`` the key made SQLite walk the whole table in
    key order rather than use the filter's index and sort (0.25 s for 45k of 1M rows)."""
    alias, key = KEYS[table]
    cond, params = where(f, table, alias, dialect)
    return f"SELECT {alias}.{key} FROM {table} {alias} WHERE {cond}", params


def admits_more_sql(table: str, f: Filters, cap: int, dialect: Dialect = SQLITE):
    """How many rows of ``table`` the filters admit, counted up to ``cap + 1``: whether a
    filter is narrow enough to read its keys, without reading a broad one's."""
    alias, _ = KEYS[table]
    cond, params = where(f, table, alias, dialect)
    sql = f"SELECT count(*) FROM (SELECT 1 FROM {table} {alias} WHERE {cond} LIMIT ?) AS admitted"
    return sql, [*params, int(cap) + 1]
