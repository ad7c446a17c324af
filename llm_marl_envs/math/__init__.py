"""Math (AT-GRPO): a reasoner and a Python tool agent; seeded problem generators, dataset loaders
and the Math-Verify + NumEq answer checker. The environment is `llm_marl_envs.math_v2`."""
