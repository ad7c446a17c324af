"""Programs compiled by the owner (owner side): the child runs the code object instead of compiling
the program itself.

A forked child compiles slowly (every page the compiler writes is a copy of one of the fork
server's), and the environments compile every program in the owner anyway, to check it before they
spend a process on it (`core.text.compile_error`). The owner's compile must give the child exactly
what its own would and print nothing, so a program is compiled here only when it is short (this
compile is outside the program's limits), compiles, and has none of the constructs for which Python
warns while compiling: the child prints those SyntaxWarnings to the program's stderr, where they
must stay. The check is conservative: a program that might warn is compiled by the child, as before.
The check and the compile cost the owner more than they save one child, so only a program that
runs again is compiled here (`owner_compiled` asks `seen_before`): a program the code environment
runs on every test, or the same tool program in every branch of a rollout. Which constructs warn
changes between Python versions (3.12 warns of invalid escape sequences, for one): the check is the
one of Python 3.11, and on any other version every program is compiled by the child.
"""

from __future__ import annotations

import ast
import binascii
import marshal
import re
import sys
import threading
from collections import OrderedDict
from functools import lru_cache

SUPPORTED = sys.version_info[:2] == (3, 11)
"""The Python whose compile-time warnings `_may_warn` and `_NUMBER_THEN_KEYWORD` cover."""
MAX_CHARS = 16_384
"""Longer programs are compiled by the child, under the program's limits."""

_NUMBER_THEN_KEYWORD = re.compile(r"\d[\w.]*?(?:and|else|for|if|in|is|not|or)")
"""The tokenizer warns of a number followed at once by a keyword ("invalid decimal literal"): here,
any digit followed within a word by one (a superset, checked before anything is parsed)."""
_SEEN: OrderedDict[int, None] = OrderedDict()
"""Hashes of the programs asked about lately (a collision only compiles a program here once early)."""
_SEEN_MAX = 4096
_SEEN_LOCK = threading.Lock()
_PLAIN = (ast.Name, ast.Attribute, ast.Call, ast.Subscript)
"""Expressions the compiler never folds into a constant nor warns of as callers or subscripted."""


def seen_before(source: str) -> bool:
    """Whether this program was asked about before (of the last `_SEEN_MAX` ones); counts this time."""
    key = hash(source)
    with _SEEN_LOCK:
        if key in _SEEN:
            _SEEN.move_to_end(key)
            return True
        _SEEN[key] = None
        if len(_SEEN) > _SEEN_MAX:
            _SEEN.popitem(last=False)
        return False


def owner_compiled(source: str) -> str | None:
    """What a job carries for the child: `precompiled(source)` for a program that runs again on this
    Python; None (the child compiles it) for a first run, a long program or another Python, which
    are not counted as seen."""
    if not SUPPORTED or len(source) > MAX_CHARS or not seen_before(source):
        return None
    return precompiled(source)


@lru_cache(maxsize=256)
def precompiled(source: str) -> str | None:
    """`compile(source, "main.py", "exec", dont_inherit=True)` as the child would make it, as
    marshal data in base64; None where the child must compile the program itself."""
    if not SUPPORTED or len(source) > MAX_CHARS or _NUMBER_THEN_KEYWORD.search(source):
        return None
    try:
        tree = compile(source, "main.py", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        if _may_warn(tree):
            return None
        code = compile(tree, "main.py", "exec", dont_inherit=True, optimize=0)
    except Exception:  # noqa: BLE001 (the child compiles it and reports the error as the interpreter would)
        return None
    return binascii.b2a_base64(marshal.dumps(code), newline=False).decode("ascii")


def _may_warn(tree: ast.AST) -> bool:
    """Whether compiling `tree` might warn: `is` with an operand that is or folds into a literal,
    an assert of a tuple, a call or subscript of anything but a name, attribute, call or subscript
    (the compiler's "is" with a literal, "assertion is always true", "not callable", "not
    subscriptable" and "indices must be integers" warnings, each checked more widely than it warns)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            if any(isinstance(op, (ast.Is, ast.IsNot)) for op in node.ops) \
                    and not all(map(_plain_operand, (node.left, *node.comparators))):
                return True
        elif isinstance(node, ast.Assert):
            if isinstance(node.test, (ast.Tuple, ast.Constant)):
                return True
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, _PLAIN):
                return True
        elif isinstance(node, ast.Subscript):
            if not isinstance(node.value, _PLAIN):
                return True
    return False


def _plain_operand(node: ast.expr) -> bool:
    """A name, attribute, call, a subscript of one, or None, True, False, `...`: never a literal."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Constant):
        return any(node.value is singleton for singleton in (None, True, False, ...))
    return isinstance(node, (ast.Name, ast.Attribute, ast.Call))
