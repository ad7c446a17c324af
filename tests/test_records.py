"""`core.records.fast_init`: the same constructor as the dataclass's own, only cheaper."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field

import pytest

from llm_marl_envs.core import RewardBreakdown, ToolRun, TurnRecord
from llm_marl_envs.core.records import fast_init
from llm_marl_envs.sudoku.parse import SudokuAnswer
from llm_marl_envs.sudoku.rules import Application


def make(decorate: bool):
    @dataclass(frozen=True)
    class Record:
        name: str
        items: tuple = ()
        notes: list = field(default_factory=list)
        checked: bool = False

        def __post_init__(self) -> None:
            if not self.name:
                raise ValueError("empty name")

    return fast_init(Record) if decorate else Record


def test_fast_init_builds_what_the_generated_init_builds():
    fast, plain = make(True), make(False)
    def params(cls):  # names, kinds and defaults (the generated one also carries the annotations)
        return [(p.name, p.kind, repr(p.default)) for p in inspect.signature(cls.__init__).parameters.values()]

    assert params(fast) == params(plain)
    for args, kwargs in [(("a",), {}), (("a", (1, 2)), {"checked": True}), ((), {"name": "b", "notes": [3]})]:
        assert vars(fast(*args, **kwargs)) == vars(plain(*args, **kwargs))
    assert fast("a").notes is not fast("a").notes  # a fresh default per record, as default_factory makes
    record = fast("a")
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.name = "b"
    assert record == fast("a") and repr(record).endswith("(name='a', items=(), notes=[], checked=False)")
    with pytest.raises(ValueError, match="empty name"):  # __post_init__ still runs
        fast("")
    with pytest.raises(TypeError):
        fast()
    with pytest.raises(TypeError):
        fast("a", (), [], False, "extra")


def test_fast_init_refuses_what_it_does_not_handle():
    @dataclass
    class Mutable:
        x: int

    @dataclass(frozen=True)
    class KeywordOnly:
        x: int = field(kw_only=True)

    @dataclass(frozen=True, slots=True)
    class Slots:
        x: int

    for cls in (Mutable, KeywordOnly, Slots):
        with pytest.raises(TypeError):
            fast_init(cls)


@pytest.mark.parametrize("cls", [RewardBreakdown, ToolRun, TurnRecord, SudokuAnswer, Application])
def test_the_records_a_step_makes_have_the_fields_in_their_constructor(cls):
    assert list(inspect.signature(cls.__init__).parameters)[1:] == [f.name for f in dataclasses.fields(cls)]


def test_a_breakdowns_local_and_reward_are_its_infos():
    """`RewardBreakdown.local` / `.reward` and `to_info()` add the same terms in the same order, so they
    agree to the last bit (Python 3.12's compensated `sum` would not)."""
    import random

    from llm_marl_envs.sudoku.env import LAMBDA_SUDOKU, PLANNER_COEF, TOOL_COEF

    rng = random.Random(0)
    for coefficients in (PLANNER_COEF, TOOL_COEF, {"a": 0.1, "b": 0.2, "c": 0.3, "d": 0.4}):
        for _ in range(3000):
            terms = {name: rng.choice([0.0, 1.0, rng.random(), rng.randrange(17) / 16]) for name in coefficients}
            breakdown = RewardBreakdown(rng.choice([0.0, 1.0]), terms, coefficients, mask=1.0, lam=LAMBDA_SUDOKU)
            info = breakdown.to_info()
            assert (breakdown.local, breakdown.reward) == (info["local_reward"], info["reward"])
