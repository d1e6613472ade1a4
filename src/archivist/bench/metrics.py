"""Benchmark metrics (pure): evidence recall, latency percentiles, LoCoMo QA scores."""

from __future__ import annotations

import math
import re
import string
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence


def evidence_recall(retrieved: Sequence[str], evidence: Iterable[str], k: int) -> float:
    """Share of the evidence ids found among the first k retrieved ids."""
    gold = set(evidence)
    if not gold:
        raise ValueError("evidence_recall needs at least one evidence id")
    return len(gold & set(retrieved[:k])) / len(gold)


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(p / 100 * len(ordered))))
    return ordered[rank - 1]


def mean(values: Iterable[float]) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else 0.0


def by_category(rows: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Mean per category plus "overall" (mean over all rows, not over categories)."""
    groups: dict[str, list[float]] = defaultdict(list)
    everything: list[float] = []
    for cat, value in rows:
        groups[str(cat)].append(value)
        everything.append(value)
    out = {"overall": round(mean(everything), 4)}
    out.update({c: round(mean(v), 4) for c, v in sorted(groups.items())})
    return out


# -- LoCoMo QA scoring (official rules, snap-research/LoCoMo task_eval/evaluation.py) -------

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = set(string.punctuation)
ABSTAIN_PHRASES = ("no information available", "not mentioned")


def normalize_answer(s: str) -> str:
    """LoCoMo's normalisation: drop commas, lowercase, strip punctuation, drop a/an/the/and."""
    s = s.replace(",", "").lower()
    s = "".join(ch for ch in s if ch not in _PUNCT)
    return " ".join(_ARTICLES.sub(" ", s).split())


def _stems(text: str) -> list[str]:
    return [porter_stem(w) for w in normalize_answer(text).split()]


def token_f1(prediction: str, gold: str) -> float:
    """Token F1 over Porter stems of the normalised strings (LoCoMo's ``f1_score``)."""
    pred, ref = _stems(prediction), _stems(gold)
    same = sum((Counter(pred) & Counter(ref)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def multi_f1(prediction: str, gold: str) -> float:
    """Category 1: split both on commas; mean over gold parts of the best-matching part."""
    preds = [p.strip() for p in prediction.split(",")]
    golds = [g.strip() for g in gold.split(",")]
    return mean(max(token_f1(p, g) for p in preds) for g in golds)


def says_abstain(prediction: str) -> bool:
    """Category 5 counts as right when the answer says one of the official abstain phrases."""
    low = prediction.lower()
    return any(p in low for p in ABSTAIN_PHRASES)


def locomo_f1(prediction: str, gold: str, category: int) -> float:
    """The official per-category score: 1 multi-part F1, 2-4 F1 (3: gold cut at ;), 5 abstain."""
    if category == 5:
        return 1.0 if says_abstain(prediction) else 0.0
    if category == 3:
        gold = gold.split(";")[0].strip()
    if category == 1:
        return multi_f1(prediction, gold)
    return token_f1(prediction, gold)


def bleu1(prediction: str, gold: str) -> float:
    """BLEU-1: clipped unigram precision × brevity penalty, on normalised (unstemmed) tokens."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if not pred or not ref:
        return 0.0
    clipped = sum((Counter(pred) & Counter(ref)).values())
    precision = clipped / len(pred)
    bp = 1.0 if len(pred) > len(ref) else math.exp(1 - len(ref) / len(pred))
    return bp * precision


# -- Porter stemmer (NLTK's default mode, which LoCoMo's scorer uses) ------------------------

_IRREGULAR = {
    "skies": "sky", "sky": "sky", "dying": "die", "lying": "lie", "tying": "tie",
    "news": "news", "innings": "inning", "inning": "inning", "outings": "outing",
    "outing": "outing", "cannings": "canning", "canning": "canning", "howe": "howe",
    "proceed": "proceed", "exceed": "exceed", "succeed": "succeed",
}  # fmt: skip
_STEP2 = (
    ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"),
    ("izer", "ize"), ("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"),
    ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"), ("ator", "ate"),
    ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"),
    ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"), ("fulli", "ful"), ("logi", "log"),
)  # fmt: skip
_STEP3 = (
    ("icate", "ic"), ("ative", ""), ("alize", "al"), ("iciti", "ic"), ("ical", "ic"),
    ("ful", ""), ("ness", ""),
)  # fmt: skip
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
    "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
)  # fmt: skip


def _cons(w: str, i: int) -> bool:
    if w[i] in "aeiou":
        return False
    if w[i] == "y":
        return i == 0 or not _cons(w, i - 1)
    return True


def _m(stem: str) -> int:
    """Porter's measure: the number of vowel-consonant sequences in the stem."""
    pattern = "".join("c" if _cons(stem, i) else "v" for i in range(len(stem)))
    return pattern.count("vc")


def _has_vowel(stem: str) -> bool:
    return any(not _cons(stem, i) for i in range(len(stem)))


def _double_cons(w: str) -> bool:
    return len(w) >= 2 and w[-1] == w[-2] and _cons(w, len(w) - 1)


def _cvc(w: str) -> bool:
    if len(w) < 3:
        return len(w) == 2 and not _cons(w, 0) and _cons(w, 1)  # NLTK extension
    return (
        _cons(w, len(w) - 3)
        and not _cons(w, len(w) - 2)
        and _cons(w, len(w) - 1)
        and w[-1] not in "wxy"
    )


def _step1ab(w: str) -> str:
    if w.endswith("sses"):
        w = w[:-2]
    elif w.endswith("ies"):
        w = w[:-2] if len(w) == 4 else w[:-3] + "i"
    elif w.endswith("s") and not w.endswith("ss"):
        w = w[:-1]
    if w.endswith("ied"):  # NLTK extension: "died" -> "die", "cried" -> "cri"
        return w[:-1] if len(w) == 4 else w[:-3] + "i"
    if w.endswith("eed"):
        return w[:-1] if _m(w[:-3]) > 0 else w
    for suffix in ("ed", "ing"):
        if w.endswith(suffix) and _has_vowel(w[: -len(suffix)]):
            w = w[: -len(suffix)]
            if w.endswith(("at", "bl", "iz")):
                return w + "e"
            if _double_cons(w) and w[-1] not in "lsz":
                return w[:-1]
            if _m(w) == 1 and _cvc(w):
                return w + "e"
            return w
    return w


def _replace(w: str, rules: tuple[tuple[str, str], ...], min_m: int) -> str:
    for suffix, repl in sorted(rules, key=lambda r: -len(r[0])):
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            return stem + repl if _m(stem) > min_m - 1 else w
    return w


def porter_stem(word: str) -> str:
    """Porter (1980) with NLTK's extensions, enough to reproduce LoCoMo's F1."""
    w = word.lower()
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if len(w) <= 2:
        return w
    w = _step1ab(w)
    if w.endswith("y") and len(w) > 2 and _cons(w, len(w) - 2):  # step 1c (NLTK)
        w = w[:-1] + "i"
    if w.endswith("alli") and _m(w[:-4]) > 0:  # NLTK applies alli -> al, then re-runs step 2
        w = _replace(w[:-4] + "al", _STEP2, 1)
    else:
        w = _replace(w, _STEP2, 1)
    w = _replace(w, _STEP3, 1)
    for suffix in sorted(_STEP4, key=len, reverse=True):
        if w.endswith(suffix):
            stem = w[: -len(suffix)]
            if _m(stem) > 1 and (suffix != "ion" or stem.endswith(("s", "t"))):
                w = stem
            break
    if w.endswith("e"):  # step 5a
        stem = w[:-1]
        if _m(stem) > 1 or (_m(stem) == 1 and not _cvc(stem)):
            w = stem
    if _m(w) > 1 and _double_cons(w) and w.endswith("l"):  # step 5b
        w = w[:-1]
    return w
