"""Plan-Path (AT-GRPO): tool agent + planner on a grid with walls."""
