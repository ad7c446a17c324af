"""Deep search (MATPO / SHARP): planner + workers with search tools over MCP. See `env.py`."""
