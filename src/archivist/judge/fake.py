"""FakeJudge: a scripted Judge for tests (a fake, not a mock; shipped in archivist.testing)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .base import RelationPair, SupportPair, Verdict

RelationRule = Callable[[RelationPair], Verdict | None]
SupportRule = Callable[[SupportPair], Verdict | None]


class FakeJudge:
    """Answers from ``relation``/``support`` functions (None: the default verdict) and
    keeps every pair it was asked, so tests can read what reached the judge."""

    def __init__(
        self,
        relation: RelationRule | None = None,
        support: SupportRule | None = None,
        name: str = "fake-judge",
    ) -> None:
        self.relation = relation
        self.support = support
        self.name = name
        self.asked: list[RelationPair | SupportPair] = []

    def relations(self, pairs: Sequence[RelationPair]) -> list[Verdict]:
        self.asked += pairs
        rule = self.relation or (lambda p: None)
        return [rule(p) or Verdict("unrelated", 0.9) for p in pairs]

    def supports(self, pairs: Sequence[SupportPair]) -> list[Verdict]:
        self.asked += pairs
        rule = self.support or (lambda p: None)
        return [rule(p) or Verdict("neither", 0.9) for p in pairs]
