"""Supervised fine-tuning of the LoRA adapters on chat transcripts: the warm start before RL.

    llm-marl sft --env plan_path                                  # oracle demonstrations, then SFT
    llm-marl sft --env plan_path --data transcripts.jsonl         # your own transcripts
    llm-marl train --algo at-grpo --env plan_path --init-adapters runs/<sft run>

A transcript is one JSON object per line in TRL's conversational format, `{"messages": [{"role":
"system", ...}, {"role": "user", ...}, {"role": "assistant", "content": "..."}], "agent": "planner"}`:
every assistant message is a target (unless it has `"weight": 0`, as in OpenAI's fine-tuning format: the
role's earlier replies in the prompt of a later one), given the messages before it (the loss covers only the
assistant's tokens, up to and including the end-of-turn token, so the model also learns to stop).
`agent` names the role that replied; σ (`--policy`, as in `train`) routes the example to that role's
adapter. Without `agent`, examples go to the shared adapter.

`llm-marl sft --env ENV` first writes such transcripts from the environment's scripted oracle
(`agents.demonstrations`), `--demos` episodes of the train split, into the run directory. Keep the
budget small: the point is a policy that knows the answer format and is sometimes right, so that RL
has reward variance to learn from and something left to add.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from llm_marl.config import check_at_least, opt


@dataclass
class SFTConfig:
    """`llm-marl sft` settings (the model, σ and LoRA shape come from `ModelConfig`, as in `train`)."""

    env: str = opt("plan_path", "environment whose roles (and oracle demonstrations) to train (see `llm-marl envs`)")
    env_args: dict = opt({}, "environment option KEY=VALUE (repeatable); unset (or only mode): the quick configuration `train` uses", flag="--env-arg")
    demos: int = opt(32, "oracle episodes of the train split to learn from (instances seed..seed+demos-1); each reply is one example")
    oracle_args: dict = opt({}, "option of the environment's oracle KEY=VALUE (repeatable), e.g. program=answer (Plan-Path, Sokoban: the tool prints the moves it found)", flag="--oracle-arg")
    demo_noise: float = opt(0.0, "probability that a demonstration reply is a random agent's instead (not learned from): the oracle then shows how to recover from a teammate's mistakes")
    data: str = opt("", "chat transcripts to learn from instead of oracle demonstrations: a JSONL file (or a JSON list, "
                        "parquet, a save_to_disk folder, a Hub id)")
    heldout_demos: int = opt(8, "oracle episodes of the val split whose replies measure the held-out NLL before and after (0 = none)")
    epochs: int = opt(2, "passes over the examples")
    lr: float = opt(1e-3, "AdamW learning rate of each adapter")
    batch_size: int = opt(8, "examples per optimiser step")
    micro_batch_size: int = opt(2, "examples per forward and backward pass; their gradients add up to one --batch-size step (the same step, less memory: 8 rows of a 600-token prompt at once took 14 GB)")
    gradient_checkpointing: bool = opt(False, "recompute each decoder layer's activations, and the LM head's logits, in the backward "
                                              "pass instead of keeping them (less memory for long examples, more time; the same steps)")
    max_length: int = opt(4096, "longest example (prompt + reply), in tokens; longer ones are skipped and counted")
    seed: int = opt(0, "seed of the example order")
    out_dir: str = opt("runs", "root folder of run directories")
    run_name: str = opt("", "run directory name (default <env>__sft__<seed>__<time>, then -2, -3, ... where runs start in the same second)")
    threads: int = opt(0, "torch CPU threads; 0 = one per available CPU")

    def __post_init__(self) -> None:
        if self.demos < 1 and not self.data:
            raise ValueError(f"--demos must be >= 1 (or pass --data), got {self.demos}")
        if not 0.0 <= self.demo_noise < 1.0:
            raise ValueError(f"--demo-noise must be in [0, 1), got {self.demo_noise}")
        check_at_least(("--epochs", self.epochs, 1), ("--batch-size", self.batch_size, 1),
                       ("--micro-batch-size", self.micro_batch_size, 1), ("--heldout-demos", self.heldout_demos, 0))
        if not 0 < self.lr < math.inf:
            raise ValueError(f"--lr must be > 0 and finite, got {self.lr}")
        if self.seed < 0:
            raise ValueError(f"--seed must be >= 0, got {self.seed}")


@dataclass(frozen=True)
class Example:
    """One target reply: the prompt the role saw (chat template applied) and the reply's tokens."""

    adapter: str
    role: str | None
    prompt_ids: list[int]
    target_ids: list[int]


# ---------------------------------------------------------------------------- transcripts
def check_demo_splits(env: str, env_kwargs: dict[str, Any], config: SFTConfig) -> None:
    """Refuse, before any episode, a split the oracle's demonstrations are played on that has no problems (a dataset
    with no rows in it, options that generate none): `evaluate.episode_tasks`' check, which `train` makes of its
    held-out episodes. Without it each episode failed on its own, and the error listed them all."""
    from llm_marl.evaluate import check_split_problems
    from llm_marl_envs.registry import make_raw

    make_raw(env, **env_kwargs)  # an option error is its own, without the advice below
    for split, flag, played, fix in (("train", "--demos", not config.data, "transcripts of your own with --data"),
                                     ("val", "--heldout-demos", config.heldout_demos > 0, "--heldout-demos 0")):
        if played:
            check_split_problems(env, split, config.seed, env_kwargs, f", or pass {fix} (sft plays its {flag} episodes on the {split} split)")


def read_transcripts(path: str | Path) -> list[dict[str, Any]]:
    """Transcripts from a JSONL file, or any source the dataset loaders read (`llm_marl_envs.core.rows`: a JSON
    list, parquet, a `save_to_disk` folder, a Hub id); a malformed record is a ValueError naming its line or row."""
    from llm_marl_envs.core.rows import DatasetNotFound, read_rows

    try:
        rows = read_rows(path)
    except DatasetNotFound:
        raise ValueError(f"--data {path}: no such file; pass a JSONL file of chat transcripts") from None
    records = []
    for where, record in rows:
        check_transcript(record, where)
        records.append(record)
    if not records:
        raise ValueError(f"{path} holds no transcripts")
    return records


def check_transcript(record: Any, where: str) -> None:
    messages = record.get("messages") if isinstance(record, dict) else None
    if not isinstance(messages, list) or not messages:
        raise ValueError(f'{where}: expected {{"messages": [{{"role": ..., "content": ...}}, ...], "agent": ...}}')
    for message in messages:
        if not (isinstance(message, dict) and isinstance(message.get("role"), str) and isinstance(message.get("content"), str)):
            raise ValueError(f"{where}: every message needs a string 'role' and 'content', got {message!r:.80}")
    if any(m.get("weight", 1) not in (0, 1) or isinstance(m.get("weight"), bool) for m in messages):
        raise ValueError(f"{where}: a message's 'weight' must be 0 (not a target) or 1 (a target, the default)")
    if not any(is_target(m) for m in messages):
        weighed = any(m["role"] == "assistant" for m in messages)
        raise ValueError(f"{where}: no assistant message to learn from{' (every one has weight 0)' if weighed else ''}")
    if messages[0]["role"] == "assistant":  # its prompt would be an empty chat, which no chat template renders
        raise ValueError(f"{where}: the first message is an assistant reply, with no prompt before it; begin with the system "
                         "or user message it answers")
    if "agent" in record and not isinstance(record["agent"], str):
        raise ValueError(f"{where}: 'agent' must be a role name")


def is_target(message: dict[str, Any]) -> bool:
    """An assistant message not marked `"weight": 0` (an earlier reply kept in a later prompt)."""
    return message["role"] == "assistant" and message.get("weight", 1) != 0


def reply_tokens(tokenizer: Any, messages: list[dict[str, str]], thinking: bool = False) -> tuple[list[int], list[int]]:
    """(prompt ids, target ids) of the last message, an assistant reply, after `messages[:-1]`.

    The prompt is tokenized exactly as the engines tokenize it (`chat_prompt_ids`); the target is
    what the chat template writes for the reply, up to and including the end-of-sequence token.
    """
    from llm_marl.engines.hf import chat_prompt_ids

    prompt_ids = chat_prompt_ids(tokenizer, messages[:-1], thinking)
    prompt = tokenizer.apply_chat_template(messages[:-1], add_generation_prompt=True, tokenize=False, enable_thinking=thinking)
    full = tokenizer.apply_chat_template(messages, tokenize=False, enable_thinking=thinking)
    if not full.startswith(prompt):
        raise ValueError("the chat template renders a conversation differently from its prefix; "
                         "this tokenizer's template cannot be used for SFT targets")
    target = full[len(prompt):]
    eos = tokenizer.eos_token or ""
    if eos and eos in target:
        target = target[: target.index(eos) + len(eos)]  # the end-of-turn token, not the template's newline after it
    return prompt_ids, list(tokenizer(target, add_special_tokens=False)["input_ids"])


def build_examples(policy: Any, transcripts: Iterable[dict[str, Any]], max_length: int = 4096) -> tuple[list[Example], int]:
    """Examples for `policy` (one per assistant message), routed by σ; returns (examples, skipped for length)."""
    examples, skipped = [], 0
    for record in transcripts:
        role = record.get("agent")
        if role is None and policy.default_adapter is None:
            raise ValueError("a transcript has no 'agent' and this --policy has no shared adapter: add \"agent\": <role> "
                             "to each transcript, or use --policy shared")
        adapter = policy.adapter_for(role) if role is not None else policy.default_adapter
        # The chat the role saw, without the weights (the chat template renders what the engines render).
        messages = [{k: v for k, v in m.items() if k != "weight"} for m in record["messages"]]
        for end, message in enumerate(record["messages"]):
            if not is_target(message):
                continue
            prompt_ids, target_ids = reply_tokens(policy.tokenizer, messages[: end + 1], policy.thinks(role))
            if len(prompt_ids) + len(target_ids) > max_length:
                skipped += 1
                continue
            examples.append(Example(adapter, role, prompt_ids, target_ids))
    if not examples:
        raise ValueError(f"no example fits --max-length {max_length}" if skipped else "no assistant reply to learn from")
    return examples, skipped


# ---------------------------------------------------------------------------- training
def mean_nll(policy: Any, examples: Sequence[Example], batch_size: int = 8) -> float:
    """Mean negative log-likelihood per target token (temperature 1), adapters as routed."""
    total, tokens = 0.0, 0
    for adapter, batch in _by_adapter(examples).items():
        for start in range(0, len(batch), batch_size):
            chunk = batch[start:start + batch_size]
            lp = policy.response_logprobs([e.prompt_ids for e in chunk], [e.target_ids for e in chunk], adapter, 1.0)
            total -= float(lp.sum())
            tokens += sum(len(e.target_ids) for e in chunk)
    return total / max(tokens, 1)


def _by_adapter(examples: Sequence[Example]) -> dict[str, list[Example]]:
    out: dict[str, list[Example]] = {}
    for e in examples:
        out.setdefault(e.adapter, []).append(e)
    return out


def supervised_finetune(policy: Any, examples: Sequence[Example], *, epochs: int = 2, lr: float = 1e-3, batch_size: int = 8,
                        micro_batch_size: int = 2, weight_decay: float = 0.0, grad_clip: float = 1.0, seed: int = 0,
                        gradient_checkpointing: bool = False, on_step: Callable[[dict[str, float]], None] | None = None) -> dict[str, int]:
    """Minimise the token-mean NLL of each adapter's targets: one AdamW per adapter, `epochs` shuffled
    passes in minibatches of `batch_size` examples, each run `micro_batch_size` examples at a time with
    the gradients accumulated (and each layer's activations recomputed in the backward pass with
    `gradient_checkpointing`); a minibatch whose gradient is not finite takes no step. Returns the
    optimiser steps per adapter."""
    from llm_marl.update import clipped_step

    if epochs < 1 or batch_size < 1 or lr <= 0:
        raise ValueError(f"SFT needs epochs >= 1, batch size >= 1 and lr > 0 (got {epochs}, {batch_size}, {lr})")
    rng = np.random.default_rng(seed)
    steps: dict[str, int] = {}
    plan = []  # (adapter, minibatch) in a seeded order that interleaves adapters
    for epoch in range(epochs):
        for adapter, batch in sorted(_by_adapter(examples).items()):
            order = rng.permutation(len(batch))
            plan += [(epoch, adapter, [batch[i] for i in order[s:s + batch_size]]) for s in range(0, len(batch), batch_size)]
    plan = [plan[i] for i in rng.permutation(len(plan))] if len({a for _, a, _ in plan}) > 1 else plan
    optimizers = {a: torch.optim.AdamW(policy.trainable_parameters(a), lr=lr, weight_decay=weight_decay)
                  for a in _by_adapter(examples)}
    policy.model.train()
    for index, (epoch, adapter, batch) in enumerate(plan, 1):
        t0 = time.perf_counter()
        tokens = sum(len(e.target_ids) for e in batch)
        optimizers[adapter].zero_grad(set_to_none=True)
        loss = 0.0
        for start in range(0, len(batch), micro_batch_size):
            micro = batch[start:start + micro_batch_size]
            with policy.checkpointing(gradient_checkpointing):
                lp = policy.response_logprobs([e.prompt_ids for e in micro], [e.target_ids for e in micro], adapter, 1.0, grad=True)
            part = -lp.sum() / tokens  # normalised by the whole minibatch's tokens, so the parts add up to its mean
            part.backward()
            loss += float(part.detach())
        grad_norm = clipped_step(optimizers[adapter], policy.trainable_parameters(adapter), grad_clip)
        if grad_norm is not None:
            steps[adapter] = steps.get(adapter, 0) + 1
        if on_step is not None:
            on_step({"step": index, "of": len(plan), "epoch": epoch + 1, "adapter": adapter, "loss": loss,
                     "grad_norm": grad_norm, "skipped_nonfinite": grad_norm is None, "tokens": tokens,
                     "seconds": time.perf_counter() - t0})
    policy.model.eval()
    return steps


def perplexity(nll: float) -> float:
    return math.exp(min(nll, 50.0))


# ---------------------------------------------------------------------------- a run
def run_sft(config: SFTConfig, model: Any, transcripts: list[dict[str, Any]], heldout: Sequence[dict[str, Any]] = (),
            log: Callable[[str], None] = print, demo_episodes: dict[str, dict[str, Any]] | None = None) -> Any:
    """Fine-tune a fresh policy set (`model`: a `ModelConfig`) on `transcripts`; write a run directory
    with `config.json`, `versions.json`, `transcripts.jsonl`, `metrics.jsonl` (one line per optimiser step),
    `adapters/` and `summary.json` (NLL per token on the training and held-out replies, before and after, and
    `demo_episodes`, when given: per split, the oracle episodes played and those left out of the transcripts)."""
    from llm_marl.config import quick_env_args
    from llm_marl.models import resolve_device, resolve_model
    from llm_marl.policies import LoRAConfig, PolicySet, parse_policy, parse_thinking, warm_start_sources
    from llm_marl.provenance import record, versions
    from llm_marl.runs import RunDir, RunDirError, out_of_space
    from llm_marl.threads import set_threads
    from llm_marl_envs.registry import get as get_env
    from llm_marl_envs.registry import make_raw

    set_threads(config.threads)
    env_kwargs = quick_env_args(config.env, config.env_args)
    roles = list(make_raw(config.env, **env_kwargs).possible_agents)
    # An agent that is no role of --env has no adapter σ could route it to (a shared one would take it in silence).
    strangers = sorted({t["agent"] for t in transcripts if t.get("agent") is not None} - set(roles))
    if strangers:
        raise ValueError(f"transcripts name agents {strangers}, which {config.env} does not have (its roles: {', '.join(roles)}): "
                         "correct their \"agent\", or pass the --env whose roles replied")
    thinking = parse_thinking(model.thinking, model.thinking_roles, roles)
    lora = LoRAConfig(r=model.lora_r, alpha=model.lora_alpha, dropout=model.lora_dropout)
    if model.init_adapters:  # a folder that cannot start these adapters is refused before the model loads
        warm_start_sources(model.init_adapters, parse_policy(model.policy, roles), lora, resolve_model(model.model))
    device = resolve_device(model.device)
    policy = PolicySet.from_pretrained(model.model, roles=roles, policy=model.policy, lora=lora, seed=config.seed, device=device,
                                       dtype=model.dtype, thinking=thinking)
    if config.gradient_checkpointing:
        policy.checkpoint_layers()  # a model transformers cannot checkpoint is refused before the run directory exists
    if model.init_adapters:
        policy.init_from(model.init_adapters)
    examples, skipped = build_examples(policy, transcripts, config.max_length)
    heldout_examples = build_examples(policy, heldout, config.max_length)[0] if heldout else []
    # Named by the environment's name, also when --env gave its module or PettingZoo id (which holds a '/').
    run = RunDir.create(config.out_dir, get_env(config.env).name, "sft", config.seed, name=config.run_name or None, resumable=False)
    try:  # Ctrl-C, SIGTERM or a failure: SFT cannot resume, so a half-trained run is of no use
        run.save_config({"sft": dataclasses.asdict(config), "model": dataclasses.asdict(model), "resolved_env_args": env_kwargs})
        record(run.path, versions(get_env(config.env).module, str(policy.device)), log)
        (run.path / "transcripts.jsonl").write_text("".join(json.dumps(t) + "\n" for t in transcripts))
        before = {"train_nll": mean_nll(policy, examples),
                  **({"heldout_nll": mean_nll(policy, heldout_examples)} if heldout_examples else {})}
        played = (demo_episodes or {}).get("train")
        origin = f" from {played['episodes'] - played['left_out']} of {played['episodes']} oracle episodes" if played else ""
        log(f"sft: {len(examples)} examples{origin} ({skipped} skipped for length) for adapters "
            f"{sorted({e.adapter for e in examples})}; NLL/token before {before['train_nll']:.3f}; run directory {run.path}")
        t0 = time.perf_counter()

        def on_step(m: dict[str, float]) -> None:
            run.log_metrics(int(m["step"]), {f"sft/{k}": v for k, v in m.items() if k != "step"})
            if m["skipped_nonfinite"]:
                log(f"sft step {m['step']}/{m['of']}: skipped, the gradient was not finite (NaN or inf); the weights were kept. "
                    "Lower --lr")
            elif m["step"] == m["of"] or m["step"] % 10 == 0:
                log(f"sft step {m['step']}/{m['of']} (epoch {m['epoch']}): loss {m['loss']:.3f}")

        steps = supervised_finetune(policy, examples, epochs=config.epochs, lr=config.lr, batch_size=config.batch_size,
                                    micro_batch_size=config.micro_batch_size, seed=config.seed,
                                    gradient_checkpointing=config.gradient_checkpointing, on_step=on_step)
        train_s = time.perf_counter() - t0
        policy.save(run.path / "adapters")
        after = {"train_nll": mean_nll(policy, examples),
                 **({"heldout_nll": mean_nll(policy, heldout_examples)} if heldout_examples else {})}
        summary = {"examples": len(examples), "skipped_for_length": skipped, "heldout_examples": len(heldout_examples),
                   "optimizer_steps": steps, "train_s": round(train_s, 1), "nll_before": before, "nll_after": after,
                   **({"demo_episodes": demo_episodes} if demo_episodes else {})}
        (run.path / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        log(f"sft done in {train_s:.0f} s: NLL/token {before['train_nll']:.3f} -> {after['train_nll']:.3f}"
            + (f" (held out {before['heldout_nll']:.3f} -> {after['heldout_nll']:.3f})" if heldout_examples else "")
            + f"; adapters in {run.path / 'adapters'}")
        return run
    except BaseException as exc:
        full = isinstance(exc, Exception) and out_of_space(exc, run.path)
        shutil.rmtree(run.path, ignore_errors=True)
        if full:
            raise RunDirError(f"no space left where {run.path} was ({type(exc).__name__}: {exc}); {run.path} was removed: "
                              "free some space and start it again") from None
        if isinstance(exc, KeyboardInterrupt):
            log(f"sft stopped: {run.path} was removed (an SFT run cannot be resumed: start it again)")
        raise
