"""Plan-Path v2. See `llm_marl_envs.plan_path.env` for the full documentation."""

from .core.wrappers import make_env_fn
from .plan_path.env import __doc__ as _doc
from .plan_path.env import raw_env

__doc__ = _doc
env = make_env_fn(raw_env)

__all__ = ["env", "raw_env"]
