"""The Core the layers are handed, the injectable clock, and the layering itself."""

from __future__ import annotations

import sys
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from archivist.config import Settings
from archivist.core import Core
from archivist.errors import ConfigError, InputError
from archivist.prompts import rewrite
from archivist.service import MemoryService
from archivist.testing import FakeEmbedder, FakeLLM, FixedClock
from conftest import T0, make_conversation


def memory(path: Path, clock: FixedClock, **kw: object) -> MemoryService:
    settings = Settings(consolidate_mode="manual")
    return MemoryService(path, settings=settings, embedder=FakeEmbedder(), clock=clock, **kw)


def test_relative_periods_resolve_against_the_injected_clock(tmp_path: Path) -> None:
    clock = FixedClock(T0 + timedelta(days=1))  # Tuesday 9 May 2023
    with memory(tmp_path / "m.db", clock) as mem:
        assert mem.route("What did Ana do yesterday?").since == T0.replace(hour=0, minute=0)
        clock.advance(days=1)
        assert mem.route("What did Ana do yesterday?").since == T0.replace(day=9, hour=0, minute=0)


def test_context_shows_nothing_said_after_the_clocks_now(tmp_path: Path) -> None:
    clock = FixedClock(T0 + timedelta(days=1))
    sessions = [[("Ana", "I adopted a cat named Pixel.")], [("Ana", "Pixel learned to sit.")]]
    with memory(tmp_path / "m.db", clock) as mem:
        mem.add(make_conversation("c", sessions))  # session 2 is a week later
        shown = {i.id for i in mem.context("Pixel", conversation="c").items if i.kind == "message"}
        assert shown == {"c/D1:1"}
        clock.advance(weeks=2)
        shown = {i.id for i in mem.context("Pixel", conversation="c").items if i.kind == "message"}
        assert shown == {"c/D1:1", "c/D2:1"}


def test_the_store_stamps_its_rows_with_the_injected_clock(tmp_path: Path) -> None:
    clock = FixedClock(T0 + timedelta(days=3))
    with memory(tmp_path / "m.db", clock) as mem:
        mem.add(make_conversation("c", [[("Ana", "I adopted a cat named Pixel.")]]))
        mem.consolidate()
        stamped = {
            t: {r[0] for r in mem.core.store._db.execute(f"SELECT {col} FROM {t}")}
            for t, col in (("conversations", "created_at"), ("jobs", "created_at"))
        }
        assert mem.core.store.clock is clock
    assert stamped == {t: {clock().isoformat()} for t in stamped}


def test_fixed_clock_refuses_naive_times() -> None:
    with pytest.raises(ValueError):
        FixedClock(T0.replace(tzinfo=None))
    clock = FixedClock(T0)
    assert clock() == T0 and clock.advance(30) == T0 + timedelta(seconds=30)


def test_core_makes_its_models_on_first_use_and_counts_llm_calls(tmp_path: Path) -> None:
    with memory(tmp_path / "m.db", FixedClock(T0), llm=FakeLLM()) as mem:
        core = mem.core
        assert core.embedder is mem.embedder and core.llm is mem.llm
        assert core.ledger is mem.llm_ledger
        vectors, made = core.embed_missing({"h1": "a cat", "h2": "a dog"})
        assert made == 2 and set(vectors) == {"h1", "h2"}
        plain = Core(mem.store, Settings(embedder="fake"))
        assert plain.llm is None and plain.embedder.name == "fake:64"
        with pytest.raises(InputError, match="needs an LLM"):
            plain.llm_call(rewrite, [], rewrite.RewriteOut)


def test_a_core_checks_provider_names_before_opening_anything(tmp_path: Path) -> None:
    bad = Settings(db_path=tmp_path / "m.db", llm="gpt")
    with pytest.raises(ConfigError, match="unknown llm 'gpt'"):
        Core.open(bad)
    assert not (tmp_path / "m.db").exists()
    with memory(tmp_path / "ok.db", FixedClock(T0)) as mem:
        with pytest.raises(ConfigError, match="llm_model and llm_base_url"):
            replace(mem.core, settings=Settings(llm="openai"))


def _cycles(graph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    grimp = pytest.importorskip("grimp")  # with import-linter (the dev extra)
    graph = grimp.build_graph("archivist")
    assert _cycles(graph) == []


def test_the_layers_under_the_service_never_import_it() -> None:
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("archivist")
    below = [
        m
        for m in graph.modules
        if m.split(".")[1:2] and m.split(".")[1] in ("read", "write", "jobs", "transfer", "core")
    ]
    for m in below:
        for top in ("archivist.service", "archivist.service_views"):
            assert not graph.chain_exists(m, top), f"{m} reaches {top}"
