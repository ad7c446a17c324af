"""`fast_init`: a cheaper constructor for the frozen records that an environment step or an
instance generator makes.

A frozen dataclass's generated `__init__` sets each field through `object.__setattr__` (its own
`__setattr__` refuses), a call per field; a Sudoku turn builds four such records (the parsed answer,
what applying it did, the reward breakdown, the turn's record) and a Plan-Path candidate two (its
grid and the instance). `fast_init` gives the class an `__init__` with the same signature that fills
the instance's `__dict__` directly. The records stay frozen (assigning a field still raises), and
equality, hashing and repr are unchanged.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import TypeVar

T = TypeVar("T")


class _Factory:
    """Default of a field with a `default_factory`: the factory is called when the caller gives none."""

    def __repr__(self) -> str:
        return "<factory>"  # as the generated signature shows it


_FACTORY = _Factory()


def fast_init(cls: type[T]) -> type[T]:
    """Replace the generated `__init__` of the frozen dataclass `cls` (apply above `@dataclass`)."""
    params = dataclasses.fields(cls)
    if not cls.__dataclass_params__.frozen or "__slots__" in cls.__dict__:
        raise TypeError(f"fast_init is for frozen dataclasses with a __dict__, not {cls.__name__}")
    generated = inspect.signature(cls.__init__).parameters.values()
    if ([p.name for p in generated] != ["self", *(f.name for f in params)]
            or any(p.kind is not p.POSITIONAL_OR_KEYWORD for p in generated)):
        # Keyword-only, InitVar and init=False fields change the signature: not needed so far.
        raise TypeError(f"fast_init handles positional-or-keyword fields only, not {cls.__name__}'s")
    if {"self", "_dict"} & {f.name for f in params}:
        raise TypeError(f"fast_init cannot name a field 'self' or '_dict' ({cls.__name__})")
    names = {"_FACTORY": _FACTORY}
    signature, body = [], ["_dict = self.__dict__"]
    for f in params:
        if f.default is not dataclasses.MISSING:
            names[f"_default_{f.name}"] = f.default
            signature.append(f"{f.name}=_default_{f.name}")
            body.append(f"_dict[{f.name!r}] = {f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            names[f"_factory_{f.name}"] = f.default_factory
            signature.append(f"{f.name}=_FACTORY")
            body.append(f"_dict[{f.name!r}] = _factory_{f.name}() if {f.name} is _FACTORY else {f.name}")
        else:
            signature.append(f.name)
            body.append(f"_dict[{f.name!r}] = {f.name}")
    if hasattr(cls, "__post_init__"):
        body.append("self.__post_init__()")
    source = f"def __init__(self, {', '.join(signature)}):\n    " + "\n    ".join(body)
    exec(source, names)  # as dataclasses builds the __init__ it replaces
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    cls.__init__ = init
    return cls
