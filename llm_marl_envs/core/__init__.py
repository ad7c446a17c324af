"""The environment core: text spaces, the AEC base class, splits, rewards, parsers, workflows."""

from .base import Play, TextAECEnv, fork
from .instances import SPLITS, draw_instance, instance_hash, split_of
from .rewards import RewardBreakdown
from .spaces import MessagesSpace, TextSpace
from .tool_planner import Applied, ToolPlannerEnv, ToolRun, TurnContext, TurnRecord, history_text, tool_run_text

__all__ = [
    "SPLITS", "Applied", "MessagesSpace", "Play", "RewardBreakdown", "TextAECEnv", "TextSpace", "ToolPlannerEnv",
    "ToolRun", "TurnContext", "TurnRecord", "draw_instance", "fork", "history_text", "instance_hash", "split_of",
    "tool_run_text",
]
