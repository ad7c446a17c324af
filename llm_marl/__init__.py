"""llm-marl: multi-agent RL trainers (AT-GRPO, MATPO, MHGPO, SHARP) with LoRA policies.

Kept import-light on purpose: `llm_marl_envs` users and the CLI's `--help` must not pay for torch
or transformers. Import the parts you need (`llm_marl.models`, `llm_marl.policies`,
`llm_marl.engines`).
"""

__version__ = "0.1.0"
