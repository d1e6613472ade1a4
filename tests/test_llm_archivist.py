"""The LLM archivist end to end: MemoryService + FakeLLM + a real SQLite file.

The FakeLLM's responder reads each prompt the way a model would: it tells the
task by the schema's title (SegmentOut / ExtractOut), parses the aliased
message lines ``[n] (date) Speaker → …: text`` and answers deterministically,
so every test knows exactly which episodes and claims to expect. Faults are
injected per prompt (by a keyword of the episode or session they hit), never
by call order, because extraction runs on several threads.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from archivist.config import Settings
from archivist.llm import structured as structured_module
from archivist.llm.base import Completion, LLMRateLimited, LLMRefused, LLMTimeout
from archivist.model import Claim, Conversation, Message
from archivist.service import ExtractReport, MemoryService
from archivist.store.sql import Filters
from archivist.testing import FakeEmbedder, FakeLLM
from conftest import RULES, make_conversation

PEOPLE = ("Ana", "Lee")
CID = "ana-lee-llm"

# Session 1 (14 turns: boundaries are asked for): a new cat, then night shifts.
S1 = (
    ("Ana", "I adopted a grey cat called Pixel yesterday."),
    ("Lee", "Pixel is a great name. Is he shy?"),
    ("Ana", "Not at all, he already sleeps on my pillow."),
    ("Lee", "My neighbour's cat hides under the sofa all day."),
    ("Ana", "Pixel chased a moth until midnight."),
    ("Lee", "You will need a scratching post soon."),
    ("Ana", "I ordered one from the pet shop on Elm Street."),
    ("Lee", "Pixel will love climbing it."),
    ("Lee", "How are the night shifts at the hospital going?"),
    ("Ana", "The night shifts are exhausting, four in a row this week."),
    ("Lee", "You should ask the head nurse for a lighter rota."),
    ("Ana", "I asked her and she promised two days off next week."),
    ("Ana", "My sister Marta covers one of my shifts on Friday."),
    ("Lee", "Tell Marta she is a hero."),
)
# Session 2 (8 turns: one episode, no boundary call): a trip to the Azores.
S2 = (
    ("Lee", "I booked flights to the Azores for October."),
    ("Ana", "The Azores! Which island are you visiting?"),
    ("Lee", "Sao Miguel, for the hot springs and the crater lakes."),
    ("Ana", "Marta went hiking there and loved it."),
    ("Lee", "I plan to hike the Sete Cidades rim."),
    ("Ana", "Bring a rain jacket, the weather turns fast."),
    ("Lee", "Packed already, along with my camera."),
    ("Ana", "Send me photos of the crater lakes."),
)
# Session 3 (20 turns: boundaries asked for): cargo flights, then a marathon.
S3 = (
    ("Lee", "I flew cargo to Reykjavik twice this week."),
    ("Ana", "Was the landing rough in the wind?"),
    ("Lee", "The crosswind at Keflavik was brutal on Tuesday."),
    ("Ana", "Do you carry fish on the way back?"),
    ("Lee", "Mostly salmon and medical supplies."),
    ("Ana", "That sounds like a long night every time."),
    ("Lee", "Eleven hours door to door, then I sleep all morning."),
    ("Ana", "Does the airline give you a rest day after?"),
    ("Lee", "Two rest days, which I spend fixing my bike."),
    ("Ana", "At least the views over Iceland must be stunning."),
    ("Ana", "I signed up for the Lisbon marathon in December."),
    ("Lee", "A full marathon? That is a big step up from the 10k."),
    ("Ana", "I run with a club every Tuesday evening now."),
    ("Lee", "What pace are you aiming for?"),
    ("Ana", "Under four hours would make me happy."),
    ("Lee", "I will cheer for you at the finish line."),
    ("Ana", "My coach wants me to cut down on sugar."),
    ("Lee", "No more pastel de nata then."),
    ("Ana", "Only one after the race, as a reward."),
    ("Lee", "Deal, the first pastel is on me."),
)
SESSIONS = (S1, S2, S3)
N_MESSAGES = sum(len(s) for s in SESSIONS)
SEGMENT_BOUNDARIES = {14: [1, 9], 20: [1, 11]}  # session length -> boundaries answered
EXPECTED_EPISODES = {1: [8, 6], 2: [8], 3: [10, 10]}  # session -> episode sizes
FIXED_EPISODES = {1: [7, 7], 2: [8], 3: [7, 7, 6]}  # the same without boundaries (8 turns max)

LINE = re.compile(
    r"^\[(\d+)\] \((\w{3} \d{2} \w{3} \d{4}) \d{2}:\d{2}\) (.+?)"
    r"(?: \((?:assistant|system)\))?(?: → .+?)?: (.*)$",
    re.MULTILINE,
)


def conversation() -> Conversation:
    return make_conversation(CID, SESSIONS, people=PEOPLE)


def task_of(schema: dict | None) -> str:
    title = (schema or {}).get("title")
    assert title in ("SegmentOut", "ExtractOut"), f"unexpected schema {title!r}"
    return "segment" if title == "SegmentOut" else "extract"


def user_prompt(messages: list[dict]) -> str:
    """The task's own prompt (the first user message; later ones are corrections)."""
    return next(m["content"] for m in messages if m["role"] == "user")


def lines_of(prompt: str) -> list[tuple[int, str, str, str]]:
    """(alias, YYYY-MM-DD, speaker, text) of each message shown in a prompt."""
    return [
        (int(a), datetime.strptime(d, "%a %d %b %Y").strftime("%Y-%m-%d"), who, text)
        for a, d, who, text in LINE.findall(prompt)
    ]


def claim_for(alias: int, day: str, speaker: str, text: str) -> dict:
    return {
        "text": f"{speaker} said: {text}",
        "speaker": speaker,
        "subject": speaker,
        "kind": "event" if "yesterday" in text else "fact",
        "source": "first_hand",
        "evidence": [alias],
        "valid_from": day,
        "importance": 6,
        "salience": 4,
        "entities": [{"name": "Pixel", "kind": "other"}] if "Pixel" in text else [],
    }


def narrative_for(speaker: str, text: str) -> str:
    return f"{speaker} opens with: {text}"


def good_answer(messages: list[dict], schema: dict | None) -> dict:
    """What a well-behaved model answers: boundaries, or one claim per message."""
    shown = lines_of(user_prompt(messages))
    if task_of(schema) == "segment":
        return {"boundaries": SEGMENT_BOUNDARIES[len(shown)]}
    return {
        "title": shown[0][3][:30],
        "narrative": narrative_for(shown[0][2], shown[0][3]),
        "claims": [claim_for(*line) for line in shown],
        "qa": [{"question": f"What did {shown[0][2]} say first?", "answer": shown[0][3]}],
    }


Fault = Callable[[str, list[dict], int], object]  # (task, messages, nth sighting) -> answer


class Responder:
    """Deterministic by prompt content; ``fault`` may replace the answer to chosen prompts.

    ``seen[prompt]`` counts how often a prompt (task + first user message) was
    asked, so "fail the first time, then succeed" does not depend on thread order.
    """

    def __init__(self, fault: Fault | None = None) -> None:
        self.fault = fault
        self.seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, messages: list[dict], schema: dict | None):
        task = task_of(schema)
        with self._lock:
            self.seen[task + user_prompt(messages)] += 1
            nth = self.seen[task + user_prompt(messages)]
        if self.fault is not None:
            answer = self.fault(task, messages, nth)
            if answer is not None:
                return answer
        return good_answer(messages, schema)


_OPEN: list[MemoryService] = []


@pytest.fixture(autouse=True)
def _close_services():
    """Every service a test opened is closed after it, passed or failed."""
    yield
    while _OPEN:
        _OPEN.pop().close()


def service(path: Path, responder: Callable | None = None) -> tuple[MemoryService, FakeLLM]:
    llm = FakeLLM(responder=responder or Responder())
    # Extraction alone: consolidation rounds (their own LLM calls) are tested elsewhere.
    settings = Settings(judge="rules", consolidate_mode="manual")
    mem = MemoryService(path, settings=settings, embedder=FakeEmbedder(), llm=llm)
    _OPEN.append(mem)
    return mem, llm


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Record the retry delays call_structured asks for instead of waiting them out.

    LLMArchivist passes no ``backoff`` to call_structured, so the default of
    1 s, 2 s, … would otherwise slow every retried timeout down.
    """
    delays: list[float] = []
    monkeypatch.setattr(structured_module.time, "sleep", delays.append)
    return delays


# -- helpers over the store -----------------------------------------------------------


def log_snapshot(mem: MemoryService) -> list[tuple[str, str, str]]:
    return [(m.id, m.speaker, m.text) for _, m in mem.store.conversation_messages(CID)]


EXPECTED_LOG = [(m.id, m.speaker, m.text) for m in conversation().messages]
EXPECTED_LOG_TURNS = [(who, text) for _, who, text in EXPECTED_LOG]


def assert_log_intact_and_all_extracted(mem: MemoryService) -> None:
    assert log_snapshot(mem) == EXPECTED_LOG
    assert mem.stats()["messages"] == N_MESSAGES
    assert mem.store.extraction_state(CID) == {i + 1: len(s) for i, s in enumerate(SESSIONS)}


def messages_by_id(mem: MemoryService) -> dict[str, Message]:
    return {m.id: m for _, m in mem.store.conversation_messages(CID)}


def episode_sizes(mem: MemoryService) -> dict[int, list[int]]:
    """session -> the number of messages of each of its episodes, in order."""
    sizes: dict[int, list[int]] = {}
    for e in mem.store.list_episodes(CID):
        sizes.setdefault(e.session, []).append(len(e.message_ids))
    return sizes


def claim_key(c: Claim) -> tuple:
    return (c.text, c.speaker, c.subject, c.kind, c.source, c.evidence, c.valid_from, c.method)


def prompts_of(llm: FakeLLM, task: str) -> list[str]:
    return [user_prompt(c["messages"]) for c in llm.calls if task_of(c["schema"]) == task]


def episode_with(mem: MemoryService, text: str):
    (ep,) = [
        e
        for e in mem.store.list_episodes(CID)
        if any(messages_by_id(mem)[i].text == text for i in e.message_ids)
    ]
    return ep


def claims_of_episode(mem: MemoryService, episode_id: int) -> list[Claim]:
    return [c for c in mem.claims(conversation=CID, limit=1000) if c.episode == episode_id]


def extract_fresh(
    tmp_path: Path, fault: Fault | None
) -> tuple[MemoryService, FakeLLM, ExtractReport]:
    """Add the conversation without extracting, then extract with a faulty model."""
    mem, llm = service(tmp_path / "m.db", Responder(fault))
    mem.add(conversation(), extract=False)
    assert mem.store.extraction_state(CID) == {}
    return mem, llm, mem.extract()


# -- happy path -------------------------------------------------------------------------


def test_episodes_and_claims_carry_the_llm_output(tmp_path: Path) -> None:
    mem, llm = service(tmp_path / "m.db")
    mem.add(conversation())
    by_id = messages_by_id(mem)

    episodes = mem.store.list_episodes(CID)
    assert episode_sizes(mem) == EXPECTED_EPISODES
    for e in episodes:
        first = by_id[e.message_ids[0]]
        assert e.narrative == narrative_for(first.speaker, first.text)
        assert e.method == "fake-llm"
        assert e.qa == ((f"What did {first.speaker} say first?", first.text),)

    claims = mem.claims(conversation=CID, limit=1000)
    assert len(claims) == N_MESSAGES  # one per message, none lost or rejected
    for c in claims:
        (mid,) = c.evidence
        m = by_id[mid]
        assert c.text == f"{m.speaker} said: {m.text}"
        assert (c.speaker, c.subject, c.source) == (m.speaker, m.speaker, "first_hand")
        assert c.kind == ("event" if "yesterday" in m.text else "fact")
        assert c.said_at == m.timestamp
        assert c.valid_from == datetime.combine(m.timestamp.date(), datetime.min.time(), UTC)
        assert c.method == "fake-llm"
        assert c.episode in {e.id for e in episodes if mid in e.message_ids}
    pixel = next(c for c in claims if c.evidence == ("D1:1",))
    assert [e.name for e in pixel.entities] == ["Pixel"]
    assert mem.stats()["claims_rejected"] == 0


def test_llm_summary_counts_calls_and_tokens_per_task(tmp_path: Path) -> None:
    mem, llm = service(tmp_path / "m.db")
    mem.add(conversation())
    summary = mem.llm_summary()
    assert summary["model"] == "fake-llm"
    tasks = summary["tasks"]
    assert set(tasks) == {"segment_session", "extract_episode"}
    assert tasks["segment_session"]["calls"] == 2  # sessions 1 and 3 only
    assert tasks["extract_episode"]["calls"] == 5  # one per episode
    for name, task in (("segment_session", "segment"), ("extract_episode", "extract")):
        calls = [c for c in llm.calls if task_of(c["schema"]) == task]
        words = sum(len(" ".join(m["content"] for m in c["messages"]).split()) for c in calls)
        assert tasks[name]["input_tokens"] == words
        assert tasks[name]["output_tokens"] > 0
        assert tasks[name]["retries"] == tasks[name]["failures"] == 0
    assert summary["totals"]["calls"] == len(llm.calls) == 7
    assert summary["lifetime"]["fake-llm"]["extract_episode"]["calls"] == 5
    assert N_MESSAGES >= 40
    assert len(llm.calls) / N_MESSAGES <= 0.25


def test_short_sessions_get_no_boundary_call(tmp_path: Path) -> None:
    mem, llm = service(tmp_path / "m.db")
    mem.add(conversation())
    segmented = prompts_of(llm, "segment")
    assert len(segmented) == 2
    assert not any("Azores" in p for p in segmented)  # session 2 has 8 turns
    assert sorted(len(lines_of(p)) for p in segmented) == [len(S1), len(S3)]


def test_prompts_are_recorded_and_show_aliases_never_message_ids(tmp_path: Path) -> None:
    mem, llm = service(tmp_path / "m.db")
    mem.add(conversation())
    assert len(llm.calls) == 7
    for call in llm.calls:
        text = "\n".join(m["content"] for m in call["messages"])
        assert not re.search(r"D\d+:\d+", text), "a raw message id reached the model"
        aliases = [a for a, *_ in lines_of(user_prompt(call["messages"]))]
        assert aliases == list(range(1, len(aliases) + 1))
        assert call["schema"]["title"] in ("SegmentOut", "ExtractOut")
    shown = sorted(
        (who, text) for p in prompts_of(llm, "extract") for _, _, who, text in lines_of(p)
    )
    assert shown == sorted(EXPECTED_LOG_TURNS)  # every message shown to extraction exactly once


# -- validation -------------------------------------------------------------------------


def bad_claims_fault(task: str, messages: list[dict], nth: int):
    """In the Azores episode, add claims to be rejected, trimmed, normalised or kept."""
    prompt = user_prompt(messages)
    if task != "extract" or "Azores" not in prompt:
        return None
    answer = good_answer(messages, {"title": "ExtractOut"})
    answer["claims"] += [
        {"text": "Melanie ran a charity race.", "speaker": "Melanie", "subject": "Melanie",
         "evidence": [1]},
        {"text": "Lee owns a boat.", "speaker": "Lee", "subject": "Lee", "evidence": [42, 0]},
        {"text": "Lee packed a camera and a rain jacket.", "speaker": "Lee", "subject": "Lee",
         "evidence": [7, 99, -1, 7]},
        {"text": "Ana recommends a rain jacket.", "speaker": "  aNA \t", "subject": " ana",
         "kind": "preference", "evidence": [6]},
        {"text": "Marta hiked in the Azores.", "speaker": "Ana", "subject": "Marta",
         "source": "reported", "evidence": [4]},
        {"text": "Lee is in the Azores in October.", "speaker": "Lee", "subject": "Lee",
         "kind": "foresight", "evidence": [1], "valid_from": "next week",
         "valid_to": "2023-10-31T12:00"},
    ]  # fmt: skip
    return answer


def test_invalid_claims_are_rejected_counted_and_never_stored(tmp_path: Path) -> None:
    mem, _, report = extract_fresh(tmp_path, bad_claims_fault)
    assert report.rejected == 2
    assert mem.stats()["claims_rejected"] == 2
    texts = {c.text: c for c in mem.claims(conversation=CID, limit=1000)}
    assert "Melanie ran a charity race." not in texts  # speaker is not a participant
    assert "Lee owns a boat." not in texts  # no evidence left in range
    assert not any(c.speaker == "Melanie" for c in texts.values())
    assert report.claims == N_MESSAGES + 4 == len(texts)

    trimmed = texts["Lee packed a camera and a rain jacket."]
    assert trimmed.evidence == ("D2:7",)  # out-of-range aliases dropped, duplicates merged
    normalised = texts["Ana recommends a rain jacket."]
    assert (normalised.speaker, normalised.subject) == ("Ana", "Ana")
    assert normalised.evidence == ("D2:6",) and normalised.kind == "preference"
    reported = texts["Marta hiked in the Azores."]
    assert (reported.speaker, reported.subject, reported.source) == ("Ana", "Marta", "reported")
    foresight = texts["Lee is in the Azores in October."]
    assert foresight.kind == "foresight"
    assert foresight.valid_from is None  # not a date: left unknown, not guessed
    assert foresight.valid_to == datetime(2023, 10, 31, tzinfo=UTC)
    assert_log_intact_and_all_extracted(mem)


def test_a_theory_keeps_the_claims_it_rests_on(tmp_path: Path) -> None:
    def theory(task: str, messages: list[dict], nth: int):
        if task != "extract" or "Azores" not in user_prompt(messages):
            return None
        answer = good_answer(messages, {"title": "ExtractOut"})
        answer["claims"].append(
            {
                "text": "Lee is drawn to volcanic landscapes.",
                "speaker": "Lee",
                "subject": "Lee",
                "kind": "theory",
                "evidence": [3, 5],
                "supports": [2, 4],
            }
        )
        return answer

    mem, _, _ = extract_fresh(tmp_path, theory)
    (stored,) = [c for c in mem.claims(conversation=CID, limit=1000) if c.kind == "theory"]
    assert stored.evidence == ("D2:3", "D2:5")
    assert stored.evidence_claims, "the theory lost the claims it rests on"
    supports = mem.store.claims_by_id(stored.evidence_claims)
    assert sorted(c.evidence for c in supports.values()) == [("D2:2",), ("D2:4",)]


def test_a_claim_its_speaker_never_said_is_rejected(tmp_path: Path) -> None:
    def misattributed(task: str, messages: list[dict], nth: int):
        if task != "extract" or "Azores" not in user_prompt(messages):
            return None
        answer = good_answer(messages, {"title": "ExtractOut"})
        answer["claims"].append(  # [1] and [3] are Lee's words, pinned on Ana
            {"text": "Ana booked flights to the Azores.", "speaker": "Ana", "subject": "Ana",
             "evidence": [1, 3]}
        )  # fmt: skip
        return answer

    mem, _, report = extract_fresh(tmp_path, misattributed)
    texts = {c.text for c in mem.claims(conversation=CID, limit=1000)}
    assert "Ana booked flights to the Azores." not in texts
    assert report.rejected == 1


# -- faults ---------------------------------------------------------------------------


def on_extract_of(keyword: str, answer: Callable[[list[dict], int], object]) -> Fault:
    """A fault hitting only the extraction prompt whose episode mentions ``keyword``."""

    def fault(task: str, messages: list[dict], nth: int):
        if task == "extract" and keyword in user_prompt(messages):
            return answer(messages, nth)
        return None

    return fault


def test_invalid_json_is_retried_with_the_error_shown(tmp_path: Path) -> None:
    fault = on_extract_of(
        "Azores", lambda msgs, nth: "Sure! The episode is about a trip." if len(msgs) == 2 else None
    )
    mem, llm, report = extract_fresh(tmp_path, fault)
    assert report.fallbacks == 0
    azores = [c for c in llm.calls if "Azores" in user_prompt(c["messages"])]
    assert len(azores) == 2
    retry = azores[1]["messages"]
    assert retry[-2] == {"role": "assistant", "content": "Sure! The episode is about a trip."}
    assert "Your previous answer was invalid" in retry[-1]["content"]
    ep = episode_with(mem, S2[0][1])
    assert ep.method == "fake-llm" and ep.narrative == narrative_for(*S2[0])
    assert len(claims_of_episode(mem, ep.id)) == len(S2)
    assert mem.llm_summary()["tasks"]["extract_episode"]["retries"] == 1
    assert_log_intact_and_all_extracted(mem)


def truncated(inside_a_claim: bool) -> Callable[[list[dict], int], object]:
    """The good answer cut off at a token limit: between two claims, or inside the third.

    The model's second attempt (after the correction note) answers in full.
    """

    def answer(messages: list[dict], nth: int):
        if len(messages) > 2:
            return None
        text = json.dumps(good_answer(messages, {"title": "ExtractOut"}))
        third = text.index('{"text": "Lee said: Sao Miguel')
        text = text[: third + 25] if inside_a_claim else text[:third].rstrip(", ")
        return Completion(text, 100, 50, "fake-llm", finish_reason="length")

    return answer


@pytest.mark.parametrize(
    ("inside_a_claim", "attempts", "n_claims"),
    [(False, 1, 2), (True, 2, len(S2))],
    ids=["between-claims-repaired", "inside-a-claim-retried"],
)
def test_truncated_json_is_repaired_or_retried(
    tmp_path: Path, inside_a_claim: bool, attempts: int, n_claims: int
) -> None:
    fault = on_extract_of("Azores", truncated(inside_a_claim))
    mem, llm, report = extract_fresh(tmp_path, fault)
    assert report.fallbacks == 0
    assert sum("Azores" in user_prompt(c["messages"]) for c in llm.calls) == attempts
    ep = episode_with(mem, S2[0][1])
    assert ep.method == "fake-llm" and ep.narrative == narrative_for(*S2[0])
    kept = claims_of_episode(mem, ep.id)
    # complete claims survive; a claim cut in half is never stored half
    assert sorted(c.evidence for c in kept) == [(f"D2:{i}",) for i in range(1, n_claims + 1)]
    assert all(c.text == f"{c.speaker} said: {S2[int(c.evidence[0][3:]) - 1][1]}" for c in kept)
    if inside_a_claim:
        retry = [c for c in llm.calls if "Azores" in user_prompt(c["messages"])][1]
        assert "cut off at the length limit" in retry["messages"][-1]["content"]
    assert_log_intact_and_all_extracted(mem)


def test_wrong_types_until_the_budget_runs_out_fall_back_to_the_heuristic(
    tmp_path: Path,
) -> None:
    wrong = {"title": 3, "narrative": ["not", "a", "string"], "claims": "many"}
    mem, llm, report = extract_fresh(tmp_path, on_extract_of("Azores", lambda m, n: wrong))
    assert report.fallbacks == 1
    assert sum("Azores" in user_prompt(c["messages"]) for c in llm.calls) == 3  # max attempts
    ep = episode_with(mem, S2[0][1])
    assert ep.method == "heuristic"
    fallback = claims_of_episode(mem, ep.id)
    assert fallback and {c.method for c in fallback} == {"heuristic"}
    by_id = messages_by_id(mem)
    assert all(c.speaker == by_id[c.evidence[0]].speaker for c in fallback)
    # the other episodes still come from the model
    others = [e for e in mem.store.list_episodes(CID) if e.id != ep.id]
    assert len(others) == 4 and {e.method for e in others} == {"fake-llm"}
    tasks = mem.llm_summary()["tasks"]["extract_episode"]
    assert tasks["failures"] == 1 and tasks["retries"] == 2
    assert_log_intact_and_all_extracted(mem)


def flaky(task: str, messages: list[dict], nth: int):
    """Session 1's boundaries time out once; the Azores extraction is rate limited twice."""
    prompt = user_prompt(messages)
    if task == "segment" and "Pixel" in prompt and nth == 1:
        return LLMTimeout("read timed out")
    if task == "extract" and "Azores" in prompt and nth <= 2:
        return LLMRateLimited("429 Too Many Requests", retry_after=0.5 * nth)
    if task == "extract" and "Reykjavik" in prompt and nth == 1:
        return LLMTimeout("read timed out")
    return None


def test_timeouts_and_rate_limits_are_retried_then_succeed(
    tmp_path: Path, no_sleep: list[float]
) -> None:
    mem, llm, report = extract_fresh(tmp_path, flaky)
    assert report.fallbacks == 0
    assert {e.method for e in mem.store.list_episodes(CID)} == {"fake-llm"}
    assert episode_sizes(mem) == EXPECTED_EPISODES  # the boundaries came after the timeout
    assert sorted(no_sleep) == [0.5, 1.0, 1.0, 1.0]  # retry_after honoured, else backoff 1 s
    tasks = mem.llm_summary()["tasks"]
    assert tasks["segment_session"]["retries"] == 1
    assert tasks["extract_episode"]["retries"] == 3
    assert len(llm.calls) == 7 + 4
    assert len(mem.claims(conversation=CID, limit=1000)) == N_MESSAGES
    assert_log_intact_and_all_extracted(mem)


@pytest.mark.parametrize(
    "error",
    [LLMRefused("content filter"), LLMTimeout("still slow")],
    ids=["refused", "timeout-every-time"],
)
def test_refusals_and_persistent_errors_fall_back_for_that_episode_only(
    tmp_path: Path, no_sleep: list[float], error: Exception
) -> None:
    mem, llm, report = extract_fresh(tmp_path, on_extract_of("Azores", lambda m, n: error))
    assert report.fallbacks == 1
    attempts = sum("Azores" in user_prompt(c["messages"]) for c in llm.calls)
    assert attempts == (1 if isinstance(error, LLMRefused) else 3)  # refusals are not retried
    ep = episode_with(mem, S2[0][1])
    assert ep.method == "heuristic"
    assert claims_of_episode(mem, ep.id)
    assert [e.method for e in mem.store.list_episodes(CID)].count("fake-llm") == 4
    assert_log_intact_and_all_extracted(mem)


@pytest.mark.parametrize(
    "failure", [LLMRefused("no"), "no boundaries today"], ids=["refused", "never-valid"]
)
def test_a_failed_segmentation_falls_back_to_fixed_turn_episodes(
    tmp_path: Path, failure: object
) -> None:
    def fault(task: str, messages: list[dict], nth: int):
        return failure if task == "segment" and "Pixel" in user_prompt(messages) else None

    mem, llm, report = extract_fresh(tmp_path, fault)
    assert report.fallbacks == 0  # extraction itself went fine
    assert {e.method for e in mem.store.list_episodes(CID)} == {"fake-llm"}
    # session 1 is cut at max_turns // 3 = 8 turns; session 3 still gets its boundaries
    assert episode_sizes(mem) == {**EXPECTED_EPISODES, 1: FIXED_EPISODES[1]}
    assert len(mem.claims(conversation=CID, limit=1000)) == N_MESSAGES
    assert mem.llm_summary()["tasks"]["segment_session"]["failures"] == 1
    assert_log_intact_and_all_extracted(mem)


def test_every_boundary_call_refused_gives_fixed_turn_episodes(tmp_path: Path) -> None:
    """Every boundary call refused: both long sessions are cut into chunks of at most 8."""

    def fault(task: str, messages: list[dict], nth: int):
        return LLMRefused("no") if task == "segment" else None

    mem, llm, _ = extract_fresh(tmp_path, fault)
    assert episode_sizes(mem) == FIXED_EPISODES
    assert len(mem.claims(conversation=CID, limit=1000)) == N_MESSAGES
    assert_log_intact_and_all_extracted(mem)


def test_boundaries_out_of_range_unordered_or_tiny_are_cleaned_up(tmp_path: Path) -> None:
    """Aliases 0, -3 and 99 do not exist; 1 → 2 would leave a one-turn episode: merged."""

    def fault(task: str, messages: list[dict], nth: int):
        if task == "segment" and "Pixel" in user_prompt(messages):
            return {"boundaries": [8, 1, 8, 99, -3, 0, 2]}
        return None

    mem, _, report = extract_fresh(tmp_path, fault)
    session_1 = [e for e in mem.store.list_episodes(CID) if e.session == 1]
    assert [e.message_ids for e in session_1] == [
        tuple(f"D1:{i}" for i in range(1, 8)),
        tuple(f"D1:{i}" for i in range(8, 15)),
    ]
    assert report.fallbacks == 0
    assert_log_intact_and_all_extracted(mem)


# -- cache ----------------------------------------------------------------------------


def test_rebuild_and_re_adding_are_served_from_the_store_cache(tmp_path: Path) -> None:
    mem, llm = service(tmp_path / "m.db")
    mem.add(conversation())
    before = sorted(claim_key(c) for c in mem.claims(conversation=CID, limit=1000))
    episodes = [(e.message_ids, e.narrative) for e in mem.store.list_episodes(CID)]
    made = len(llm.calls)
    assert made == 7 and mem.stats()["llm_cache_entries"] == 7

    report = mem.rebuild()
    assert len(llm.calls) == made
    assert report.sessions == 3 and report.fallbacks == 0
    assert mem.llm_summary()["tasks"]["extract_episode"]["cache_hits"] == 5
    assert sorted(claim_key(c) for c in mem.claims(conversation=CID, limit=1000)) == before
    assert [(e.message_ids, e.narrative) for e in mem.store.list_episodes(CID)] == episodes

    mem.add(conversation())  # nothing new: no write, no extraction, no call
    assert len(llm.calls) == made
    assert_log_intact_and_all_extracted(mem)
    mem.close()

    # the cache is the store's, not the process's: a new service, a new model, no calls
    again, llm2 = service(tmp_path / "m.db")
    again.rebuild()
    assert llm2.calls == []
    assert sorted(claim_key(c) for c in again.claims(conversation=CID, limit=1000)) == before
    again.close()


def test_a_follow_up_turn_extracts_only_itself_with_earlier_turns_as_context(
    tmp_path: Path,
) -> None:
    mem, llm = service(tmp_path / "m.db")
    mem.add(conversation())
    made = len(llm.calls)
    before = {c.id for c in mem.claims(conversation=CID, limit=1000)}
    more = (*S2, ("Lee", "I found a guesthouse near Furnas for the first night."))
    mem.add(make_conversation(CID, (S1, more, S3), people=PEOPLE))
    (sent,) = [user_prompt(c["messages"]) for c in llm.calls[made:]]
    earlier, episode = sent.split("Episode (1 messages):\n")
    assert "Furnas" in episode and "Sete Cidades" in earlier  # the six turns before it
    assert "Azores" not in sent  # older turns of the session are not sent again
    assert mem.store.extraction_state(CID) == {1: len(S1), 2: len(more), 3: len(S3)}
    claims = mem.claims(conversation=CID, limit=1000)
    assert len(claims) == N_MESSAGES + 1
    assert before < {c.id for c in claims}  # added to, nothing re-made
    assert [c.speaker for c in claims if c.evidence == ("D2:9",)] == ["Lee"]


# -- resume -----------------------------------------------------------------------------


def test_an_interrupted_extraction_resumes_with_the_unfinished_sessions(tmp_path: Path) -> None:
    def bug(task: str, messages: list[dict], nth: int):
        if task == "extract" and "Azores" in user_prompt(messages):
            raise RuntimeError("a bug in the model client")
        return None

    mem, llm = service(tmp_path / "m.db", Responder(bug))
    with pytest.raises(RuntimeError, match="a bug in the model client"):
        mem.add(conversation())  # the messages are committed before extraction starts
    assert mem.store.extraction_state(CID) == {1: len(S1)}
    assert log_snapshot(mem) == EXPECTED_LOG
    spent = mem.store.llm_usage()["fake-llm"]
    assert spent["extract_episode"]["calls"] >= 2  # recorded though the run failed
    mem.close()

    resumed, llm2 = service(tmp_path / "m.db")
    report = resumed.extract()
    assert report.sessions_skipped == 1 and report.sessions == 2
    sent = [user_prompt(c["messages"]) for c in llm2.calls]
    assert sent, "the unfinished session must be asked for again"
    assert not any(text in p for p in sent for _, text in S1)  # session 1 is not redone
    assert any("Azores" in p for p in sent)
    assert all("Pixel" not in p for p in sent)
    assert_log_intact_and_all_extracted(resumed)
    assert len(resumed.claims(conversation=CID, limit=1000)) == N_MESSAGES
    resumed.close()


def test_a_call_that_ends_in_a_bug_is_still_counted(tmp_path: Path) -> None:
    def bug(task: str, messages: list[dict], nth: int):
        if task == "extract" and "Azores" in user_prompt(messages):
            raise RuntimeError("a bug in the model client")
        return None

    mem, llm = service(tmp_path / "m.db", Responder(bug))
    with pytest.raises(RuntimeError):
        mem.add(conversation())
    assert mem.llm_summary()["totals"]["calls"] == len(llm.calls)
    assert mem.llm_summary()["totals"]["failures"] == 1


# -- heuristic mode ---------------------------------------------------------------------


def test_without_an_llm_the_heuristic_archivist_attributes_speakers(tmp_path: Path) -> None:
    mem = MemoryService(tmp_path / "m.db", settings=RULES, embedder=FakeEmbedder())
    mem.add(conversation())
    assert mem.archivist.name == "heuristic"
    assert mem.llm_summary()["model"] is None and mem.llm_summary()["tasks"] == {}
    by_id = messages_by_id(mem)
    claims = mem.claims(conversation=CID, limit=1000)
    assert len(claims) >= len(SESSIONS) * 4
    assert {c.method for c in claims} == {"heuristic"}
    assert all(c.speaker in PEOPLE and c.evidence for c in claims)
    first_hand = [c for c in claims if c.source == "first_hand"]
    assert len(first_hand) >= 10
    right = sum(c.speaker == by_id[c.evidence[0]].speaker for c in first_hand)
    assert right / len(first_hand) >= 0.95
    assert_log_intact_and_all_extracted(mem)
    mem.close()


def test_episodes_are_indexed_and_lead_to_their_messages(tmp_path: Path) -> None:
    """Index fine, return coarse: an episode found by its narrative votes for its messages."""
    mem, _, _ = extract_fresh(tmp_path, None)
    (episode,) = [e for e in mem.store.list_episodes(CID, limit=100) if "Azores" in e.narrative][:1]
    hits = mem.search(episode.narrative, preset="episodes", k=len(episode.message_ids))
    assert {h.message.id for h in hits} == set(episode.message_ids)
    assert all(set(h.sources) <= {"episodes_bm25", "episodes_dense"} for h in hits)
    assert all(h.episode is not None and h.episode.id == episode.id for h in hits)
    # the caller's filters still hold for messages reached through an episode
    lee_only = mem.search(episode.narrative, preset="episodes", speaker="Lee", k=50)
    assert lee_only and {h.message.speaker for h in lee_only} == {"Lee"}
    # a rebuild replaces the episodes in the keyword index too (no stale narratives)
    mem.rebuild()
    mem.rebuild()
    found = {
        e for e, _ in mem.store.episode_keyword_search("Azores", Filters(conversation=CID), 50)
    }
    current = {e.id: e for e in mem.store.list_episodes(CID, limit=100)}
    assert found and found <= set(current)
    assert found == {i for i, e in current.items() if "Azores" in e.narrative + e.title}


def test_a_live_chats_short_tail_waits_for_more_turns_or_for_quiet(tmp_path: Path) -> None:
    """One call per appended tail: with an LLM, a tail of a turn or two waits (a server's
    worker queues a check for when the chat goes quiet) instead of costing a call each."""
    llm = FakeLLM(responder=Responder())
    # 2023 messages are "recent" under a window this long: the tail is held
    settings = Settings(
        judge="rules",
        consolidate_mode="manual",
        consolidate_every=1000,
        extract_min_tail=3,
        extract_idle_s=1e12,
    )
    mem = MemoryService(tmp_path / "m.db", settings=settings, embedder=FakeEmbedder(), llm=llm)
    _OPEN.append(mem)
    mem.add(conversation())
    made = len(llm.calls)
    more = (*S2, ("Lee", "I found a guesthouse near Furnas for the first night."))
    mem.add(make_conversation(CID, (S1, more, S3), people=PEOPLE), extract=False)

    assert mem.extract([CID], hold_short_tails=True).sessions_waiting == 1
    assert len(llm.calls) == made  # held: one message is not worth a call
    mem.jobs.enqueue_extract(CID, N_MESSAGES + 1)
    ran = mem.jobs.run_pending()
    (job,) = [j for j in ran if j.kind == "extract"]
    assert job.status == "done" and job.result["sessions_waiting"] == 1
    # beside it only the plain key info of a chat too short for a round: no model call
    assert {j.kind for j in ran if j is not job} == {"key_info"}
    assert len(llm.calls) == made
    assert mem.job_counts() == {"done": len(ran), "queued": 1}  # the quiet check, not yet due
    assert mem.jobs.run_pending() == []

    report = mem.extract([CID])  # what the quiet check does: read whatever is left
    assert report.sessions_appended == 1 and len(llm.calls) == made + 1
    assert mem.extract([CID], hold_short_tails=True).sessions_waiting == 0


def test_without_an_llm_tails_are_never_held(tmp_path: Path) -> None:
    settings = Settings(
        judge="rules", consolidate_mode="manual", extract_min_tail=50, extract_idle_s=1e12
    )
    mem = MemoryService(tmp_path / "m.db", settings=settings, embedder=FakeEmbedder())
    _OPEN.append(mem)
    mem.add(conversation())
    more = (*S2, ("Lee", "I found a guesthouse near Furnas for the first night."))
    mem.add(make_conversation(CID, (S1, more, S3), people=PEOPLE), extract=False)
    report = mem.extract([CID], hold_short_tails=True)
    assert report.sessions_waiting == 0 and report.sessions_appended == 1


def test_the_llm_names_each_claims_facet_and_none_is_no_facet(tmp_path: Path) -> None:
    def facets(messages: list[dict], schema: dict | None) -> dict:
        answer = good_answer(messages, schema)
        for claim in answer.get("claims", []):
            claim["facet"] = "value" if claim["speaker"] == PEOPLE[0] else "none"
        return answer

    mem, _ = service(tmp_path / "m.db", facets)
    mem.add(conversation())
    claims = mem.claims(limit=100)
    assert claims and {c.facet for c in claims if c.speaker == PEOPLE[0]} == {"value"}
    assert {c.facet for c in claims if c.speaker != PEOPLE[0]} == {""}
