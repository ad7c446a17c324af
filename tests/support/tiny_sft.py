"""A tiny model that knows the answer format: tiny-random fine-tuned briefly on oracle replies.

tiny-random writes noise, so every reply earns the same (zero) reward and RL has nothing to learn
from. A few hundred supervised steps on the Plan-Path oracle's planner replies give a model whose
sampled replies are sometimes right and sometimes wrong: groups with reward variance, which the
training tests need to show that adapters really move and that a resumed run equals an
uninterrupted one.
"""

from __future__ import annotations

from pathlib import Path

import torch

# A small Plan-Path configuration: prompts stay short and the model can learn the format quickly.
ENV_ARGS = {"height": 3, "width": 3, "wall_density": 0.1, "min_path_length": 2, "max_path_length": 3, "max_turns": 1}
VERSION = 2


def oracle_pairs(n: int) -> list[tuple[list[dict[str, str]], str]]:
    """(chat, reply) pairs of both roles: the planner's `#### [...]` answer (alone and after the
    tool) and a short tool program printing the BFS path (the oracle's search program is too long
    for a tiny model)."""
    import llm_marl_envs
    from agents.oracle import make_oracle
    from agents.oracle.plan_path import bfs, parse_grid
    from agents.base import last_user_text

    oracle = make_oracle("plan_path")
    pairs = []
    for mode in ("planner", "mas"):
        env = llm_marl_envs.plan_path_v2.raw_env(mode=mode, **ENV_ARGS)
        for seed in range(n):
            env.reset(seed=seed)
            if mode == "mas":
                observation = env.observe("tool")
                path = bfs(parse_grid(last_user_text(observation)))
                program = "```python\nprint('[" + ", ".join(path) + "]')\n```"
                # Three times: the tool's format is the rarer one to learn.
                pairs += [(observation["messages"], program)] * 3
                env.step(program)
            observation = env.observe("planner")
            pairs.append((observation["messages"], oracle.act("planner", observation)))
    return pairs


def tiny_planner() -> Path:
    """The fine-tuned tiny model, built once per machine into the model cache (`LLM_MARL_CACHE`)."""
    from llm_marl.models.cache import cached_build

    return cached_build(f"tiny-plan-path-sft-v{VERSION}", build_tiny_planner)


def build_tiny_planner(dest: Path, steps: int = 300, batch: int = 8, seed: int = 0) -> Path:
    """Fine-tune tiny-random on oracle replies of both roles (loss on reply tokens only); save to `dest`."""
    from llm_marl.models import load_model_and_tokenizer, resolve_model

    if (dest / "config.json").exists():
        return dest
    torch.manual_seed(seed)
    model, tokenizer = load_model_and_tokenizer(resolve_model("tiny-random"))
    model.train()
    examples = []
    for messages, reply in oracle_pairs(32):
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
        prompt = list(prompt["input_ids"]) if isinstance(prompt, dict) or hasattr(prompt, "keys") else list(prompt)
        answer = tokenizer(reply + "<|im_end|>", add_special_tokens=False)["input_ids"]
        examples.append((prompt, answer))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    generator = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        idx = torch.randint(len(examples), (batch,), generator=generator).tolist()
        rows = [examples[i][0] + examples[i][1] for i in idx]
        width = max(map(len, rows))
        ids = torch.full((batch, width), tokenizer.pad_token_id, dtype=torch.long)
        labels = torch.full((batch, width), -100, dtype=torch.long)
        attention = torch.zeros((batch, width), dtype=torch.long)
        for b, i in enumerate(idx):
            prompt, answer = examples[i]
            ids[b, : len(rows[b])] = torch.tensor(rows[b])
            labels[b, len(prompt): len(rows[b])] = torch.tensor(answer)
            attention[b, : len(rows[b])] = 1
        loss = model(input_ids=ids, attention_mask=attention, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval()
    model.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    return dest
