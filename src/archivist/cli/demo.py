"""``archivist demo``: the zero-setup tour of what archivist does that a search index does not.

It ingests a small four-session conversation the package ships (Ana, a nurse,
and Lee, a cargo pilot; written for archivist, no third-party data) with the
heuristic archivist, then shows five things on it: a claim with its speaker
and evidence, a state change with its history, one question answered as of
two times, an abstention that says whose it was, and the context a turn would
get. No API key, no network, no LLM (even where one is configured), so the
output is the same on every machine.

The tour is built as one report (``--json`` prints it) and the text is drawn
from that report, so both say the same.
"""

from __future__ import annotations

import shlex
import textwrap
import time
from datetime import datetime
from importlib import resources
from pathlib import Path

import click
import platformdirs

from ..config import Settings
from ..service import MemoryService
from .common import Context, emit_json

# The script of the tour, fitted to the shipped sample (tests check each result).
CLAIM_PERSON, CLAIM_MESSAGE, CLAIM_WORD = "Ana", "S1:9", "Pixel"
CHANGE_PERSON, CHANGE_GROUP = "Lee", "health and diet"
BEFORE = datetime.fromisoformat("2024-05-01T00:00+00:00")  # Lee pescatarian, not yet vegan
AS_OF_QUESTION = "Does Lee eat fish?"
NOT_THEIRS_QUESTION, NOT_THEIRS = "When did Lee adopt a cat?", "Ana"  # Ana did
TURN = "What should I cook for Lee when he comes over tomorrow?"
TURN_PERSON = "Ana"
TURN_AT = datetime.fromisoformat("2024-07-12T18:00+01:00")  # three days after the last session
TURN_BUDGET = 200


def sample_path() -> Path:
    """The shipped sample conversation (generic JSONL format)."""
    return Path(str(resources.files("archivist") / "data" / "sample_conversation.jsonl"))


def _day(when: datetime | None) -> str | None:
    return f"{when:%Y-%m-%d}" if when else None


def _message(memory: MemoryService, conversation: str, message_id: str) -> dict:
    m = memory.get(conversation, message_id)
    return {
        "conversation": m.conversation,
        "id": m.id,
        "speaker": m.speaker,
        "addressees": list(m.addressees),
        "timestamp": m.timestamp.isoformat(),
        "text": m.text,
    }


def claim_section(memory: MemoryService) -> dict:
    """(a) One claim, who said it, about whom, since when, and the message it rests on."""
    found = [
        c
        for c in memory.claims(person=CLAIM_PERSON, limit=1000)
        if CLAIM_MESSAGE in c.evidence and CLAIM_WORD in c.text
    ]
    claim = found[0] if found else None
    evidence = _message(memory, claim.conversation, claim.evidence[0]) if claim else None
    return {"claim": claim.to_dict() if claim else None, "evidence": evidence}


def _diet(profile) -> list[dict]:
    return [e.to_dict() for e in profile[CHANGE_GROUP]]


def change_section(memory: MemoryService) -> dict:
    """(b) The person's profile before the change and now, and the conflict logged."""
    before = memory.profile(CHANGE_PERSON, at=BEFORE)
    now = memory.profile(CHANGE_PERSON)
    return {
        "person": CHANGE_PERSON,
        "group": CHANGE_GROUP,
        "before": {"at": BEFORE.isoformat(), "entries": _diet(before)},
        "now": {"at": now.at.isoformat(), "entries": _diet(now)},
        "conflicts": [
            {
                "subject": c.subject,
                "attribute": c.attribute,
                "old_value": c.old_value,
                "old_since": c.old_time.isoformat(),
                "new_value": c.new_value,
                "new_since": c.new_time.isoformat(),
                "kind": c.kind,
                "resolution": c.resolution,
                "claims": [c.old_claim, c.new_claim],
            }
            for c in memory.conflicts(subject=CHANGE_PERSON)
        ],
    }


def as_of_section(memory: MemoryService) -> dict:
    """(c) One question asked of memory as it stood at BEFORE and as it stands now."""
    asked = []
    for at in (BEFORE, None):
        answer = memory.ask(AS_OF_QUESTION, person=CHANGE_PERSON, at=at)
        asked.append({"at": at.isoformat() if at else None, "answer": answer.to_dict()})
    return {"question": AS_OF_QUESTION, "person": CHANGE_PERSON, "asked": asked}


def abstention_section(memory: MemoryService) -> dict:
    """(d) A question that pins on one person what another did."""
    return {"question": NOT_THEIRS_QUESTION, "answer": memory.ask(NOT_THEIRS_QUESTION).to_dict()}


def context_section(memory: MemoryService) -> dict:
    """(e) What a turn of TURN_PERSON would be given: the text the proxy injects."""
    found = memory.context(TURN, person=TURN_PERSON, budget_tokens=TURN_BUDGET, at=TURN_AT)
    return {"turn": TURN, "person": TURN_PERSON, "at": TURN_AT.isoformat(), **found.to_dict()}


def build_report(memory: MemoryService, db: str) -> dict:
    """Ingest the sample (idempotent) and run the five parts of the tour."""
    t0 = time.perf_counter()
    added = sum(r.added for r in memory.add(sample_path(), format="jsonl"))
    ingest_s = time.perf_counter() - t0
    stats = memory.stats()
    return {
        "db": db,
        "embedder": memory.embedder.name,
        "llm": None,
        "archivist": memory.archivist.name,
        "ingested": {"messages_added": added, "seconds": round(ingest_s, 2)},
        "stats": {k: stats[k] for k in ("messages", "sessions", "claims", "conflicts")},
        "claim": claim_section(memory),
        "state_change": change_section(memory),
        "as_of": as_of_section(memory),
        "abstention": abstention_section(memory),
        "context": context_section(memory),
    }


# -- the text ------------------------------------------------------------------------------

WIDTH = 88


def _wrap(text: str, indent: str = "   ") -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent)


def _iso(value: str) -> str:
    """An ISO time as the commands take it, to the minute."""
    return datetime.fromisoformat(value).isoformat(timespec="minutes")


def _heading(n: int, title: str, about: str) -> list[str]:
    return ["", f"{n}. {title}", *_wrap(about)]


def _said(m: dict) -> str:
    to = ", ".join(m["addressees"])
    when = datetime.fromisoformat(m["timestamp"])
    return f"{m['speaker']} to {to}, {when:%d %b %Y %H:%M} ({m['conversation']}/{m['id']})"


def _claim_text(section: dict) -> list[str]:
    lines = _heading(
        1,
        "A claim keeps its speaker and its evidence",
        "Every message is read into claims: what was said, by whom, about whom, since when "
        "('yesterday' becomes a date), each pointing at the message it came from.",
    )
    c, m = section["claim"], section["evidence"]
    if c is None or m is None:
        return [*lines, "   (not found in this store)"]
    since = c["valid_from"] or c["said_at"]
    when = "happened on" if c["kind"] == "event" else "holds since"
    lines += [
        f"   claim #{c['id']}: {c['text']}",
        f"     said by {c['speaker']}, about {c['subject']}, "
        f"{'an' if c['kind'][0] in 'aeiou' else 'a'} {c['kind']} that {when} {since[:10]}",
        f"   evidence: {_said(m)}",
        *_wrap(f'"{m["text"]}"', "     "),
    ]
    return lines


def _entries(entries: list[dict]) -> list[str]:
    lines = []
    for e in entries:
        where = ", ".join(f"{x['conversation']}/{x['message']}" for x in e["evidence"])
        lines.append(
            f"     - {e['text']}  [since {e['since'][:10]}; said by {e['speaker']}, {where}]"
        )
        for r in e["replaced"]:
            until = f" to {r['until'][:10]}" if r["until"] else ", refined"
            lines.append(f"         replaced: {r['value']} ({r['since'][:10]}{until})")
    return lines or ["     (nothing)"]


def _change_text(section: dict) -> list[str]:
    who, group = section["person"], section["group"]
    lines = _heading(
        2,
        "A change of state keeps its history",
        f"{who} was pescatarian in March and went vegan in June. The newer value closes the "
        "older one at the date it changed, the conflict is logged, and the profile can be "
        "read as it stood at any time.",
    )
    lines.append(f"   $ archivist profile {who} --at {_iso(section['before']['at'])}   # {group}")
    lines += _entries(section["before"]["entries"])
    lines.append(f"   $ archivist profile {who}   # {group}, now")
    lines += _entries(section["now"]["entries"])
    lines.append(f"   $ archivist conflicts --subject {who}")
    for c in section["conflicts"]:
        lines.append(
            f"     {c['subject']} {c['attribute']}: {c['old_value']!r} (since "
            f"{c['old_since'][:10]}) -> {c['new_value']!r} (since {c['new_since'][:10]}); "
            f"{c['kind']}, resolved {c['resolution']}"
        )
    if not section["conflicts"]:
        lines.append("     (no conflicts)")
    return lines


def _answer_lines(a: dict) -> list[str]:
    lines = _wrap(a["answer"], "     ")
    if a["quote"] and a["said_at"]:
        ids = ", ".join(f"{e['conversation']}/{e['id']}" for e in a["evidence"])
        lines.append(f"     evidence: said by {a['said_by']} on {a['said_at'][:10]} ({ids})")
    return lines


def _as_of_text(section: dict) -> list[str]:
    lines = _heading(
        3,
        "Questions about the past are answered as of then",
        "The same question, asked of memory as it stood on 1 May 2024 and as it stands now: "
        "what no longer holds is history, not the answer.",
    )
    for asked in section["asked"]:
        at = f" --at {_iso(asked['at'])}" if asked["at"] else ""
        lines.append(f"   $ archivist ask {section['question']!r} --person {section['person']}{at}")
        lines += _answer_lines(asked["answer"])
    return lines


def _abstention_text(section: dict) -> list[str]:
    a = section["answer"]
    lines = _heading(
        4,
        "It abstains, and says whose it was",
        f"{NOT_THEIRS} adopted the cat, not {CHANGE_PERSON}. Rather than hand one person's "
        "life to another, the answer abstains and names whose it was, with the evidence.",
    )
    lines.append(f"   $ archivist ask {section['question']!r}")
    lines += _answer_lines(a)
    if a["quote"]:
        lines += _wrap(f'"{a["quote"]}"', "     ")
    return lines


def _context_text(section: dict) -> list[str]:
    when = datetime.fromisoformat(section["at"])
    lines = _heading(
        5,
        "The context a turn gets",
        f"On {when:%d %b %Y} {section['person']} asks her assistant what to cook for "
        f"{CHANGE_PERSON}. Before the model answers, the proxy injects this memory "
        f"({section['budget']}-token budget): what holds now, what no longer holds marked "
        "[history].",
    )
    lines.append(
        f"   $ archivist context {section['turn']!r} --person {section['person']} "
        f"--at {_iso(section['at'])} --budget {section['budget']}"
    )
    lines += [f"     {line}".rstrip() for line in section["text"].splitlines()]
    lines.append(f"     -- {len(section['items'])} items, ~{section['tokens']} tokens")
    return lines


def render(report: dict) -> str:
    """The tour as text, drawn from ``build_report``'s report."""
    ing, stats = report["ingested"], report["stats"]
    added = ing["messages_added"]
    news = f"{added} new messages in {ing['seconds']:.1f} s" if added else "already stored"
    lines = [
        "archivist demo: Ana (a nurse) and Lee (a cargo pilot) chat in four sessions, "
        "March to July 2024.",
        f"store: {report['db']}",
        f"ingested the sample: {news} "
        f"(embedder {report['embedder']}, {report['archivist']} archivist, no LLM)",
        f"the store holds {stats['messages']} messages, {stats['claims']} claims, "
        f"{stats['conflicts']} conflict{'' if stats['conflicts'] == 1 else 's'}",
        *_claim_text(report["claim"]),
        *_change_text(report["state_change"]),
        *_as_of_text(report["as_of"]),
        *_abstention_text(report["abstention"]),
        *_context_text(report["context"]),
        "",
        f"Try it yourself: archivist --db {shlex.quote(report['db'])} timeline {CHANGE_PERSON}",
        f"or browse and correct it: archivist --db {shlex.quote(report['db'])} ui",
        "  first: pip install 'archivist[server]' (from a clone: pip install '.[server]')",
    ]
    return "\n".join(lines)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the tour as one JSON report.")
@click.pass_context
def demo(click_ctx: click.Context, as_json: bool) -> None:
    """Ingest a shipped sample conversation and show what archivist keeps and answers.

    Uses --db if given, otherwise a separate demo store in the user data dir,
    so the demo never mixes into your own memory. Runs without an LLM.
    """
    ctx: Context = click_ctx.obj
    settings: Settings = ctx.settings.with_(llm="")
    if click_ctx.parent is None or click_ctx.parent.params.get("db") is None:
        settings = settings.with_(db_path=Path(platformdirs.user_data_dir("archivist")) / "demo.db")
    with MemoryService(settings=settings) as memory:
        report = build_report(memory, str(settings.resolved_db_path()))
    if as_json:
        emit_json(report)
    else:
        click.echo(render(report))


def register(cli: click.Group) -> None:
    cli.add_command(demo)
