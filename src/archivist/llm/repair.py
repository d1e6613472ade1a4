"""Turn almost-JSON from a language model into Python values, or say why not.

Models wrap JSON in code fences and prose, leave trailing commas, write Python
literals and single quotes, and get cut off at the token limit. ``parse_json``
undoes those mistakes where the intent is unambiguous and leaves the judgement
of whether the result is *usable* to schema validation. Pure functions only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_FENCE = re.compile(r"```[ \t]*[A-Za-z0-9_+-]*[ \t]*\r?\n?(.*?)(?:```|\Z)", re.DOTALL)
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)
_WORD = re.compile(r"[^\s,:{}\[\]\"'/]+")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_$][\w$-]*")
_LITERALS = {
    "true": "true",
    "false": "false",
    "null": "null",
    "True": "true",
    "False": "false",
    "None": "null",
}
_ESCAPES = frozenset('"\\/bfnrt')  # JSON's one-letter escapes, copied as they are
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_CLOSER = {"{": "}", "[": "]"}
_DECODER = json.JSONDecoder()


def parse_json(text: str) -> Any:
    """The JSON value ``text`` most plausibly meant; ValueError with the reason if none."""
    if not isinstance(text, str):
        raise TypeError(f"parse_json needs a str, not {type(text).__name__}")
    try:
        return _parse(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply to parse") from None


def _parse(text: str) -> Any:
    """Strict JSON, else each fenced block, else the whole text, searched for JSON."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    text = _THINK.sub("", text)
    sources = [m.group(1) for m in _FENCE.finditer(text) if m.group(1).strip()] + [text]
    first_error: ValueError | None = None
    for source in sources:
        try:
            return _parse_embedded(source)
        except ValueError as e:
            first_error = first_error or e
    assert first_error is not None
    raise first_error


def _parse_embedded(text: str) -> Any:
    """The longest object/array in ``text`` that decodes, strictly or once repaired."""
    # Each candidate skips the starts inside what the previous one read, so the work stays
    # linear in the text however many brackets its prose holds.
    starts = [i for i, c in enumerate(text) if c in "{["]
    if not starts:
        raise ValueError(f"no JSON object or array found in {_preview(text)}")
    best: tuple[int, Any] | None = None
    first_error: ValueError | None = None
    covered_to = -1
    for start in starts:
        if start < covered_to:
            continue  # nested in a candidate already read: a fragment, never the answer
        try:
            value, end = _decode_at(text, start)
        except _RepairError as e:
            covered_to, first_error = e.offset, first_error or e
            continue
        covered_to = end
        if best is None or end - start > best[0]:
            best = (end - start, value)
    if best is None:
        raise ValueError(f"could not repair JSON ({first_error}) in {_preview(text)}")
    return best[1]


def _decode_at(text: str, start: int) -> tuple[Any, int]:
    """The value opening at ``start`` and the offset after it: strict first, then repaired."""
    try:
        return _DECODER.raw_decode(text, start)
    except ValueError:
        pass
    repaired, end = _repair(text, start)
    try:
        return json.loads(repaired), end
    except ValueError as e:
        raise _RepairError(str(e), end) from None


def _preview(text: str, limit: int = 80) -> str:
    """A short quoted excerpt for error messages."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "…")


class _RepairError(ValueError):
    """Repair gave up at ``offset``; candidates starting before it are skipped."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


@dataclass
class _Token:
    kind: str  # open, close, comma, colon, key, value, partial
    text: str


def _repair(text: str, start: int) -> tuple[str, int]:
    """The repaired JSON text and the offset where reading stopped."""
    if text[start : start + 1] not in _CLOSER:
        raise _RepairError(f"offset {start} does not open an object or array", start + 1)
    tokens: list[_Token] = []
    stack: list[str] = []
    i = start
    while i < len(text) and (stack or not tokens):
        c = text[i]
        if c.isspace():
            i += 1
        elif c == "/" and text.startswith(("//", "/*"), i):
            i = _skip_comment(text, i)
        elif c in "{[":
            _separate(tokens, stack)
            tokens.append(_Token("open", c))
            stack.append(c)
            i += 1
        elif c in "}]":
            _close(tokens, stack, c, i)
            i += 1
        elif c in ",:":
            if tokens and tokens[-1].kind not in ("open", "comma", "colon"):
                tokens.append(_Token("comma" if c == "," else "colon", c))
            i += 1
        elif c in "\"'":
            value, i, closed = _read_string(text, i)
            _separate(tokens, stack)
            kind = "key" if _expects_key(tokens, stack) else "value"
            tokens.append(_Token(kind if closed or kind == "value" else "partial", value))
        else:
            i = _read_word(text, i, tokens, stack)
    if stack:  # cut off: drop the dangling member, then close what is open
        _trim_dangling(tokens)
        tokens.extend(_Token("close", _CLOSER[o]) for o in reversed(stack))
    return "".join(token.text for token in tokens), i


def _separate(tokens: list[_Token], stack: list[str]) -> None:
    """Insert a missing comma between two values of the same container."""
    if stack and tokens and tokens[-1].kind in ("value", "close"):
        tokens.append(_Token("comma", ","))


def _expects_key(tokens: list[_Token], stack: list[str]) -> bool:
    """Inside an object, right after ``{`` or ``,``, the next string is a key."""
    return bool(stack) and stack[-1] == "{" and tokens[-1].kind in ("open", "comma")


def _close(tokens: list[_Token], stack: list[str], c: str, where: int) -> None:
    """Close the innermost container, dropping a trailing comma; close skipped ones too."""
    opener = "{" if c == "}" else "["
    if opener not in stack:
        raise _RepairError(f"unbalanced {c!r} at offset {where}", where)
    while stack:
        while tokens and tokens[-1].kind == "comma":
            tokens.pop()
        top = stack.pop()
        tokens.append(_Token("close", _CLOSER[top]))
        if top == opener:
            return


def _trim_dangling(tokens: list[_Token]) -> None:
    """Remove what a cut-off text left half-written: commas, colons, keys, partial words."""
    while tokens:
        kind = tokens[-1].kind
        if kind == "colon":
            tokens.pop()
            if tokens and tokens[-1].kind in ("key", "value"):
                tokens.pop()  # the key whose value never came
        elif kind in ("comma", "key", "partial"):
            tokens.pop()
        else:
            return


def _next_char(text: str, i: int) -> str:
    """The first non-space character at or after ``i`` ("" at the end)."""
    while i < len(text) and text[i].isspace():
        i += 1
    return text[i : i + 1]


def _ends_string(text: str, i: int) -> bool:
    """A quote closes a string only where JSON could continue: before , : } ] or the end."""
    return _next_char(text, i + 1) in ("", ",", ":", "}", "]")


def _read_string(text: str, i: int) -> tuple[str, int, bool]:
    """A quoted string as a JSON literal, the offset after it, and whether it was closed."""
    quote, j, parts = text[i], i + 1, ['"']
    while j < len(text):
        c = text[j]
        if c == "\\":
            esc = text[j + 1 : j + 2]
            if esc == "u" and _HEX4.fullmatch(text, j + 2, j + 6):
                parts.append(text[j : j + 6])  # kept verbatim so surrogate pairs still pair
                j += 6
            elif esc == "u" and j + 6 > len(text) or not esc:
                break  # cut off inside an escape
            else:
                parts.append(_escape_pair(esc))
                j += 2
        elif c == quote and _ends_string(text, j):
            return "".join(parts) + '"', j + 1, True
        else:
            parts.append(json.dumps(c)[1:-1] if c == '"' or c < " " else c)
            j += 1
    return "".join(parts) + '"', len(text), False


def _escape_pair(esc: str) -> str:
    """JSON for a backslash escape: kept if valid, ``\\'`` unescaped, others made literal."""
    if esc in _ESCAPES:
        return "\\" + esc
    if esc == "'":
        return esc
    return "\\\\" + (json.dumps(esc)[1:-1] if esc < " " else esc)


def _read_word(text: str, i: int, tokens: list[_Token], stack: list[str]) -> int:
    """A bare word: Python/JSON literal, number, or unquoted key; the offset after it."""
    match = _WORD.match(text, i)
    if not match:
        raise _RepairError(f"unexpected {text[i]!r} at offset {i}", i)
    word, end = match.group(), match.end()
    _separate(tokens, stack)
    if _expects_key(tokens, stack) and _IDENT.fullmatch(word) and _next_char(text, end) == ":":
        tokens.append(_Token("key", json.dumps(word)))
    elif word in _LITERALS:
        tokens.append(_Token("value", _LITERALS[word]))
    elif _NUMBER.fullmatch(word):
        tokens.append(_Token("value", word))
    elif end == len(text):
        tokens.append(_Token("partial", word))  # cut off mid-word: dropped when closing
    else:
        raise _RepairError(f"unexpected word {word!r} at offset {i}", i)
    return end


def _skip_comment(text: str, i: int) -> int:
    """The offset after a // or /* */ comment (models sometimes annotate their JSON)."""
    if text.startswith("//", i):
        end = text.find("\n", i)
    else:
        end = text.find("*/", i + 2)
        end = -1 if end < 0 else end + 2
    return len(text) if end < 0 else end
