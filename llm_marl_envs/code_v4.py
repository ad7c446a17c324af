"""Code v4 (coder + tester). See `llm_marl_envs.code.env` for the full documentation."""

from .code.env import __doc__ as _doc
from .code.env import raw_env
from .core.wrappers import make_env_fn

__doc__ = _doc
env = make_env_fn(raw_env)

__all__ = ["env", "raw_env"]
