"""Mutants of a reference solution and the mutation score of a test suite (AT-GRPO A.1.2, s_cov).

Mutants are made by AST operators applied one at a time to the reference solution:

| operator | changes |
|---|---|
| comparison | relational negation: `<`->`>=`, `<=`->`>`, `>`->`<=`, `>=`->`<`, `==`<->`!=`, `in`<->`not in`, `is`<->`is not` |
| boundary | off-by-one: `<`<->`<=`, `>`<->`>=`; an integer constant of a comparison +-1; the start/stop of `range(...)` +-1 |
| arithmetic | `+`<->`-`, `*`->`+`, `//`->`*`, `/`->`*`, `%`->`//`, `**`->`*` (binary and augmented); unary minus removed |
| constant | an integer constant c -> c+1 and c-1 (elsewhere than comparisons and ranges) |
| boolean | `and`<->`or`; `not x` -> `x`; `True`<->`False` |
| return | `return e` -> `return None`; a boolean `return e` -> `return not (e)` |

Generation is deterministic (AST walk order, then operator order), duplicates and mutants equal
to the reference are dropped, and at most `max_mutants` are kept (evenly spaced over the list; for
long programs the mutation sites are first thinned evenly to 3 x max_mutants).
`analyse` then drops the mutants that do not compile or that no input of the problem's mutation
pool tells apart from the reference (treated as equivalent), running everything in a few
harness processes (`runner.run_batch`).
"""

from __future__ import annotations

import ast
import copy
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..sandbox import Sandbox, SandboxLimits
from .runner import batch_job, output_room, outputs_match, run_batch

OPERATORS = ("comparison", "boundary", "arithmetic", "constant", "boolean", "return")
MAX_MUTANTS = 60

_NEGATE = {ast.Lt: ast.GtE, ast.LtE: ast.Gt, ast.Gt: ast.LtE, ast.GtE: ast.Lt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
           ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_ARITH = {ast.Add: [ast.Sub], ast.Sub: [ast.Add], ast.Mult: [ast.Add], ast.FloorDiv: [ast.Mult], ast.Div: [ast.Mult],
          ast.Mod: [ast.FloorDiv], ast.Pow: [ast.Mult]}
_SYMBOL = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=", ast.In: "in",
           ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not", ast.Add: "+", ast.Sub: "-", ast.Mult: "*",
           ast.FloorDiv: "//", ast.Div: "/", ast.Mod: "%", ast.Pow: "**", ast.And: "and", ast.Or: "or"}


@dataclass(frozen=True)
class Mutant:
    operator: str
    line: int
    description: str
    source: str


Edit = Callable[[ast.AST, dict[int, ast.AST]], None]
"""Apply one mutation to the node (in a fresh copy of the tree); the dict maps id(child) -> parent."""


def _int_const(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is int


def _replace_child(parent: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for name, value in ast.iter_fields(parent):
        if value is old:
            setattr(parent, name, new)
            return
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return


def _is_boolean_expr(node: ast.AST | None) -> bool:
    return isinstance(node, (ast.Compare, ast.BoolOp)) or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)) or (
        isinstance(node, ast.Constant) and isinstance(node.value, bool))


def _sites(node: ast.AST, protected: set[int]) -> Iterator[tuple[str, str, Edit]]:
    """(operator, description, edit) for every mutation of `node` itself."""
    if isinstance(node, ast.Compare):
        for j, op in enumerate(node.ops):
            kind = type(op)
            if kind in _NEGATE:
                new = _NEGATE[kind]
                yield "comparison", f"{_SYMBOL[kind]} -> {_SYMBOL[new]}", lambda n, _p, j=j, new=new: n.ops.__setitem__(j, new())
            if kind in _BOUNDARY:
                new = _BOUNDARY[kind]
                yield "boundary", f"{_SYMBOL[kind]} -> {_SYMBOL[new]}", lambda n, _p, j=j, new=new: n.ops.__setitem__(j, new())
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range" and 1 <= len(node.args) <= 3:
        positions = [0] if len(node.args) == 1 else [0, 1]
        for j in positions:
            for delta in (1, -1):
                yield "boundary", f"range argument {j + 1} {delta:+d}", lambda n, _p, j=j, d=delta: _shift_arg(n, j, d)
    elif isinstance(node, (ast.BinOp, ast.AugAssign)):
        kind = type(node.op)
        for new in _ARITH.get(kind, []):
            yield "arithmetic", f"{_SYMBOL[kind]} -> {_SYMBOL[new]}", lambda n, _p, new=new: setattr(n, "op", new())
    elif isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.USub) and not _int_const(node.operand):
            yield "arithmetic", "unary - removed", lambda n, p: _replace_child(p[id(n)], n, n.operand)
        elif isinstance(node.op, ast.Not):
            yield "boolean", "not removed", lambda n, p: _replace_child(p[id(n)], n, n.operand)
    elif isinstance(node, ast.BoolOp):
        new = ast.Or if isinstance(node.op, ast.And) else ast.And
        yield "boolean", f"{_SYMBOL[type(node.op)]} -> {_SYMBOL[new]}", lambda n, _p, new=new: setattr(n, "op", new())
    elif isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            yield "boolean", f"{node.value} -> {not node.value}", lambda n, _p: setattr(n, "value", not n.value)
        elif type(node.value) is int:
            operator = "boundary" if id(node) in protected else "constant"
            for delta in (1, -1):
                yield operator, f"{node.value} -> {node.value + delta}", lambda n, _p, d=delta: setattr(n, "value", n.value + d)
    elif isinstance(node, ast.Return) and node.value is not None and not (
            isinstance(node.value, ast.Constant) and node.value.value is None):
        yield "return", "return value -> None", lambda n, _p: setattr(n, "value", ast.Constant(None))
        if _is_boolean_expr(node.value):
            yield "return", "return value negated", lambda n, _p: setattr(n, "value", ast.UnaryOp(ast.Not(), n.value))


def _shift_arg(call: ast.Call, j: int, delta: int) -> None:
    arg = call.args[j]
    if _int_const(arg):
        call.args[j] = ast.Constant(arg.value + delta)
    else:
        call.args[j] = ast.BinOp(arg, ast.Add() if delta > 0 else ast.Sub(), ast.Constant(abs(delta)))


def _comparison_constants(tree: ast.AST) -> set[int]:
    """Integer constants that are operands of a comparison: their +-1 is a boundary mutation."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                if _int_const(operand):
                    out.add(id(operand))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "range":
            for arg in node.args[:2]:
                if _int_const(arg):
                    out.add(id(arg))  # handled by the range edit; skip as a constant
    return out


def generate_mutants(source: str, max_mutants: int = MAX_MUTANTS, operators: tuple[str, ...] = OPERATORS) -> list[Mutant]:
    """All single-edit mutants of `source` (deterministic order), deduplicated, at most `max_mutants`."""
    # A reference from a dataset file can nest deeper than ast.unparse and copy.deepcopy recurse
    # (`1+1+...+1` 1,500 times): such a program gets no mutants, and no tester step raises.
    try:
        tree = ast.parse(source)
        original = ast.unparse(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    protected = _comparison_constants(tree)
    range_args = {id(a) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                  and n.func.id == "range" for a in n.args[:2] if _int_const(a)}
    nodes = list(ast.walk(tree))
    sites = [(index, node, operator, description, edit) for index, node in enumerate(nodes) if id(node) not in range_args
             for operator, description, edit in _sites(node, protected) if operator in operators]
    if len(sites) > 3 * max_mutants:  # long programs (dataset solutions): bound the tree copies
        step = len(sites) / (3 * max_mutants)
        sites = [sites[int(i * step)] for i in range(3 * max_mutants)]
    seen = {original}
    mutants: list[Mutant] = []
    for index, node, operator, description, edit in sites:
        try:
            clone = copy.deepcopy(tree)
            target = list(ast.walk(clone))[index]
            parents = {id(child): parent for parent in ast.walk(clone) for child in ast.iter_child_nodes(parent)}
            edit(target, parents)
            ast.fix_missing_locations(clone)
            text = ast.unparse(clone)
            compile(text, "main.py", "exec")
        except (SyntaxError, ValueError, TypeError, KeyError, RecursionError, MemoryError):
            continue
        if text in seen:
            continue
        seen.add(text)
        mutants.append(Mutant(operator, getattr(node, "lineno", 0), description, text + "\n"))
    if len(mutants) > max_mutants:
        step = len(mutants) / max_mutants
        mutants = [mutants[int(i * step)] for i in range(max_mutants)]
    return mutants


# ---------------------------------------------------------------------------------------------
# analysis: equivalence filtering and per-input kill sets


@dataclass
class MutationAnalysis:
    """The non-equivalent mutants of one problem, and which of them each input kills (cached)."""

    mutants: list[Mutant]
    generated: int
    """Mutants before equivalence filtering."""
    available: bool
    """False when the reference itself failed on the pool (no trustworthy analysis)."""
    reason: str = ""
    reference_time_s: float = 2.0
    """CPU seconds the reference gets per run."""
    mutant_time_s: float = 1.0
    """The most CPU seconds a mutant gets per run (it gets 10x the reference's time, at least 0.02 s):
    the problem's time limit, so that a mutant killed by timing out is one a program could not be."""
    judging: dict[str, Any] = field(default_factory=dict)
    """How a mutant's output is compared with the reference's: the problem's `Problem.judging` (`outputs_match`)."""
    _kills: dict[str, tuple[str, str, frozenset[int]] | None] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __deepcopy__(self, memo: dict) -> MutationAnalysis:
        return self

    def kills(self, sandbox: Sandbox, reference: str, stdin: str) -> tuple[str, str, frozenset[int]] | None:
        """(reference status, reference stdout, indices of killed mutants) on `stdin`, under the analysis's
        time limits; cached.

        None when the analysis could not be run on this input.
        """
        with self._lock:
            if stdin in self._kills:
                return self._kills[stdin]
        result = _kill_matrix(sandbox, reference, [m.source for m in self.mutants], [stdin], self.reference_time_s,
                              self.mutant_time_s, stop=False, judging=self.judging)
        value = None
        if result is not None:
            (status, out), = result[0]
            killed = frozenset(i for i, row in enumerate(result[1]) if row and row[0] == 1)
            value = (status, out, killed)
        with self._lock:
            self._kills[stdin] = value
        return value

    def planned_kills(self, sandbox: Sandbox, reference: str, stdin: str) -> list[tuple[str, str, SandboxLimits]]:
        """The sandbox runs (code, stdin, limits) that `kills` would make now on `stdin`: none once it is
        cached (a harness that dies is retried mutant by mutant, which is not planned)."""
        with self._lock:
            if stdin in self._kills:
                return []
        return [batch_job(sandbox, [reference, *group], [stdin], reference_timeout=self.reference_time_s,
                          max_timeout=self.mutant_time_s, stop_at_first_kill=False, judging=self.judging)
                for group in _groups(sandbox, [m.source for m in self.mutants])]

    def score(self, killed: set[int] | frozenset[int]) -> float:
        """MutScore: the fraction of (non-equivalent) mutants killed."""
        return len(killed) / len(self.mutants) if self.mutants else 0.0


def _groups(sandbox: Sandbox, mutants: list[str]) -> list[list[str]]:
    """The mutants split into one harness batch per sandbox worker (batches of 8 or more)."""
    chunks = max(1, min(sandbox.n_workers, len(mutants) // 8 or 1))
    size = -(-len(mutants) // chunks) if mutants else 0
    return [mutants[i:i + size] for i in range(0, len(mutants), size)] if mutants else [[]]


def _kill_matrix(sandbox: Sandbox, reference: str, mutants: list[str], inputs: list[str], time_limit_s: float,
                 mutant_time_s: float, stop: bool, output_cap: int = 1 << 20, judging: dict[str, Any] | None = None
                 ) -> tuple[list[tuple[str, str]], list[list[int | None]]] | None:
    """Reference outputs and kill rows, splitting the batch across workers; a batch whose harness
    dies is retried one mutant per process, and a mutant that kills its harness counts as killed."""
    groups = _groups(sandbox, mutants)

    def batch(group: list[str]):
        return run_batch(sandbox, [reference, *group], inputs, reference_timeout=time_limit_s, max_timeout=mutant_time_s,
                         stop_at_first_kill=stop, output_cap=output_cap, judging=judging)

    if len(groups) == 1:
        results = [batch(groups[0])]
    else:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(len(groups)) as pool:
            results = list(pool.map(batch, groups))
    reference_runs: list[tuple[str, str]] | None = None
    rows: list[list[int | None]] = []
    for group, result in zip(groups, results):
        if result is None:
            if not group:
                return None
            for mutant in group:
                single = batch([mutant])
                if single is None:
                    rows.append([1] * len(inputs))  # the mutant crashed its process: detected
                else:
                    reference_runs = reference_runs or single.reference
                    rows.append(single.killed[0])
            continue
        reference_runs = reference_runs or result.reference
        rows.extend(result.killed)
    if reference_runs is None:
        return None
    return reference_runs, rows


def analyse(sandbox: Sandbox, reference: str, pool: list[tuple[str, str | None]], time_limit_s: float,
            max_mutants: int = MAX_MUTANTS, mutant_time_s: float = 1.0,
            judging: dict[str, Any] | None = None) -> MutationAnalysis:
    """Generate mutants and keep those that some pool input kills.

    `pool`: (input, expected output or None). With expected outputs (dataset tests), the reference
    must reproduce them, else the analysis is marked unavailable. `time_limit_s`: the reference's CPU
    seconds per run; `mutant_time_s`: a mutant's most (`MutationAnalysis.mutant_time_s`); `judging`: how outputs
    are compared, the expected ones and a mutant's with the reference's (the problem's `Problem.judging`: letters in
    any case, its real tolerance; `runner.outputs_match`).
    """
    judging = dict(judging or {})
    times = {"reference_time_s": time_limit_s, "mutant_time_s": mutant_time_s, "judging": judging}
    candidates = generate_mutants(reference, max_mutants)
    inputs = [stdin for stdin, _ in pool]
    # Room for the dataset's longest expected output, as the coder's program gets.
    result = _kill_matrix(sandbox, reference, [m.source for m in candidates], inputs, time_limit_s, mutant_time_s, stop=True,
                          output_cap=output_room(1 << 20, (expected for _, expected in pool if expected)), judging=judging)
    if result is None:
        return MutationAnalysis([], len(candidates), False, "the reference solution could not be run", **times)
    reference_runs, rows = result
    for (status, out), (stdin, expected) in zip(reference_runs, pool):
        if status != "ok":
            return MutationAnalysis([], len(candidates), False, f"the reference solution failed ({status}) on a pool input",
                                    **times)
        if expected is not None and not outputs_match(out, expected, **judging):
            return MutationAnalysis([], len(candidates), False, "the reference solution does not reproduce the dataset's tests",
                                    **times)
    kept = [m for m, row in zip(candidates, rows) if any(v == 1 for v in row)]
    return MutationAnalysis(kept, len(candidates), bool(kept), "" if kept else "no mutant is distinguishable on the pool",
                            **times)
