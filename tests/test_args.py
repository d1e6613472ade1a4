"""args.py: public methods check their arguments against their type hints, so a wrong type,
a number out of range or text the store cannot hold is one InputError line naming the
argument (issue 34's fuzz run found raw TypeErrors, OverflowErrors, ...)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import pytest

from archivist.args import (
    MAX_INT,
    UNCHECKED,
    AnyInt,
    Checked,
    EpochSeconds,
    Plan,
    Range,
    compile_hint,
    hints_of,
)
from archivist.config import Settings
from archivist.embed.base import Embedder
from archivist.errors import InputError, NotFound
from archivist.mem0 import Memory
from archivist.model import Conversation
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder

NAN, INF = float("nan"), float("inf")
WHEN = datetime(2024, 3, 2, tzinfo=UTC)

# (hint, values it takes, values it refuses)
KINDS: list[tuple[Any, list, list]] = [
    (str, ["", "é", "🙂", "a\nb"], [None, 1, b"x", ["a"], "a\x00b", "\ud800", "x\udfffy"]),
    (int, [0, 7, MAX_INT], [True, False, -1, MAX_INT + 1, 2**64, 1.0, "1", None]),
    (Annotated[int, Range(1, 10)], [1, 10], [0, 11, True]),
    (AnyInt, [-(2**70), 2**70, 0], [True, 1.5, "1"]),
    (float, [0, 1.5, -2.5, 10**300], [NAN, INF, -INF, True, "1.5", 10**400, None]),
    (Annotated[float, Range(-1, 1)], [-1, 0.5, 1], [1.01, -2, NAN]),
    (bool, [True, False], [0, 1, None, "true"]),
    (datetime, [WHEN], ["2024-03-02", 1.0, None]),
    (None, [None], [0, ""]),
    (str | None, [None, "a"], [1, "\x00"]),
    (int | str, ["a", 3], [True, 1.5, None, "\ud800"]),
    (Literal["a", "b"], ["a", "b"], ["c", None, ["a"]]),
    (Literal[1, 2], [1, 2], [True, 1.0, "1"]),
    (Sequence[str], [[], ["a"], ("a", "b")], ["ab", [None], ["a", 1], {"a"}, None]),
    (list[str], [["a"]], [("a",), ["\ud800"]]),
    (list[dict | str], [[{"a": 1}, "b"]], [[1], {"a": 1}]),
    (Iterable[str], [["a"], {"a"}, iter([1])], ["a", [1], 5, None]),
    (Collection[int], [[1], {2}, ()], [[-1], "ab", [True]]),
    (tuple[str, int], [("a", 1)], [["a", 1], ("a",), ("a", -1), ("a", 1, 2)]),
    (tuple[int, ...], [(), (1, 2)], [[1], (1, "a")]),
    (dict, [{}, {"a": None}], [[], None, "a"]),
    (dict[str, int], [{"a": 1}], [[("a", 1)]]),
    (Path, [Path("x")], ["x", None]),
    (EpochSeconds, [0, 1.7e9, -1e9], [2**64, 1e20, NAN, -1e10]),
]


@pytest.mark.parametrize(("hint", "good", "bad"), KINDS, ids=lambda x: repr(x)[:40])
def test_each_kind_of_hint_takes_its_values_and_refuses_others(hint, good, bad) -> None:
    check = compile_hint(hint)
    assert check is not None
    for value in good:
        assert check(value) is None, value
    for value in bad:
        problem = check(value)
        assert problem and "\n" not in problem, value


T = TypeVar("T")


@pytest.mark.parametrize(
    "hint",
    [
        Any,
        object,
        T,
        Embedder,  # a protocol: duck types are welcome
        Callable[[int], int],
        type[int],
        Annotated[int, UNCHECKED],
        str | Any,  # a union with an open member cannot refuse anything
        Conversation | Callable[[], None],
    ],
)
def test_what_cannot_be_checked_is_left_to_the_method(hint) -> None:
    assert compile_hint(hint) is None


def test_a_bool_is_not_an_integer_nor_a_number() -> None:
    assert "got True" in compile_hint(int)(True)
    assert "got False" in compile_hint(float)(False)
    assert compile_hint(int | None)(True) is not None


def test_nan_and_infinity_are_refused_with_what_was_given() -> None:
    assert compile_hint(float)(NAN) == " must be a finite number; got nan"
    assert compile_hint(float)(INF) == " must be a finite number; got inf"


def test_a_lone_surrogate_or_nul_in_text_is_refused_where_it_is() -> None:
    assert compile_hint(str)("ab\ud800") == " contains a lone surrogate at character 2"
    assert compile_hint(str)("a\x00") == " contains a NUL byte"
    assert (
        compile_hint(Sequence[str])(["ok", "\ud800"])
        == "[1] contains a lone surrogate at character 0"
    )


def test_an_iterator_is_not_read_ahead() -> None:
    items = iter(["a", 1])
    assert compile_hint(Iterable[str])(items) is None
    assert list(items) == ["a", 1]  # the callee still gets every item


def test_a_huge_or_long_value_is_shown_short() -> None:
    assert compile_hint(str)(10**5000).endswith("got an integer of 16610 bits")
    shown = compile_hint(int)("x" * 1_000_000)
    assert len(shown) < 120


# -- Checked: methods of a class ---------------------------------------------------------


class Sample(Checked):
    def take(
        self, name: str, n: int = 5, *, tags: Sequence[str] = (), when: datetime | None = None
    ):
        return name, n, tags

    def loose(self, anything, *rest: int, **more: Any) -> tuple:
        return anything, rest, more

    @classmethod
    def make(cls, size: int) -> int:
        return size

    @staticmethod
    def twice(x: float) -> float:
        return 2 * x

    def _private(self, x: int) -> int:
        return x

    @property
    def prop(self) -> int:
        return 1


def test_public_methods_are_checked_and_name_the_argument() -> None:
    s = Sample()
    assert s.take("a", 3, tags=["x"]) == ("a", 3, ["x"])
    with pytest.raises(
        InputError, match=r"^take\(\): n must be an integer in 0..2\*\*63-1; got -1$"
    ):
        s.take("a", -1)
    with pytest.raises(InputError, match=r"take\(\): tags\[1\] must be a string; got None"):
        s.take("a", tags=["x", None])
    with pytest.raises(InputError, match=r"make\(\): size must be an integer"):
        Sample.make("3")
    with pytest.raises(InputError, match=r"twice\(\): x must be a finite number"):
        s.twice(INF)
    assert s._private("not checked") == "not checked"
    assert s.prop == 1
    assert inspect.signature(Sample.take).parameters["n"].default == 5  # wraps keeps it


def test_unannotated_and_variadic_parameters_are_not_checked() -> None:
    assert Sample().loose([None], 1, x=object())[0] == [None]


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.take(),
        lambda s: s.take("a", 1, 2),
        lambda s: s.take("a", nme=1),
        lambda s: s.take("a", name="b"),
    ],
)
def test_a_call_that_does_not_fit_the_signature_is_an_input_error(call) -> None:
    with pytest.raises(InputError, match=r"^take\(\): ") as e:
        call(Sample())
    assert "\n" not in str(e.value)


def test_a_hint_that_does_not_resolve_fails_loudly_not_silently() -> None:
    def f(x: NoSuchName) -> None:  # type: ignore[name-defined]  # noqa: F821
        pass

    with pytest.raises(NameError):
        hints_of(f)


def test_every_public_method_of_the_api_has_a_plan() -> None:
    """A hint naming a TYPE_CHECKING-only import would fail here, not on a user's call."""
    unchecked = {}
    for cls in (MemoryService, Memory):
        for name, attr in inspect.getmembers(cls):
            fn = getattr(attr, "__checked__", None)
            if fn is None:
                continue
            plan = Plan(fn)
            params = [p for p in plan.signature.parameters if p not in ("self", "cls")]
            unchecked[f"{cls.__name__}.{name}"] = {p for p in params if p not in plan.checks}
    assert "MemoryService.search" in unchecked and "Memory.add" in unchecked
    # What is left to the methods: callbacks, models, open-ended shapes and mem0's extras.
    left = {k: v for k, v in unchecked.items() if v}
    assert left == {
        "MemoryService.add": {"progress"},
        "MemoryService.extract": {"progress"},
        "MemoryService.llm_call": {"prompt", "output_type"},
        "MemoryService.select": {"llm", "view"},
        "Memory.add": {"_"},
        "Memory.search": {"_"},
        "Memory.get_all": {"_"},
    }


# -- on the real service -----------------------------------------------------------------


@pytest.fixture
def mem(tmp_path: Path):
    settings = Settings(consolidate_mode="manual")
    with MemoryService(tmp_path / "m.db", settings=settings, embedder=FakeEmbedder()) as m:
        yield m


# (call, the start of its one-line message)
REFUSED = [
    (lambda m: m.person(2**63), "person(): id_or_name must be a string; got 9223372036854775808"),
    (lambda m: m.conflicts(conversation=[None]), "conflicts(): conversation must be a string"),
    (lambda m: m.entities(limit="a/b"), "entities(): limit must be an integer"),
    (lambda m: m.claims(limit=INF), "claims(): limit must be an integer"),
    (lambda m: m.claims(limit=-1), "claims(): limit must be an integer in 0..2**63-1; got -1"),
    (lambda m: m.route({"a": 1}), "route(): question must be a string; got dict"),
    (lambda m: m.import_jsonl(None), "import_jsonl(): lines must be an iterable of strings"),
    (lambda m: m.select([], ["a"]), "select(): person must be a string; got list"),
    (lambda m: m.search("cat", k=True), "search(): k must be an integer"),
    (lambda m: m.search("cat", conversation=["a", 1]), "search(): conversation[1] must be"),
    (lambda m: m.claim_history("é"), "a memory id is an integer"),
    (lambda m: m.claim_history([1]), "claim_history(): claim_id must be an integer or a string"),
    (lambda m: m.dossier(2**64), "dossier(): entity_id must be an integer in 0..2**63-1"),
    (lambda m: m.search_memories("cat", limit=2**62), "search_memories(): limit must be"),
    (lambda m: m.record_context([("claim", 1)], "x"), "record_context(): items[0] must be"),
    (lambda m: m.usefulness("claim", [None]), "usefulness(): ids[0] must be"),
    (lambda m: m.add("We adopted a cat.", user_id="Ana", timestamp=2**64), "add(): timestamp"),
    (lambda m: m.add("We adopted a cat.", user_id="Ana", timestamp=NAN), "add(): timestamp"),
    (lambda m: m.add(1.5), "add(): data must be a Conversation"),
    (lambda m: m.add(["hi", None], user_id="Ana"), "add(): data[1] must be"),
    (lambda m: m.add("hi", user_id=1), "add(): user_id must be a string or None; got 1"),
    (lambda m: m.search("cat", preset=3), "search(): preset must be a string, a SearchConfig"),
]


@pytest.mark.parametrize(("call", "message"), REFUSED, ids=[m for _, m in REFUSED])
def test_the_service_refuses_odd_arguments_in_one_line(mem, call, message) -> None:
    with pytest.raises(InputError) as e:
        call(mem)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert mem.stats()["messages"] == 0


def test_the_mem0_facade_refuses_odd_arguments_in_one_line(mem) -> None:
    m0 = Memory(mem)
    with pytest.raises(InputError, match=r"get_all\(\): user_id must be a string or None; got nan"):
        m0.get_all(user_id=NAN)
    with pytest.raises(InputError, match=r"search\(\): limit must be an integer in 1..10000"):
        m0.search("cat", limit=0)
    with pytest.raises(InputError, match=r"add\(\): timestamp must be"):
        m0.add("We adopted a cat.", user_id="Ana", timestamp=2**64)
    with pytest.raises(InputError, match=r"add\(\): messages\[0\] must be a dict or a string"):
        m0.add([3], user_id="Ana")
    with pytest.raises(InputError, match=r"from_config\(\): config must be a dict or None"):
        Memory.from_config(["path"])


def test_ids_of_any_size_are_well_formed_but_not_stored(mem) -> None:
    for held in (2**63, 2**64, -1, "9" * 30):
        with pytest.raises(NotFound):
            mem.claim_history(held)
        with pytest.raises(NotFound):
            mem.memory(held)


def test_good_calls_still_pass(mem) -> None:
    at = WHEN.timestamp()
    assert mem.add("We adopted a cat.", user_id="Ana", timestamp=at)[0].added == 1
    assert mem.add(["I moved.", {"role": "assistant", "content": "Nice."}], user_id="Ana")
    m0 = Memory(mem)
    m0.add("I live in Lisbon.", user_id="Ana", timestamp=WHEN, metadata={"k": "v"})
    assert mem.search("cat", conversation=("user:Ana",), k=3, session=None)
    assert mem.search("cat", conversation="user:Ana", since=None, route=False)
    assert mem.claims(person="Ana", limit=0) == []
    assert isinstance(mem.entities(limit=MAX_INT), list)
    assert mem.context("Where does Ana live?", person="Ana", budget_tokens=300).text is not None
    assert mem.select("Ana", "all_involving", at_most=2) is not None
    assert m0.get_all(user_id="Ana", limit=5)["results"] is not None
    assert list(mem.export_jsonl("user:Ana"))
    assert mem.get("user:Ana", "m1").text == "We adopted a cat."
