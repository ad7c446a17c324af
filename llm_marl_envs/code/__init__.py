"""Coder-tester code generation (AT-GRPO): a problem bank, dataset loaders, a sandboxed test runner,
mutation analysis, prompts and parsers, and the environment (`env.raw_env`)."""
