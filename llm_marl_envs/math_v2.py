"""Math v2. See `llm_marl_envs.math.env` for the full documentation."""

from .core.wrappers import make_env_fn, make_parallel_env_fn
from .math.env import __doc__ as _doc
from .math.env import raw_env

__doc__ = _doc
env = make_env_fn(raw_env)
parallel_env = make_parallel_env_fn(env)

__all__ = ["env", "parallel_env", "raw_env"]
