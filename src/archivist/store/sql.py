"""Pure SQL builders: each returns ``(sql, params)`` and is testable as a string.

User text never reaches FTS5 unquoted: ``fts_query`` turns any input, including
FTS operators and stray quotes, into a disjunction of quoted terms.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

# Words that carry no retrieval signal in conversational questions. Dropping them
# keeps BM25 from spending its ranking on "what", "did", "the".
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during each
    few for from further had has have having he her here hers herself him himself his how
    i if in into is it its itself just me more most my myself no nor not now of off on
    once only or other our ours ourselves out over own same she should so some such than
    that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves s t don didn doesn isn wasn weren won
    ve ll re d m o y also ever really get got like one go going""".split()
)

_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)?", re.UNICODE)


def query_terms(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Lower-cased word tokens of ``text`` (stopwords dropped), in order, deduplicated."""
    seen: dict[str, None] = {}
    for m in _WORD.finditer(text.lower()):
        w = m.group(0).replace("'", "")
        if w.endswith("s") and m.group(0).endswith("'s"):
            w = w[:-1]
        if not keep_stopwords and (w in STOPWORDS or len(w) < 2 and not w.isdigit()):
            continue
        seen.setdefault(w, None)
    return list(seen)


def fts_query(text: str, drop: Iterable[str] = ()) -> str | None:
    """An FTS5 MATCH expression OR-ing the quoted terms of ``text``; None if no terms.

    ``drop`` removes terms (too frequent to be worth ranking), unless that
    would leave nothing.
    """
    terms = query_terms(text)
    if not terms:
        terms = query_terms(text, keep_stopwords=True)
    if not terms:
        return None
    dropped = set(drop)
    terms = [t for t in terms if t not in dropped] or terms
    return "search_text : (" + " OR ".join('"' + t.replace('"', '""') + '"' for t in terms) + ")"


def term_probe_sql(table: str, term: str, cap: int) -> tuple[str, list]:
    """Count the documents holding ``term``, stopping at ``cap`` (cost bounded by cap)."""
    match = 'search_text : "' + term.replace('"', '""') + '"'
    return (
        f"SELECT count(*) FROM (SELECT rowid FROM {table} WHERE {table} MATCH ? LIMIT ?)",
        [match, int(cap)],
    )


def person_key(name: str) -> str:
    """The matching key of a person's name: whitespace-normalised and casefolded (any script)."""
    return " ".join(name.split()).casefold()


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
    if f.conversation is not None:
        convs = (f.conversation,) if isinstance(f.conversation, str) else tuple(f.conversation)
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
    session: str
    time: str


_MESSAGE_COLUMNS = _Columns(
    person="{a}.rowid IN (SELECT msg_rowid FROM message_people WHERE person = ?)",
    session="{a}.session = ?",
    time="{a}.ts_epoch",
)
_CLAIM_COLUMNS = _Columns(
    person="({a}.speaker_key = ? OR {a}.subject_key = ?)",  # said by or about
    session="{a}.episode_id IN (SELECT id FROM episodes WHERE session = ?)",
    time="{a}.said_epoch",
)


_EPISODE_COLUMNS = _Columns(
    person="{a}.id IN (SELECT em.episode_id FROM episode_messages em JOIN message_people mp "
    "ON mp.msg_rowid = em.msg_rowid WHERE mp.person = ?)",
    session="{a}.session = ?",
    time="CAST(strftime('%s', {a}.start_ts) AS REAL)",
)
_TABLE_COLUMNS = {
    "messages": _MESSAGE_COLUMNS,
    "claims": _CLAIM_COLUMNS,
    "episodes": _EPISODE_COLUMNS,
}


def _where(f: Filters, alias: str, cols: _Columns) -> tuple[str, list]:
    parts: list[str] = []
    params: list = []
    if f.conversation is not None:
        convs = (f.conversation,) if isinstance(f.conversation, str) else tuple(f.conversation)
        parts.append(f"{alias}.conversation IN ({','.join('?' * len(convs))})")
        params.extend(convs)
    if f.person is not None:
        parts.append(cols.person.format(a=alias))
        params += [person_key(f.person)] * cols.person.count("?")
    if f.speaker is not None:
        if cols is _EPISODE_COLUMNS:  # episodes have no speaker: those the person took part in
            parts.append(cols.person.format(a=alias))
        else:
            parts.append(f"{alias}.speaker_key = ?")
        params.append(person_key(f.speaker))
    if f.session is not None:
        parts.append(cols.session.format(a=alias))
        params.append(int(f.session))
    if f.since is not None:
        parts.append(f"{cols.time.format(a=alias)} >= ?")
        params.append(f.since.timestamp())
    if f.until is not None:
        parts.append(f"{cols.time.format(a=alias)} <= ?")
        params.append(f.until.timestamp())
    return (" AND ".join(parts) or "1"), params


def filter_clause(f: Filters, alias: str = "m") -> tuple[str, list]:
    """WHERE fragment (without WHERE) restricting message rows ``alias`` to the filters."""
    return _where(f, alias, _MESSAGE_COLUMNS)


def keyword_search_sql(match: str, f: Filters, limit: int) -> tuple[str, list]:
    """BM25-ranked message rowids matching ``match`` under the filters.

    Conversation and person filters go into the MATCH itself (scope tokens);
    the SQL filters still apply, so the result is exact either way. BM25 weighs
    only the text column.
    """
    return _ranked_sql("messages", "m", "rowid", match, f, limit)


def _ranked_sql(
    table: str, alias: str, key: str, match: str, f: Filters, limit: int
) -> tuple[str, list]:
    """BM25 over ``{table}_fts`` (text column only), scope tokens in the MATCH, SQL filters."""
    scope = scope_match(f)
    full = f"{scope} AND {match}" if scope else match
    where, params = _where(f, alias, _TABLE_COLUMNS[table])
    sql = (
        f"SELECT {alias}.{key}, bm25({table}_fts, 1.0, 0.0) AS score FROM {table}_fts "
        f"JOIN {table} {alias} ON {alias}.{key} = {table}_fts.rowid "
        f"WHERE {table}_fts MATCH ? AND {where} "
        "ORDER BY score LIMIT ?"
    )
    return sql, [full, *params, int(limit)]


def filtered_rowids_sql(f: Filters) -> tuple[str, list]:
    """Rowids of the messages the filters admit, ascending (for exact vector search)."""
    where, params = filter_clause(f)
    return f"SELECT m.rowid FROM messages m WHERE {where} ORDER BY m.rowid", params


def claim_filter_clause(f: Filters, alias: str = "c") -> tuple[str, list]:
    """WHERE fragment for claims: a person filter matches the speaker or the subject."""
    return _where(f, alias, _CLAIM_COLUMNS)


def claim_keyword_search_sql(match: str, f: Filters, limit: int) -> tuple[str, list]:
    """BM25-ranked claim ids matching ``match`` under the filters (scope tokens in the MATCH)."""
    return _ranked_sql("claims", "c", "id", match, f, limit)


def filtered_claim_ids_sql(f: Filters) -> tuple[str, list]:
    """Ids of the claims the filters admit, ascending."""
    where, params = claim_filter_clause(f)
    return f"SELECT c.id FROM claims c WHERE {where} ORDER BY c.id", params


def episode_keyword_search_sql(match: str, f: Filters, limit: int) -> tuple[str, list]:
    """BM25-ranked episode ids (title + narrative) under the filters."""
    return _ranked_sql("episodes", "e", "id", match, f, limit)


def filtered_episode_ids_sql(f: Filters) -> tuple[str, list]:
    """Ids of the episodes the filters admit, ascending."""
    where, params = _where(f, "e", _EPISODE_COLUMNS)
    return f"SELECT e.id FROM episodes e WHERE {where} ORDER BY e.id", params
