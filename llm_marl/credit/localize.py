"""Failure route: first-error localization by binary search over prefixes, and preference pairs (Shapley-PRM Sec. 4.2).

    t* = min{t ∈ 1..T : J_pref(H_t) = ERR}        (H_t = the first t messages; H_0 is OK by definition)
    pair = (H_{t*-1}, y+, y- = m_{i*,t*})         (for DPO: see credit.dpo)

Binary search finds t* with at most ceil(log2(T+1)) prefix-judge calls, because there are T+1
possible answers (t* ∈ 1..T, or no error at all): H_T is not checked up front, it is just one of
the midpoints the search may visit. The search assumes the prefix judge is monotone (once a prefix
is not viable, no longer prefix is). The paper's "we do not assume monotone traces" is about
crediting repair messages after t* (the failure-alignment judge), not about this search. With a
non-monotone prefix judge the search still returns some t with H_{t-1} OK and H_t ERR, but not
necessarily the first one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class PrefixJudge(Protocol):
    """J_pref of Sec. 4.2: True when the prefix H_t (the first t messages) is still on track (OK)."""

    def __call__(self, t: int) -> bool: ...


@dataclass
class Localization:
    """Result of `first_error`: t*, and what it cost."""

    first_error: int | None
    """t*: the length of the shortest failing prefix (1-based), so the harmful message is messages[t* - 1];
    None when even the full trace H_T is judged OK."""
    judge_calls: int
    """Number of distinct prefix-judge calls made (at most ceil(log2(T+1)))."""
    checked: list[int] = field(default_factory=list)
    """The prefix lengths t that were judged, in call order."""


def first_error(T: int, prefix_ok: PrefixJudge) -> Localization:
    """Locate t* = min{t : prefix H_t fails} in a trace of T messages with O(log T) judge calls (Sec. 4.2)."""
    if T < 0:
        raise ValueError(f"T (number of messages in the trace) must be >= 0, got {T}")
    verdicts: dict[int, bool] = {}

    def ok(t: int) -> bool:
        if t not in verdicts:
            verdicts[t] = bool(prefix_ok(t))
        return verdicts[t]

    lo, hi = 0, T + 1  # invariant: H_lo is OK and H_hi fails; hi = T + 1 is a sentinel for "no prefix fails"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid
    return Localization(first_error=hi if hi <= T else None, judge_calls=len(verdicts), checked=list(verdicts))


@dataclass(frozen=True)
class PreferencePair:
    """One contrastive pair (H_{t*-1}, y+, y-) for agent i*; the trainer fills in its own sample objects."""

    agent: str
    context: Any
    """H_{t*-1}: the trace before the harmful message."""
    chosen: Any
    """y+: the preferred alternative (a corrected edit, a message from a successful episode, a fix)."""
    rejected: Any
    """y- = m_{i*,t*}: the harmful message."""
    meta: dict = field(default_factory=dict)
