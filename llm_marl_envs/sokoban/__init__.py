"""Sokoban (AT-GRPO): tool agent + planner pushing boxes onto goals."""
