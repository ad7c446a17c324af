"""Trainer configuration: one dataclass per concern; the CLI flags are generated from the fields.

Every field has a type, a default and a help text (in `metadata["help"]`), written once: `llm-marl
train --help` shows it. `__post_init__` checks each rule and names the fix in a ValueError.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import json
import math
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml


def check_at_least(*checks: tuple[str, float, float]) -> None:
    """A ValueError naming the first flag, and its value, of `checks` ((flag, value, least) each) below its least."""
    for flag, value, least in checks:
        if not value >= least:
            raise ValueError(f"{flag} must be >= {least}, got {value}")


def opt(default: Any, help: str, **kw: Any) -> Any:
    """A config field with its help text."""
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda d=default: type(d)(d), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


@dataclass
class ModelConfig:
    model: str = opt("smollm2-135m", "model: a built-in (smollm2-135m, tiny-random), a local folder or a Hugging Face id in the local cache")
    engine: Literal["hf", "vllm"] = opt("hf", "sampling backend: hf (transformers, shares the trainer's model) or vllm")
    policy: str = opt("shared", "role->adapter map: shared (one LoRA for all roles), per-role, or explicit 'tool=a,planner=b'")
    lora_r: int = opt(16, "LoRA rank")
    lora_alpha: int = opt(32, "LoRA alpha")
    lora_dropout: float = opt(0.0, "LoRA dropout, in sft; RL updates run without dropout, so that their log-probs are those "
                                   "the replies were sampled with")
    init_adapters: str = opt("", "start the adapters from saved ones (an `llm-marl sft` or `train` run directory, or its adapters folder): a warm start")
    device: str = opt("auto", "where the trainer's model (and the hf engine) runs: auto (cuda when torch sees a GPU, else cpu), cpu, cuda, cuda:N")
    dtype: Literal["auto", "float32", "bfloat16"] = opt("auto", "the base model's weights: auto is bfloat16 on a GPU that "
                                                        "supports it, else float32; the LoRA adapters are float32 either way")
    thinking: bool = opt(False, "let a thinking model (Qwen3) reason in a <think> block before each reply (its chat template's "
                                "enable_thinking); off: it replies at once, the no-thinking mode AT-GRPO trains Qwen3 in")
    thinking_roles: str = opt("", "let only these roles think (comma-separated, e.g. 'reasoner'; instead of --thinking): "
                                  "the others reply at once")

    def __post_init__(self) -> None:
        if self.lora_r < 1:
            raise ValueError(f"--lora-r must be >= 1, got {self.lora_r}")
        if self.engine == "vllm":
            from llm_marl.engines.vllm import lora_rank_slot

            lora_rank_slot(self.lora_r)  # before the model loads
        if self.lora_alpha <= 0:
            raise ValueError(f"--lora-alpha must be > 0, got {self.lora_alpha}")
        if not 0 <= self.lora_dropout < 1:
            raise ValueError(f"--lora-dropout must be in [0, 1), got {self.lora_dropout}")
        from llm_marl.models import resolve_device

        resolve_device(self.device)  # a GPU asked for must be there: say so before the model loads


@dataclass
class SamplingConfig:
    temperature: float = opt(1.0, "rollout temperature; the update assumes exactly this distribution (top-p/top-k off)")
    max_new_tokens: int = opt(96, "longest reply, in tokens (the quick CPU default; the papers use up to 4096)")

    def __post_init__(self) -> None:
        if not 0 < self.temperature < math.inf:
            raise ValueError(f"--temperature must be > 0 and finite for RL rollouts (got {self.temperature}); use eval for greedy "
                             "decoding")
        if self.max_new_tokens < 1:
            raise ValueError(f"--max-new-tokens must be >= 1, got {self.max_new_tokens}")


@dataclass
class OptimConfig:
    lr: float = opt(1e-4, "AdamW learning rate of each adapter")
    weight_decay: float = opt(0.01, "AdamW weight decay")
    schedule: Literal["constant", "linear", "cosine"] = opt("constant", "learning-rate schedule after warm-up")
    warmup_steps: int = opt(0, "linear warm-up, in optimiser steps")
    grad_clip: float = opt(1.0, "max global gradient norm per adapter (AT-GRPO A.2.1: 1.0)")
    epochs: int = opt(1, "passes over each step's samples")
    minibatch_size: int = opt(8, "samples per optimiser step (per adapter)")
    micro_batch_size: int = opt(0, "at most this many samples per forward/backward pass, gradients accumulated to the same "
                                   "optimiser step (less memory for long replies); replies sharing a prompt or a loss segment "
                                   "stay together; 0: the whole minibatch at once")
    clip_eps: float = opt(0.2, "PPO clip range epsilon (low side)")
    clip_eps_high: float = opt(0.2, "PPO clip range on the high side")
    dual_clip: float = opt(3.0, "dual-clip PPO's c (verl's clip_ratio_c): a negative advantage's loss is at most c times its "
                                "size, so a huge importance ratio cannot dominate its step; 0: plain PPO-clip")
    share_prompts: bool = opt(True, "run a prompt shared by several replies (a decision's K candidates) once per minibatch in the update; exact, only faster")
    gradient_checkpointing: bool = opt(False, "recompute each decoder layer's activations, and the LM head's logits, in the "
                                              "update's backward pass instead of keeping them (less memory for long replies, more "
                                              "update time); the same steps")
    # The three loss settings below default to None: "the algorithm's paper setting" (each algorithm
    # module's LOSS_DEFAULTS), resolved by TrainConfig, so a config built in Python trains the same
    # objective as the CLI. The resolved values are what config.json records.
    kl_beta: float | None = opt(None, "weight of the k3 KL to the reference (base model, adapters off); 0 disables it; unset: the algorithm's paper setting")
    ratio_level: Literal["token", "sequence"] | None = opt(
        None, "importance ratio per token, or one per loss segment (sequence: SHARP's trajectory-level ratio, Eq. 15); unset: the algorithm's paper setting")
    loss_agg: Literal["token-mean", "seq-mean", "seq-sum"] | None = opt(
        None, "loss aggregation: mean over all tokens; mean over sequences of per-sequence means; or of per-sequence sums (AT-GRPO Eq. 3); unset: the algorithm's paper setting")

    def __post_init__(self) -> None:
        if not 0 < self.lr < math.inf:
            raise ValueError(f"--lr must be > 0 and finite, got {self.lr}")
        if not 0 <= self.weight_decay < math.inf:
            raise ValueError(f"--weight-decay must be >= 0 and finite, got {self.weight_decay}")
        if self.warmup_steps < 0:
            raise ValueError(f"--warmup-steps must be >= 0, got {self.warmup_steps}")
        if not self.grad_clip > 0:  # 0 would scale every gradient to nothing; inf turns clipping off
            raise ValueError(f"--grad-clip must be > 0 (inf: no clipping), got {self.grad_clip}")
        if not (0 <= self.clip_eps < 1 and self.clip_eps_high >= 0):
            raise ValueError(f"--clip-eps must be in [0, 1) and --clip-eps-high >= 0, got {self.clip_eps} and {self.clip_eps_high}")
        if not (self.dual_clip == 0 or 1 < self.dual_clip < math.inf):  # NaN fails too
            raise ValueError(f"--dual-clip must be > 1 and finite (0 turns it off), got {self.dual_clip}")
        check_at_least(("--minibatch-size", self.minibatch_size, 1), ("--epochs", self.epochs, 1))
        if self.micro_batch_size < 0:
            raise ValueError(f"--micro-batch-size must be >= 0 (0: the whole minibatch at once), got {self.micro_batch_size}")
        if self.kl_beta is not None and not 0 <= self.kl_beta < math.inf:  # NaN too: every update's loss would be NaN
            raise ValueError(f"--kl-beta must be >= 0 and finite, got {self.kl_beta}")


LOSS_FIELDS = ("kl_beta", "ratio_level", "loss_agg")
"""OptimConfig fields every algorithm sets to its paper's value (its module's LOSS_DEFAULTS)."""


# The default main job must run in a few minutes on a CPU laptop: a small grid and few turns.
QUICK_ENV_ARGS: dict[str, dict[str, Any]] = {
    "plan_path": {"height": 4, "width": 4, "wall_density": 0.15, "min_path_length": 2, "max_path_length": 4, "max_turns": 1},
}


def quick_env_args(env: str, env_args: dict[str, Any] | None) -> dict[str, Any]:
    """The environment options a run uses: the user's, or when they set nothing but the variant (`mode`),
    the quick configuration with it, so a single-agent row plays the same tasks as the workflow's. `env` is any
    name the registry takes (plan_path, plan_path_v2, its PettingZoo id)."""
    from llm_marl_envs.registry import get as get_env

    env_args = dict(env_args or {})
    return env_args if set(env_args) - {"mode"} else {**QUICK_ENV_ARGS.get(get_env(env).name, {}), **env_args}


@dataclass
class RunConfig:
    env: str = opt("plan_path", "environment (see `llm-marl envs`)")
    env_args: dict = opt({}, "environment option KEY=VALUE (repeatable); unset (or only mode): a small quick configuration of the env", flag="--env-arg")
    algo: str = opt("at-grpo", "algorithm: grpo, at-grpo, matpo, mhgpo, sharp")
    steps: int = opt(2, "training steps (rollout + update)")
    envs_per_step: int = opt(1, "environment instances (tasks) sampled per step")
    seed: int = opt(0, "run seed: instances, sampling and initialisation derive from it")
    out_dir: str = opt("runs", "root folder of run directories")
    run_name: str = opt("", "run directory name (default <env>__<algo>__<seed>__<time>, then -2, -3, ... where runs start in the same second)")
    checkpoint_every: int = opt(1, "write a checkpoint every N steps (and at the end)")
    eval_episodes: int = opt(0, "held-out episodes (test split, greedy) evaluated before the first step and after the last; 0 = none")
    threads: int = opt(0, "torch CPU threads for sampling and updates; 0 = one per available CPU (the CLI also makes idle OpenMP threads sleep, so a busy machine slows a run down gracefully)")
    deterministic: bool = opt(False, "deterministic torch kernels and seeded sampling: a resumed run equals an uninterrupted one")
    progress: bool = opt(True, "progress bars (off automatically when not a terminal)")
    report_to: Literal["tensorboard", "wandb", "trackio", "none"] = opt(
        "tensorboard", "where metrics and the config also go: tensorboard event files in the run directory, wandb or trackio "
        "(optional extras), or none (metrics.jsonl only)")

    def __post_init__(self) -> None:
        check_at_least(("--steps", self.steps, 1), ("--envs-per-step", self.envs_per_step, 1))
        if self.seed < 0:
            raise ValueError(f"--seed must be >= 0, got {self.seed}")
        if self.eval_episodes < 0:
            raise ValueError(f"--eval-episodes must be >= 0, got {self.eval_episodes}")
        if self.threads < 0:
            raise ValueError(f"--threads must be >= 0 (0 = one per available CPU), got {self.threads}")
        if self.checkpoint_every < 1:
            raise ValueError(f"--checkpoint-every must be >= 1, got {self.checkpoint_every}")


# ---------------------------------------------------------------------------- dataclass <-> argparse
# Kept by hand on purpose: transformers' HfArgumentParser (5.19) was tried in its place and lost what the
# CLI promises. (1) It gives every field its default, so a flag that was given cannot be told from one that
# was not: "flags override --config / --resume" needs argparse.SUPPRESS. (2) It adds `--lora_r` beside
# `--lora-r` and shows both, so `--help` and usage lines print the underscore spelling the README never uses.
# (3) Bools become `--deterministic [DETERMINISTIC]` (no `--no-deterministic`) or `--progress [PROGRESS]` plus
# a `--no_progress` line that repeats the help with "(default: False)". (4) A dict field cannot be read from
# repeated KEY=VALUE (`--env-arg`), and metadata keys go to add_argument verbatim. (5) parse_dict reads a flat
# namespace, not a run's sectioned config.json, and names neither the section nor the valid keys. Fixing
# those leaves only its Literal/Optional type dispatch, reached through its private _parse_dataclass_field.
def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _base_type(annotation: Any) -> Any:
    """The runtime type of a resolved field annotation (Optional[X] -> X)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _base_type(args[0])
    return annotation


def _parse_kv(value: str) -> tuple[str, Any]:
    if "=" not in value:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {value!r}")
    key, raw = value.split("=", 1)
    try:
        return key.strip(), ast.literal_eval(raw)
    except (ValueError, SyntaxError):
        return key.strip(), raw


def add_arguments(parser: argparse.ArgumentParser, cls: type, title: str, shown_defaults: dict[str, Any] | None = None,
                  exclude: tuple[str, ...] = ()) -> None:
    """Add one flag per field of `cls` (but `exclude`), with its help and choices. Defaults are left to
    the class; `shown_defaults` replaces the default the help shows (e.g. the algorithm's loss settings)."""
    group = parser.add_argument_group(title)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in exclude:
            continue
        help_text = f.metadata.get("help", "")
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        default = (shown_defaults or {}).get(f.name, default)
        kind = _base_type(hints[f.name])
        kwargs: dict[str, Any] = {"dest": f.name, "default": argparse.SUPPRESS, "help": f"{help_text} (default: {default!r})"}
        if typing.get_origin(kind) is Literal:
            kwargs["choices"] = list(typing.get_args(kind))
        elif kind is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif kind is dict:
            kwargs.update(action="append", type=_parse_kv, metavar="KEY=VALUE")
            kwargs["help"] = help_text
        elif kind in (int, float, str):
            kwargs["type"] = kind
        group.add_argument(f.metadata.get("flag", _flag(f.name)), **kwargs)


def from_args(cls: type, args: argparse.Namespace, base: dict[str, Any] | None = None) -> Any:
    """Instantiate `cls` from `base` (e.g. a saved config) overridden by the flags that were given. A mapping's
    flag (`--env-arg KEY=VALUE`) overrides its KEY: the base's other keys stay."""
    values = dict(base or {})
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if hasattr(args, f.name):
            value = getattr(args, f.name)
            if _base_type(hints[f.name]) is dict:
                value = {**(values.get(f.name) or {}), **dict(value)}
            values[f.name] = value
    return cls(**{k: v for k, v in values.items() if k in {f.name for f in dataclasses.fields(cls)}})


_KIND_WORDS = {bool: "true or false", int: "a whole number", float: "a number", str: "text", dict: "a mapping of options"}


def typed_values(cls: type, values: dict[str, Any], where: str) -> dict[str, Any]:
    """`values` of `cls`'s fields, checked against the types the fields declare (a file's values skip argparse).
    A number that YAML reads as text is read as the number ("1e-3": PyYAML reads an exponent without a dot as a
    string); a whole float for an int field is the int. Anything else is a ValueError naming `where` and the field."""
    hints = typing.get_type_hints(cls)
    out = {}
    for name, value in values.items():
        if name not in hints:  # not a setting of `cls`: the caller reports or drops it
            out[name] = value
            continue
        annotation, what = hints[name], f"{where}.{name}"
        kind = _base_type(annotation)
        if value is None and type(None) in typing.get_args(annotation):
            out[name] = None
        elif typing.get_origin(kind) is Literal:
            if value not in typing.get_args(kind):
                raise ValueError(f"{what} must be one of {', '.join(map(repr, typing.get_args(kind)))}, got {value!r}")
            out[name] = value
        elif kind in _KIND_WORDS:
            out[name] = _typed(value, kind, what)
        else:
            out[name] = value
    return out


def _typed(value: Any, kind: type, what: str) -> Any:
    if kind in (int, float) and isinstance(value, str):
        with contextlib.suppress(ValueError):
            value = float(value.strip())
    if isinstance(value, bool) or kind is bool:  # a bool is no number, and a number no bool
        if isinstance(value, bool) and kind is bool:
            return value
    elif kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    elif kind is float and isinstance(value, (int, float)):
        return float(value)
    elif kind is str and isinstance(value, (int, float)):
        return str(value)  # a run name or a model id YAML read as a number
    elif isinstance(value, kind):
        return value
    raise ValueError(f"{what} must be {_KIND_WORDS[kind]}, got {value!r}")


def read_config_file(path: str | Path, sections: dict[str, type | None]) -> dict[str, Any]:
    """A `--config` file (YAML or JSON) as {section: {field: value}}, checked against `sections`
    ({name: dataclass}, or None for a section that is accepted and ignored, like a run's
    `resolved_env_args`). The format is a run's `config.json`, so any run's resolved config works."""
    path = Path(path)
    if path.is_dir() and (path / "config.json").is_file():  # a run directory, which the file is in
        raise ValueError(f"--config {path} is a folder: pass its settings file, --config {path / 'config.json'}")
    if path.is_dir():  # "no such file" said it was not there
        raise ValueError(f"--config {path} is a folder: pass a YAML or JSON settings file")
    if not path.is_file():
        raise ValueError(f"--config {path}: no such file")
    try:
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ValueError(f"--config {path} does not parse ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise ValueError(f"--config {path} must map sections ({', '.join(sections)}) to their settings")
    for name, values in data.items():
        if name not in sections:
            raise ValueError(f"--config {path}: unknown section {name!r}; sections are {', '.join(sections)}")
        cls = sections[name]
        if cls is not None:
            data[name] = config_section(path, name, values, cls)
    return data


def config_section(path: str | Path, name: str, values: Any, cls: type) -> dict[str, Any]:
    """Section `name` of the `--config` file `path`, checked against `cls`: a mapping of its settings, each of its type."""
    if not isinstance(values, dict):
        raise ValueError(f"--config {path}: section {name!r} must map settings to values")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ValueError(f"--config {path}: section {name!r} has no setting {', '.join(map(repr, unknown))}; "
                         f"it has {', '.join(sorted(known))}")
    return typed_values(cls, values, f"--config {path}: {name}")
