"""MASS v4. See `llm_marl_envs.mass.env` for the full documentation."""

from .core.wrappers import make_env_fn
from .mass.env import __doc__ as _doc
from .mass.env import raw_env

__doc__ = _doc
env = make_env_fn(raw_env)

__all__ = ["env", "raw_env"]
