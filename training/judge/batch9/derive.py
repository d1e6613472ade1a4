"""Support pairs from the batch-9 chats: each question beside the sentences of its chat.

Writers marked, for each question, every sentence that answers it (a quote, its
label). Every other sentence of the chat is a pair labelled ``neither``: the
look-alikes a search puts beside the answer (a friend's question in the same words,
a reaction, another person's parallel fact, a relative's). A sentence of a marked
message that shares only part of the quote is left out (unclear). Per question, all
marked sentences are kept and at most ``NEGATIVES`` unmarked ones: half those
sharing most words with the question or an answer, half drawn at random (seeded).

One chat in five (by a stable hash of its id) is the development split: its pairs go
to ``dev/``, apart from the training files, so that choosing never sees them.

    python training/judge/batch9/derive.py   # writes chat-support.jsonl and dev/chat-support-dev.jsonl
"""

import json
import random
import re
import sys
import zlib
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parents[2] / "src"))
from archivist.read.sentences import SENTENCE_BREAK  # noqa: E402  (the runtime's sentences)

NEGATIVES = 8
WORD = re.compile(r"[a-z0-9']+")


def words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.casefold()) if len(w) > 2}


def fold(text: str) -> str:
    return " ".join(text.casefold().split())


def overlap(sentence: str, quote: str) -> float:
    """The share of the sentence's characters the quote covers (0 when apart)."""
    s, q = fold(sentence), fold(quote)
    if not s or not q:
        return 0.0
    if s in q:
        return 1.0
    if q in s:
        return len(q) / len(s)
    # the quote may run over a sentence break: its longest piece inside the sentence
    best = 0
    for piece in SENTENCE_BREAK.split(quote):
        p = fold(piece)
        if p and p in s:
            best = max(best, len(p))
    return best / len(s)


def pairs(chat: dict, rng: random.Random) -> list[dict]:
    sentences = [
        (m, s.strip())
        for m in chat["messages"]
        for s in SENTENCE_BREAK.split(m["text"])
        if s.strip()
    ]
    out = []
    for qi, q in enumerate(chat["questions"]):
        marked, plain = [], []
        for m, s in sentences:
            cover = [
                (overlap(s, mk["quote"]), mk) for mk in q["marks"] if mk["msg"] == m["id"]
            ]
            best = max(cover, key=lambda c: c[0], default=(0.0, None))
            if best[0] >= 0.5 or (best[1] and fold(best[1]["quote"]) in fold(s)):
                marked.append((m, s, best[1]["label"]))
            elif best[0] > 0:
                continue  # part of an answer: unclear alone
            else:
                plain.append((m, s))
        answer_words = set().union(*(words(s) for _, s, _ in marked)) if marked else set()
        qwords = words(q["q"])
        plain.sort(key=lambda ms: -len(words(ms[1]) & (qwords | answer_words)))
        half = NEGATIVES // 2
        hard, rest = plain[:half], plain[half:]
        easy = rng.sample(rest, min(len(rest), NEGATIVES - len(hard)))
        chosen = [(m, s, lab) for m, s, lab in marked] + [(m, s, "neither") for m, s in hard + easy]
        for n, (m, s, label) in enumerate(chosen):
            out.append(
                {
                    "id": f"b9-{chat['id']}-q{qi}-{n}",
                    "task": "support",
                    "speaker": m["speaker"],
                    "question": q["q"],
                    "sentence": s,
                    "said_at": m["said_at"][:10],
                    "label": label,
                    "area": chat.get("area", ""),
                    "group": f"b9-{chat['id']}",
                    "hard": "lookalike" if label == "neither" and (m, s) in hard else "none",
                    "family": "hand",
                }
            )
    return out


def main() -> None:
    rng = random.Random(9)
    train, dev = [], []
    seen = set()
    for path in sorted(HERE.glob("*.json")):
        area = path.stem
        for chat in json.load(open(path, encoding="utf-8"))["chats"]:
            chat = {**chat, "id": f"{area[:4]}-{chat['id']}", "area": area}
            items = pairs(chat, rng)
            items = [
                it
                for it in items
                if (k := (it["question"], it["sentence"], it["speaker"])) not in seen
                and not seen.add(k)
            ]
            (dev if zlib.crc32(chat["id"].encode()) % 5 == 0 else train).extend(items)
    (HERE / "dev").mkdir(exist_ok=True)
    for items, path in ((train, HERE / "chat-support.jsonl"), (dev, HERE / "dev" / "chat-support-dev.jsonl")):
        with open(path, "w", encoding="utf-8") as f:
            for it in items:
                f.write(json.dumps(it, ensure_ascii=False) + "\n")
        labels = {}
        for it in items:
            labels[it["label"]] = labels.get(it["label"], 0) + 1
        print(path.name, len(items), labels)


if __name__ == "__main__":
    main()
