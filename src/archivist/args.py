"""Arguments checked against their type hints where callers come in, so that a wrong type,
a number out of range or text the store cannot hold is one InputError line naming the
argument, never a TypeError from deep inside (the promise of errors.py).

A class that derives from ``Checked`` (MemoryService and its mixins, the mem0 facade)
has each public method wrapped: its bound arguments are checked against the method's
hints, which are read once, on the method's first call. What is checked:

- ``str``: a string both backends can store (model.text_problem: no NUL, no lone surrogate);
- ``int``: an int, not a bool, within 0..2**63-1 (the store's keys and counts), or the
  ``Range`` of ``Annotated[int, Range(...)]`` (``AnyInt``: any size, a later check says
  which are valid);
- ``float``: an int or float, not a bool, finite, within an ``Annotated`` ``Range`` if any;
- ``bool``, ``None``, ``Literal[...]``, ``datetime`` and other concrete classes (isinstance);
- unions: a value fits if one member takes it (when none does, the message is that of the
  member it came closest to fitting);
- containers (``Sequence[str]``, ``list[dict]``, ``Iterable[str]``, ``tuple[str, int]``):
  the container's type, and each item when the container is a list, tuple or set (an
  iterator is not read ahead: its items are the callee's to check).

Anything else (``Any``, callables, protocols, type variables, an ``Annotated[..., UNCHECKED]``
parameter) is left to the method: a union with such a member is not checked at all.
A name the hints cannot resolve (a TYPE_CHECKING import) is an error on first call, so a
check is never dropped silently. Defaults are not checked (they are ours, not the caller's).
"""

from __future__ import annotations

import collections.abc as abc
import functools
import inspect
import math
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, Union

from .errors import InputError
from .model import MAX_ID, MAX_YEAR, MIN_YEAR, text_problem

MAX_INT = MAX_ID  # the largest integer both backends store

Problem = Callable[[Any], "str | None"]  # a value -> what is wrong with it (after its name)


@dataclass(frozen=True)
class Range:
    """Bounds of an ``Annotated[int, Range(...)]`` or ``Annotated[float, Range(...)]``;
    None leaves that end open."""

    low: float | None = 0
    high: float | None = MAX_INT


UNCHECKED = object()  # ``Annotated[T, UNCHECKED]``: the method checks this argument itself
AnyInt = Annotated[int, Range(None, None)]  # an id of any size: the callee says NotFound
# A time as epoch seconds, within the years the store keeps (model.MIN_YEAR..MAX_YEAR).
EpochSeconds = Annotated[
    float,
    Range(
        datetime(MIN_YEAR, 1, 1, tzinfo=UTC).timestamp(),
        datetime(MAX_YEAR + 1, 1, 1, tzinfo=UTC).timestamp() - 1,
    ),
]


@dataclass(frozen=True)
class Check:
    """One annotation, compiled: which values have its type (``fits``), what is wrong with
    one that does (``problem``, None when nothing can be), and how to name it."""

    what: str  # "a string", in a message
    many: str  # "strings", for a container's items
    fits: Callable[[Any], bool]
    problem: Problem | None = None

    def __call__(self, value: Any) -> str | None:
        if not self.fits(value):
            return f" must be {self.what}; got {shown(value)}"
        return self.problem(value) if self.problem is not None else None


NONE = Check("None", "None", lambda v: v is None)


def shown(value: Any) -> str:
    """A caller's value in a one-line message: a short repr (no 5,000-digit int)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 128:
        return f"an integer of {value.bit_length()} bits"
    if isinstance(value, str):
        text = repr(value[:60])
    elif isinstance(value, int | float | types.NoneType):
        text = repr(value)
    else:
        text = f"{type(value).__name__} {safe_repr(value)}"
    return text if len(text) <= 60 else text[:57] + "..."


def safe_repr(value: Any) -> str:
    """repr of a container, cut short and on one line ('' when its repr fails)."""
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a value whose repr fails is still named
        return ""
    return " ".join(text[:200].split())


# -- compiling annotations --------------------------------------------------------------


def compile_hint(hint: Any) -> Check | None:
    """The check for one annotation, or None where it is not checked."""
    origin, params = typing.get_origin(hint), typing.get_args(hint)
    if origin is Annotated:
        meta = hint.__metadata__
        if any(m is UNCHECKED for m in meta):
            return None
        ranges = [m for m in meta if isinstance(m, Range)]
        return _number(params[0], ranges[0]) if ranges else compile_hint(params[0])
    if origin in (Union, types.UnionType):
        return _union([compile_hint(p) for p in params])
    if origin is Literal:
        return _literal(params)
    if origin is not None:
        return _container(origin, params)
    if isinstance(hint, type) and hint in _CONTAINERS:
        return _container(hint, ())
    if hint is None or hint is types.NoneType:
        return NONE
    if hint is int:
        return _number(int, Range())
    if hint is float:
        return _number(float, Range(None, None))
    if hint is str:
        return Check("a string", "strings", lambda v: isinstance(v, str), _text)
    if hint is bool:
        return Check("True or False", "booleans", lambda v: v is True or v is False)
    if hint is Any or hint is object or getattr(hint, "_is_protocol", False):
        return None
    if isinstance(hint, type):
        return _instance(hint)
    return None  # a TypeVar, NewType or other special form: the method's to check


def _text(value: str) -> str | None:
    problem = text_problem(value)
    return f" {problem}" if problem else None


def _number(kind: type, bounds: Range) -> Check:
    low, high = bounds.low, bounds.high
    span = "" if low is None and high is None else f" in {_bound(low)}..{_bound(high)}"
    if kind is float:

        def fits(v: Any) -> bool:
            return isinstance(v, int | float) and not isinstance(v, bool)

        def wrong(v: Any) -> str | None:
            if not math.isfinite(v) if isinstance(v, float) else v.bit_length() > 1023:
                return f" must be a finite number; got {shown(v)}"
            if (low is not None and v < low) or (high is not None and v > high):
                return f" must be a number{span}; got {shown(v)}"
            return None

        return Check(f"a number{span}" if span else "a finite number", "numbers", fits, wrong)

    def fits_int(v: Any) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    def out_of_range(v: int) -> str | None:
        if (low is not None and v < low) or (high is not None and v > high):
            return f" must be an integer{span}; got {shown(v)}"
        return None

    return Check(f"an integer{span}", "integers", fits_int, out_of_range if span else None)


def _bound(b: float | None) -> str:
    if b is None:
        return ""
    return "2**63-1" if b == MAX_INT else repr(b)


def _union(members: list[Check | None]) -> Check | None:
    if any(m is None for m in members):
        return None  # one member takes anything: the union cannot refuse a value
    checks = [m for m in members if m is not None]
    first = checks[0]
    if len(checks) == 2 and checks[1] is NONE:  # Optional[X], the common case
        return Check(
            f"{first.what} or None",
            f"{first.many} or None",
            lambda v: v is None or first.fits(v),
            None if first.problem is None else lambda v: None if v is None else first.problem(v),  # type: ignore[misc]
        )

    def problem(value: Any) -> str | None:
        found = [c for c in checks if c.fits(value)]
        problems = [c.problem(value) if c.problem else None for c in found]
        if any(p is None for p in problems):
            return None
        return max(problems, key=_reach)  # type: ignore[arg-type]

    return Check(
        _either([c.what for c in checks]),
        _either([c.many for c in checks]),
        lambda v: any(c.fits(v) for c in checks),
        problem,
    )


def _reach(problem: str) -> int:
    """How far into a container ``problem`` is (its first bad item's index; -1 for the
    value itself): of a union's problems, the one whose member fit the value longest."""
    if problem.startswith("["):
        return int(problem[1 : problem.index("]")])
    return -1


def _either(names: list[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def _literal(values: tuple) -> Check:
    names = ", ".join(repr(v) for v in values)
    return Check(
        f"one of {names}",
        f"values among {names}",
        lambda v: any(type(v) is type(x) and v == x for x in values),
    )


def _instance(cls: type) -> Check:
    article = "an" if cls.__name__[:1].lower() in "aeiou" else "a"
    return Check(
        f"{article} {cls.__name__}", f"{cls.__name__} objects", lambda v: isinstance(v, cls)
    )


# Containers a hint may name, with the types that fit; text is never a container of text.
_CONTAINERS: dict[Any, tuple[str, type]] = {
    list: ("a list", list),
    tuple: ("a tuple", tuple),
    set: ("a set", set),
    frozenset: ("a frozenset", frozenset),
    dict: ("a dict", dict),
    abc.Sequence: ("a sequence", abc.Sequence),
    abc.Collection: ("a collection", abc.Collection),
    abc.Iterable: ("an iterable", abc.Iterable),
    abc.Mapping: ("a mapping", abc.Mapping),
}
_MATERIAL = (list, tuple, set, frozenset)  # read item by item without consuming anything


def _container(origin: Any, params: tuple) -> Check | None:
    if origin not in _CONTAINERS:
        return None  # Callable[...], type[...], another generic: not checked
    what, cls = _CONTAINERS[origin]

    def fits(v: Any) -> bool:
        return isinstance(v, cls) and not isinstance(v, str | bytes)

    if origin is tuple and params and params[-1] is not Ellipsis:
        return _fixed_tuple([compile_hint(p) for p in params])
    if cls in (dict, abc.Mapping) or not params:
        return Check(what, what.split(" ", 1)[1] + "s", fits)
    item = compile_hint(params[0])
    if item is None:
        return Check(what, what.split(" ", 1)[1] + "s", fits)
    noun = what.split(" ", 1)[1]

    def items(value: Any) -> str | None:
        if isinstance(value, _MATERIAL):
            for i, x in enumerate(value):
                if (p := item(x)) is not None:
                    return f"[{i}]{p}"
        return None

    return Check(f"{what} of {item.many}", f"{noun}s of {item.many}", fits, items)


def _fixed_tuple(items: list[Check | None]) -> Check:
    what = f"a tuple of {len(items)}"

    def fits(v: Any) -> bool:
        return isinstance(v, tuple) and len(v) == len(items)

    def problem(value: tuple) -> str | None:
        for i, (check, x) in enumerate(zip(items, value, strict=True)):
            if check is not None and (p := check(x)) is not None:
                return f"[{i}]{p}"
        return None

    return Check(what, f"tuples of {len(items)}", fits, problem)


# -- the wrapper ------------------------------------------------------------------------


class Plan:
    """A function's checks: parameter names by position and the check of each."""

    def __init__(self, fn: Callable) -> None:
        self.name = f"{fn.__name__}()"
        self.signature = inspect.signature(fn)
        kinds = inspect.Parameter
        params = list(self.signature.parameters.values())
        fixed = [p for p in params if p.kind not in (kinds.VAR_POSITIONAL, kinds.VAR_KEYWORD)]
        self.positional = tuple(
            p.name for p in fixed if p.kind in (kinds.POSITIONAL_ONLY, kinds.POSITIONAL_OR_KEYWORD)
        )
        self.index = {name: i for i, name in enumerate(self.positional)}
        self.names = frozenset(p.name for p in fixed)
        self.required = sum(p.default is p.empty for p in fixed)
        self.open = len(fixed) < len(params)  # *args or **kwargs: Python binds the rest
        hints = hints_of(fn)
        self.checks: dict[str, Check] = {}
        for p in fixed:
            if p.name in hints and (check := compile_hint(hints[p.name])) is not None:
                self.checks[p.name] = check

    def check(self, args: tuple, kwargs: dict) -> None:
        """InputError naming the first argument its hint refuses, or saying how the call
        does not fit the signature (what Python's TypeError would say)."""
        checks, n = self.checks, len(args)
        for name, value in zip(self.positional, args, strict=False):
            if (c := checks.get(name)) is not None and (p := c(value)) is not None:
                raise InputError(f"{self.name}: {name}{p}")
        odd = n > len(self.positional) or n + len(kwargs) < self.required
        for name, value in kwargs.items():
            if (c := checks.get(name)) is not None and (p := c(value)) is not None:
                raise InputError(f"{self.name}: {name}{p}")
            odd = odd or name not in self.names or self.index.get(name, n) < n
        if odd and not self.open:
            try:
                self.signature.bind(*args, **kwargs)
            except TypeError as e:
                raise InputError(f"{self.name}: {e}") from None


def hints_of(fn: Callable) -> dict[str, Any]:
    """``fn``'s parameter hints, resolved in its module (its return hint may name a
    TYPE_CHECKING import: it is left out). A parameter hint that does not resolve raises."""
    params = {k: v for k, v in fn.__annotations__.items() if k != "return"}
    holder = types.SimpleNamespace(__annotations__=params)
    return typing.get_type_hints(holder, globalns=fn.__globals__, include_extras=True)


def checked(fn: Callable) -> Callable:
    """``fn`` with its arguments checked against its hints first (see the module docstring)."""
    plan: Plan | None = None

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        nonlocal plan
        if plan is None:
            plan = Plan(fn)
        plan.check(args, kwargs)
        return fn(*args, **kwargs)

    call.__checked__ = fn  # type: ignore[attr-defined]
    return call


class Checked:
    """A base class whose subclasses' public methods check their arguments (``checked``)."""

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        for name, attr in list(vars(cls).items()):
            if name.startswith("_"):
                continue
            if isinstance(attr, staticmethod | classmethod):
                if inspect.isfunction(attr.__func__):
                    setattr(cls, name, type(attr)(checked(attr.__func__)))
            elif inspect.isfunction(attr) and not hasattr(attr, "__checked__"):
                setattr(cls, name, checked(attr))
