"""llm_marl_envs: multi-agent LLM environments with the PettingZoo AEC interface.

    import llm_marl_envs
    env = llm_marl_envs.plan_path_v2.env()
    env.reset(seed=0)

Environment modules load on first access; importing this package registers every environment with
PettingZoo (`pettingzoo.make("aec", "llm_marl/PlanPath-v2")`). No torch or LLM is imported here.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from typing import Any

from . import registry
from .registry import ENVS, make

__all__ = ["ENVS", "make", "registry", *(e.module for e in ENVS.values())]

_MODULES = {e.module for e in ENVS.values()}


def __getattr__(name: str) -> Any:
    if name in _MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    entry = registry.replacement(name)
    if entry is not None:
        # Code written against an older version keeps running, on the current version, and is told so.
        warnings.warn(f"llm_marl_envs.{name} was replaced by llm_marl_envs.{entry.module} and now returns it; "
                      f"what changed is in its Version History (help(llm_marl_envs.{entry.module}))", FutureWarning, stacklevel=2)
        return importlib.import_module(f"{__name__}.{entry.module}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _OlderVersions(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`import llm_marl_envs.sokoban_v0` as `llm_marl_envs.sokoban_v0` above: the current version's module, with
    the warning (an older version's module file does not ship)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        package, _, name = fullname.rpartition(".")
        if package != __name__ or registry.replacement(name) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> Any:
        module = __getattr__(spec.name.rpartition(".")[2])
        spec.loader_state = module.__spec__  # the import system sets __spec__ to the old name's: put back in exec_module
        return module

    def exec_module(self, module: Any) -> None:
        module.__spec__ = module.__spec__.loader_state  # loaded already: only its own spec again


sys.meta_path.append(_OlderVersions())
registry.register_all()
