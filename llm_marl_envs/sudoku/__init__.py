"""Sudoku (AT-GRPO): tool agent + planner on an N x N grid with a unique solution."""
