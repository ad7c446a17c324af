"""Deep search v3. See `llm_marl_envs.deep_search.env` for the full documentation."""

from .core.wrappers import make_env_fn
from .deep_search.env import __doc__ as _doc
from .deep_search.env import raw_env

__doc__ = _doc
env = make_env_fn(raw_env)

__all__ = ["env", "raw_env"]
