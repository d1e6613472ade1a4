"""FakeJudge: a scripted Judge for tests (a fake, not a mock; shipped in archivist.testing)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .base import GoalPair, RelationPair, Statement, SupportPair, TimeMention, Verdict

RelationRule = Callable[[RelationPair], Verdict | None]
SupportRule = Callable[[SupportPair], Verdict | None]
KindRule = Callable[[Statement], Verdict | None]
WhenRule = Callable[[TimeMention], Verdict | None]
ServesRule = Callable[[GoalPair], Verdict | None]


class FakeJudge:
    """Answers from ``relation``/``support``/``kind``/``when``/``serve`` functions (None: the
    default verdict: unrelated, neither, state, an unsure ahead at p 0.5, unrelated) and
    keeps everything it was asked, so tests can read what reached the judge."""

    def __init__(
        self,
        relation: RelationRule | None = None,
        support: SupportRule | None = None,
        kind: KindRule | None = None,
        when: WhenRule | None = None,
        serve: ServesRule | None = None,
        name: str = "fake-judge",
    ) -> None:
        self.relation = relation
        self.support = support
        self.kind = kind
        self.when = when
        self.serve = serve
        self.name = name
        self.asked: list[RelationPair | SupportPair | Statement | TimeMention | GoalPair] = []

    def relations(self, pairs: Sequence[RelationPair]) -> list[Verdict]:
        self.asked += pairs
        rule = self.relation or (lambda p: None)
        return [rule(p) or Verdict("unrelated", 0.9) for p in pairs]

    def supports(self, pairs: Sequence[SupportPair]) -> list[Verdict]:
        self.asked += pairs
        rule = self.support or (lambda p: None)
        return [rule(p) or Verdict("neither", 0.9) for p in pairs]

    def kinds(self, statements: Sequence[Statement]) -> list[Verdict]:
        self.asked += statements
        rule = self.kind or (lambda s: None)
        return [rule(s) or Verdict("state", 0.9) for s in statements]

    def whens(self, mentions: Sequence[TimeMention]) -> list[Verdict]:
        self.asked += mentions
        rule = self.when or (lambda m: None)
        return [rule(m) or Verdict("ahead", 0.5) for m in mentions]

    def serves(self, pairs: Sequence[GoalPair]) -> list[Verdict]:
        self.asked += pairs
        rule = self.serve or (lambda p: None)
        return [rule(p) or Verdict("unrelated", 0.9) for p in pairs]
