"""Write-latency benchmark: ``add`` of one message to a stored conversation, reconciled at once.

A synthetic store of two-person chats (names, places, jobs, and changes of
state such as "I moved to Porto" or "I no longer eat meat", so reconciliation
finds duplicates and conflicts) is built once in a temp dir with the
heuristic archivist, then copied, so two identical stores differ only in
``reconcile_on_write``. The same single-message adds, each continuing an
existing conversation after its last message, alternate between the two
stores (which goes first alternates too); each ``add`` is timed with
``perf_counter``. Consolidation is manual: the heavy rounds run off the
request path in a server (background mode), so neither figure includes them.

bench/scale.py's generator draws random words with random vectors: it has no
names, places or state changes for the archivist to extract and reconcile,
so this module has its own.
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from ..config import Settings
from ..embed.base import Embedder
from ..model import Conversation, Message, Session
from ..service import MemoryService
from .metrics import percentile

TARGET_P95_MS = 50.0
MESSAGES_PER_CONVERSATION = 300
SESSION_LENGTH = 20

_NAMES = (
    "Ana Ben Carla Dev Elif Farah Goran Hana Ivan Jonas Keiko Lena Marco Nadia Omar Priya "
    "Quinn Rosa Sami Tomas Uma Viktor Wen Yara Zoe Aiden Bea Chidi Dara Emil"
).split()
_CITIES = (
    "Lisbon Porto Berlin Munich Vienna Prague Krakow Oslo Bergen Dublin Cork Madrid Valencia "
    "Lyon Marseille Turin Naples Athens Zagreb Tallinn Riga Ghent Utrecht Seattle Denver Austin"
).split()
_JOBS = (
    "software engineer,nurse,teacher,architect,pharmacist,chef,data analyst,photographer,"
    "paramedic,librarian,accountant,translator,electrician,journalist,physiotherapist"
).split(",")
_EMPLOYERS = (
    "Northwind,Contoso,Globex,Initech,Umbrella Health,Acme Labs,Blue Harbor,Stark Logistics,"
    "Wayne Foods,Vandelay Imports,Hooli,Pied Piper"
).split(",")
_CLUBS = "choir,chess club,climbing gym,book club,running club,pottery class,salsa class".split(",")
_PETS = "dog,cat,rabbit,parrot,tortoise".split(",")
_RELATIVES = "sister,brother,cousin,mother,father,neighbour,colleague".split(",")
_ACTIVITIES = (
    "hiking,camping,to a concert,to the museum,to the beach,sailing,to a food market,"
    "cycling along the river,to a wedding,to the theatre"
).split(",")
_DIETS = ("vegetarian", "vegan", "pescatarian")
_CHATTER = (
    "That sounds amazing!",
    "How was your weekend?",
    "Haha, I know exactly what you mean.",
    "What are you up to this week?",
    "Oh no, I hope it gets better soon.",
    "Good to hear from you again!",
    "Tell me more, I want all the details.",
    "Wow, congratulations!",
)


@dataclass
class _Life:
    """What one synthetic speaker's sentences say holds now; changes of state update it."""

    home: str
    job: str
    employer: str
    club: str
    pet: str
    partner: str
    family: dict[str, str]  # relative -> name
    diet: str = ""


def _life(rng: random.Random) -> _Life:
    return _Life(
        rng.choice(_CITIES),
        rng.choice(_JOBS),
        rng.choice(_EMPLOYERS),
        rng.choice(_CLUBS),
        rng.choice(_PETS),
        rng.choice(_NAMES),
        {rel: rng.choice(_NAMES) for rel in rng.sample(_RELATIVES, 3)},
    )


def _change(rng: random.Random, life: _Life) -> str:
    """A sentence that changes something true of the speaker, and the change made."""
    kind = rng.randrange(6)
    if kind == 0:
        life.home = rng.choice([c for c in _CITIES if c != life.home])
        return f"Big news: I moved to {life.home} last month."
    if kind == 1:
        life.job, life.employer = rng.choice(_JOBS), rng.choice(_EMPLOYERS)
        return f"I started working as a {life.job} at {life.employer}."
    if kind == 2:
        old, life.club = life.club, rng.choice([c for c in _CLUBS if c != life.club])
        return f"I no longer go to the {old}; I joined a {life.club} instead."
    if kind == 3:
        life.diet = rng.choice(_DIETS)
        return f"I don't eat meat anymore, I'm {life.diet} now."
    if kind == 4:
        life.partner = rng.choice(_NAMES)
        return f"I'm dating {life.partner} now, we met at the {life.club}."
    life.pet = rng.choice(_PETS)
    return f"We adopted a {life.pet} from the shelter in {life.home}."


def _statement(rng: random.Random, life: _Life, other: str) -> str:
    """A sentence restating or using what holds now, or an event, or small talk."""
    roll = rng.random()
    if roll < 0.35:
        rel, name = rng.choice(sorted(life.family.items()))
        day = rng.choice(("Yesterday", "Last weekend", "On Saturday", "This morning"))
        return f"{day} I went {rng.choice(_ACTIVITIES)} with my {rel} {name} near {life.home}."
    if roll < 0.6:
        return rng.choice(
            (
                f"I still live in {life.home} and I love the neighbourhood.",
                f"I work as a {life.job} at {life.employer}, busy as ever.",
                f"My {life.pet} keeps me company when I work from home.",
                f"{life.partner} and I are cooking dinner for friends on Friday.",
                f"The {life.club} meets every Thursday, it is the highlight of my week.",
            )
        )
    if roll < 0.75:
        return f"{other}, have you ever been to {rng.choice(_CITIES)}? I'm thinking of a trip."
    return rng.choice(_CHATTER)


@dataclass
class _Chat:
    """One synthetic two-person conversation that keeps growing, message by message."""

    id: str
    speakers: tuple[str, str]
    lives: tuple[_Life, _Life]
    start: datetime
    messages: list[Message] = field(default_factory=list)
    in_session: int = 0  # turns in the current session

    def next(self, rng: random.Random, *, new_session: bool = False) -> Message:
        """The next turn: after the last one, in a new session every SESSION_LENGTH turns."""
        n = len(self.messages)
        last = self.messages[-1] if self.messages else None
        if last is None:
            session, when, started = 1, self.start, self.start
        elif new_session or self.in_session >= SESSION_LENGTH:
            session = last.session + 1
            when = last.timestamp + timedelta(days=rng.randint(1, 5))
            started, self.in_session = when, 0
        else:
            session, started = last.session, last.session_start
            when = last.timestamp + timedelta(seconds=rng.randint(20, 240))
        self.in_session += 1
        turn = n % 2
        speaker, other = self.speakers[turn], self.speakers[1 - turn]
        life = self.lives[turn]
        text = _change(rng, life) if rng.random() < 0.15 else _statement(rng, life, other)
        if rng.random() < 0.3:
            text += " " + _statement(rng, life, other)
        msg = Message(
            id=f"D{session}:{n + 1}",
            conversation=self.id,
            session=session,
            speaker=speaker,
            text=text,
            timestamp=when,
            addressees=(other,),
            session_start=started,
            seq=n,
        )
        self.messages.append(msg)
        return msg

    def conversation(self, messages: list[Message]) -> Conversation:
        """``messages`` of this chat as a Conversation to add."""
        sessions = sorted({(m.session, m.session_start) for m in messages})
        return Conversation(
            self.id,
            self.speakers,
            tuple(messages),
            tuple(Session(self.id, s, at) for s, at in sessions),
            "synthetic",
        )


def synthetic_chats(messages: int, seed: int = 7) -> tuple[list[_Chat], random.Random]:
    """Chats holding ``messages`` turns in all (at least two chats), and the rng to go on with."""
    rng = random.Random(seed)
    n_chats = max(2, round(messages / MESSAGES_PER_CONVERSATION))
    chats = []
    for i in range(n_chats):
        a, b = rng.sample(_NAMES, 2)
        start = datetime(2023, 1, 2, 9, tzinfo=UTC) + timedelta(days=7 * i)
        chats.append(_Chat(f"chat-{i}", (a, b), (_life(rng), _life(rng)), start))
    for i in range(messages):
        chats[i % n_chats].next(rng)
    return chats, rng


class TimedEmbedder:
    """Delegates to an embedder, adding up the seconds spent in it."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.seconds = 0.0

    def embed_batch(self, texts: list[str]) -> np.ndarray:
        """The inner embedder's vectors, timed."""
        t = time.perf_counter()
        try:
            return self.inner.embed_batch(texts)
        finally:
            self.seconds += time.perf_counter() - t


def _figures(ms: list[float], embed_ms: list[float]) -> dict:
    total = sum(ms)
    return {
        "p50_ms": round(percentile(ms, 50), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "max_ms": round(max(ms, default=0.0), 2),
        "mean_ms": round(total / len(ms), 2) if ms else 0.0,
        "embed_share": round(sum(embed_ms) / total, 3) if total else 0.0,
    }


def _counts(memory: MemoryService) -> dict:
    s = memory.stats()
    return {
        "messages": s["messages"],
        "claims": s["claims"],
        "conflicts": s["conflicts"],
        "claims_unreconciled": s["claims_unreconciled"],
    }


def _open(path: Path, settings: Settings, embedder: Embedder) -> MemoryService:
    return MemoryService(path, settings=settings, embedder=embedder, llm=None)


def _build(
    path: Path,
    chats: list[_Chat],
    settings: Settings,
    embedder: Embedder,
    progress: Callable[[str, int, int], None] | None,
) -> float:
    """Ingest the chats (each conversation one batch); returns seconds."""
    total = sum(len(c.messages) for c in chats)
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        if progress:
            progress("build", min(done, total), total)

    t0 = time.perf_counter()
    with _open(path, settings, embedder) as memory:
        memory.add([c.conversation(c.messages) for c in chats], progress=advance)
    return time.perf_counter() - t0


def _time_adds(
    stores: dict[str, MemoryService],
    chats: list[_Chat],
    rng: random.Random,
    adds: int,
    timed: TimedEmbedder,
    progress: Callable[[str, int, int], None] | None,
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Milliseconds per add, and in the embedder, per store; the same message goes to each."""
    ms: dict[str, list[float]] = {k: [] for k in stores}
    embed_ms: dict[str, list[float]] = {k: [] for k in stores}
    for i in range(adds):
        chat = chats[i % len(chats)]
        conv = chat.conversation([chat.next(rng)])
        order = list(stores) if i % 2 == 0 else list(reversed(stores))
        for name in order:
            timed.seconds = 0.0
            t = time.perf_counter()
            stores[name].add(conv)
            ms[name].append((time.perf_counter() - t) * 1000)
            embed_ms[name].append(timed.seconds * 1000)
        if progress:
            progress("adds", i + 1, adds)
    return ms, embed_ms


def run_add(
    *,
    messages: int = 3000,
    adds: int = 200,
    settings: Settings | None = None,
    embedder: Embedder | None = None,
    seed: int = 7,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict:
    """Time ``adds`` single-message adds on a ``messages``-message store, reconciled or not."""
    from ..embed import get_embedder

    base = (settings or Settings()).with_(store="sqlite", llm="none", consolidate_mode="manual")
    timed = TimedEmbedder(embedder or get_embedder(base))
    chats, rng = synthetic_chats(messages, seed)
    with tempfile.TemporaryDirectory(prefix="archivist-bench-add-") as tmp:
        paths = {"reconcile": Path(tmp) / "reconcile.db", "baseline": Path(tmp) / "baseline.db"}
        on = base.with_(reconcile_on_write=True)
        build_s = _build(paths["reconcile"], chats, on, timed, progress)
        for suffix in ("", "-wal", "-shm"):
            if (src := Path(f"{paths['reconcile']}{suffix}")).exists():
                shutil.copyfile(src, f"{paths['baseline']}{suffix}")
        stores = {
            "reconcile": _open(paths["reconcile"], on, timed),
            "baseline": _open(paths["baseline"], base.with_(reconcile_on_write=False), timed),
        }
        try:
            before = {k: _counts(m) for k, m in stores.items()}
            # one untimed add per store first: the first call of a process opens caches
            warm = chats[0].conversation([chats[0].next(rng, new_session=True)])
            for memory in stores.values():
                memory.add(warm)
            ms, embed_ms = _time_adds(stores, chats, rng, adds, timed, progress)
            after = {k: _counts(m) for k, m in stores.items()}
        finally:
            for memory in stores.values():
                memory.close()
    with_r, without = (
        _figures(ms["reconcile"], embed_ms["reconcile"]),
        _figures(ms["baseline"], embed_ms["baseline"]),
    )
    return {
        "benchmark": "add",
        "messages": messages,
        "conversations": len(chats),
        "adds": adds,
        "warmup_adds": 1,
        "embedder": timed.name,
        "llm": None,
        "consolidation": "manual (not run during build or adds)",
        "build_s": round(build_s, 2),
        "expected_messages": messages + 1 + adds,
        "reconcile": {**with_r, "before": before["reconcile"], "after": after["reconcile"]},
        "baseline": {**without, "before": before["baseline"], "after": after["baseline"]},
        "p95_ratio": round(with_r["p95_ms"] / without["p95_ms"], 2) if without["p95_ms"] else None,
        "target_p95_ms": TARGET_P95_MS,
        "target_met": with_r["p95_ms"] < TARGET_P95_MS,
    }


def add_table(r: dict) -> str:
    """Latency with and without write-time reconciliation, and whether the target is met."""
    head = (
        f"{'reconcile_on_write':<20} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'mean ms':>8} "
        f"{'embed':>6} {'claims +':>8} {'conflicts +':>11}"
    )
    lines = [
        f"add latency: 1 message to a stored conversation, {r['adds']} adds on a "
        f"{r['messages']:,}-message store ({r['conversations']} conversations, built in "
        f"{r['build_s']} s); embedder {r['embedder']}, heuristic archivist, consolidation "
        f"{r['consolidation']}",
        head,
        "-" * len(head),
    ]
    for label, key in (("on", "reconcile"), ("off (baseline)", "baseline")):
        f = r[key]
        claims = f["after"]["claims"] - f["before"]["claims"]
        conflicts = f["after"]["conflicts"] - f["before"]["conflicts"]
        lines.append(
            f"{label:<20} {f['p50_ms']:>8.2f} {f['p95_ms']:>8.2f} {f['max_ms']:>8.2f} "
            f"{f['mean_ms']:>8.2f} {f['embed_share']:>6.0%} {claims:>8} {conflicts:>11}"
        )
    met = "met" if r["target_met"] else "NOT met"
    lines += [
        "",
        f"p95 ratio (on / off): {r['p95_ratio']}; target p95 < {r['target_p95_ms']:.0f} ms "
        f"with reconciliation: {met}",
        "embed: share of add time spent in the embedder",
    ]
    return "\n".join(lines)
