"""`llm-marl train` and `llm-marl eval` (added to the CLI of `llm_marl.cli`)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llm_marl.config import (ModelConfig, OptimConfig, RunConfig, SamplingConfig, add_arguments, config_section, from_args,
                             typed_values)


def canonical_algo(name: str) -> str:
    """The algorithm id `name` stands for (`--algo AT-GRPO` and `at_grpo` are at-grpo); an unknown name as it is."""
    from llm_marl.algorithms import get

    try:
        return get(name).id
    except ValueError:
        return name


def chosen_algorithm(argv: Sequence[str]) -> str:
    """The id of the --algo of a train command line (its flags depend on it): the saved one with --resume, else
    the flag, else the one of a --config file, else the default."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--algo", default=None)
    pre.add_argument("--resume", default=None)
    pre.add_argument("--config", default=None)
    known, _ = pre.parse_known_args(argv)
    try:
        if known.resume:
            from llm_marl.runs import RunDir

            return canonical_algo(RunDir.open(known.resume).load_config()["run"]["algo"])
        if known.algo is None and known.config:
            return canonical_algo(str(_read_train_config(known.config).get("run", {}).get("algo", RunConfig.algo)))
    except (ValueError, KeyError, TypeError, AttributeError):
        pass  # a missing or damaged file is reported (one line) when the command runs
    return canonical_algo(known.algo or RunConfig.algo)


def _train_sections() -> dict[str, type | None]:
    """The sections of a train config (a `--config` file, a run's config.json); the algorithm's is typed by `cmd_train`."""
    from llm_marl.credit.team import CreditConfig
    from llm_marl.distributed.config import ClusterConfig

    return {"model": ModelConfig, "sampling": SamplingConfig, "optim": OptimConfig, "run": RunConfig, "algo": None,
            "credit": CreditConfig, "cluster": ClusterConfig, "resolved_env_args": None, "resumes": None}


def _read_train_config(path: str) -> dict[str, Any]:
    from llm_marl.config import read_config_file

    return read_config_file(path, _train_sections())


def add_commands(sub: Any, argv: Sequence[str]) -> None:
    p = sub.add_parser("train", help="train LoRA policies with an algorithm on an environment",
                       description="Train with --algo on --env. Defaults: the embedded smollm2-135m on CPU, a quick schedule.")
    algo_id = RunConfig.algo
    algorithm = None
    if argv and argv[0] == "train":
        # The algorithm's own flags (--K, --G, --alpha...) and loss defaults depend on --algo; torch is imported only here.
        from llm_marl.algorithms import ALGORITHMS
        from llm_marl.algorithms import get as get_algorithm

        algo_id = chosen_algorithm(argv[1:])
        algorithm = get_algorithm(algo_id) if algo_id in ALGORITHMS else None
    for cls, title in [(RunConfig, "run"), (ModelConfig, "model"), (SamplingConfig, "sampling")]:
        add_arguments(p, cls, title)
    add_arguments(p, OptimConfig, "optimisation", shown_defaults=algorithm.loss_defaults if algorithm else None)
    if algorithm is not None:
        add_arguments(p, algorithm.config_cls, f"{algo_id} (see --algo)")
    if argv and argv[0] == "train":
        from llm_marl.credit.team import CreditConfig

        add_arguments(p, CreditConfig, "credit (any algorithm)")
        from llm_marl.distributed.config import ClusterConfig

        add_arguments(p, ClusterConfig, "cluster (Ray actors and trainer ranks; needs pip install -e '.[ray]')")
    p.add_argument("--resume", metavar="RUN_DIR", help="continue a killed run from its last checkpoint (flags given override its config, except "
                   "--env, --algo, --model, --policy and the LoRA shape, which its checkpoints hold, --out-dir and --run-name, and the "
                   "--eval-episodes of a run evaluated before training, or 0)")
    p.add_argument("--config", metavar="FILE", help="settings from a YAML or JSON file with the sections of a run's config.json "
                   "(model, sampling, optim, run, algo, credit); any run's config.json reproduces it; flags override the file")
    p.set_defaults(func=cmd_train, algo_id=algo_id)

    p = sub.add_parser("sft", help="fine-tune the LoRA adapters on oracle demonstrations or your transcripts (a warm start for train)",
                       description="Supervised warm start: writes a run directory whose adapters `train --init-adapters` starts from.")
    from llm_marl.sft import SFTConfig

    add_arguments(p, SFTConfig, "sft")
    add_arguments(p, ModelConfig, "model", exclude=("engine",))
    p.add_argument("--config", metavar="FILE", help="settings from a YAML or JSON file with the sections of an sft run's "
                   "config.json (sft, model); flags override the file")
    p.set_defaults(func=cmd_sft)

    p = sub.add_parser("eval", help="success rate and mean rewards of a model (with adapters) on a split; JSON out")
    p.add_argument("--env", required=True, help="environment (see `llm-marl envs`)")
    p.add_argument("--env-arg", action="append", default=[], metavar="KEY=VALUE",
                   help="environment option (repeatable): over the options the --adapters' run trained on; without "
                        "such adapters, unset (or only mode): the quick configuration `train` uses")
    p.add_argument("--split", default="test", choices=["train", "val", "test", "all"],
                   help="all: every row of the dataset once (environments given a dataset file, folder or Hub id)")
    p.add_argument("--n", type=int, default=None, help="episodes (default 20; with a dataset, distinct rows, default all of "
                   "the split): generated instances take seeds seed..seed+n-1")
    from llm_marl.cli import seed_arg

    p.add_argument("--seed", type=seed_arg, default=0)
    p.add_argument("--model", default=None, help="model name or folder (see train --model); default: the base model of "
                   f"--adapters, else {ModelConfig.model}; with --engine api: the model name the server serves (required)")
    p.add_argument("--adapters", default=None, help="a run's adapters: RUN_DIR (its final ones), RUN_DIR/adapters or a "
                   "checkpoint's adapters folder")
    p.add_argument("--policy", default="shared", help="role->adapter map when no --adapters are given")
    p.add_argument("--engine", default="hf", choices=["hf", "vllm", "api"])
    p.add_argument("--device", default="auto", help="where the model runs with --engine hf: auto (cuda when torch sees a GPU, "
                   "else cpu), cpu, cuda, cuda:N")
    p.add_argument("--dtype", default="auto", choices=["auto", "float32", "bfloat16"],
                   help="the base model's weights (--engine hf and vllm): auto is bfloat16 on a GPU that supports it, else float32")
    from llm_marl.cli import add_api_arguments

    add_api_arguments(p, "--engine api")
    p.add_argument("--thinking", action=argparse.BooleanOptionalAction, default=None,
                   help="let a thinking model (Qwen3) reason in a <think> block before each reply, or not (its chat template's "
                        "enable_thinking); default: as the --adapters were trained, else off; with --engine api: the server's")
    p.add_argument("--thinking-roles", default=None, metavar="ROLES",
                   help="let only these roles think (comma-separated, e.g. 'reasoner'; instead of --thinking): the others reply at once")
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (the papers' validation)")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help=f"longest reply, in tokens (default: as the --adapters' run trained, else {EVAL_MAX_NEW_TOKENS})")
    p.add_argument("--out", default=None, help="also write the JSON result to this file")
    p.set_defaults(func=cmd_eval)


# What a resumed run keeps: its checkpoints hold adapters of this base model, σ and LoRA shape, trained by
# this algorithm on this environment; and its directory is the one --resume names (another --out-dir or
# --run-name would be written into config.json as a change that changes nothing).
_KEPT_ON_RESUME = (("run", "env"), ("run", "algo"), ("model", "model"), ("model", "policy"), ("model", "lora_r"),
                   ("model", "lora_alpha"), ("run", "out_dir"), ("run", "run_name"))


def _check_resume_keeps(resume: str, saved: dict[str, Any], config: Any) -> None:
    changed = [f"--{key.replace('_', '-')} {getattr(getattr(config, section), key)} (the run's is {saved[section][key]})"
               for section, key in _KEPT_ON_RESUME
               if key in saved.get(section, {}) and getattr(getattr(config, section), key) != saved[section][key]]
    if changed:
        raise ValueError(f"a resumed run keeps its environment, algorithm, model, --policy, LoRA shape and directory: drop "
                         f"{', '.join(changed)}; or start a new run from its weights with --init-adapters "
                         f"{shlex.quote(str(Path(resume) / 'checkpoints' / 'step_N' / 'adapters'))}")
    from llm_marl.trainer import EVAL_BEFORE, recorded_settings

    try:  # the held-out evaluation after training is compared with the one before: the same episodes, or none
        evaluated = json.loads((Path(resume) / EVAL_BEFORE).read_text())
        played = evaluated["episodes"]
    except (OSError, ValueError, KeyError, TypeError):
        evaluated, played = None, None  # not evaluated before training (or a damaged file): nothing to compare with
    scores_elsewhere = f"llm-marl eval --adapters {shlex.quote(str(resume))} scores the trained adapters"
    if played is not None and config.run.eval_episodes not in (0, played):
        raise ValueError(f"--eval-episodes {config.run.eval_episodes}: {resume} was evaluated on {played} held-out episodes "
                         f"before training ({EVAL_BEFORE}), and the evaluation after training plays the same ones to compare: "
                         f"pass --eval-episodes {played} (or 0: none after training); {scores_elsewhere} on any number of episodes")
    # The tasks and reply length of the one before are played after training whatever the resume trains with; the prompts
    # are the engine's, built with the thinking switch the run goes on with.
    before = recorded_settings(evaluated)
    thinking = (config.model.thinking, config.model.thinking_roles)
    if before is not None and config.run.eval_episodes and thinking != (before["thinking"], before["thinking_roles"]):
        was = f"--thinking-roles {before['thinking_roles']}" if before["thinking_roles"] else \
            ("--thinking" if before["thinking"] else "--no-thinking")
        raise ValueError(f"{resume} was evaluated before training with {was} ({EVAL_BEFORE}), and the evaluation after training "
                         f"prompts as that one did to compare: keep it, or pass --eval-episodes 0 (none after training); "
                         f"{scores_elsewhere} with either")


def cmd_train(args: argparse.Namespace) -> int:
    from llm_marl.cli import UserError
    from llm_marl.distributed.config import ClusterConfig, ClusterError
    from llm_marl.trainer import TrainConfig, train

    try:
        base: dict[str, Any] = {}
        if args.resume and args.config:
            raise ValueError("--resume continues a run with its own saved config; drop --config (flags still override it)")
        if args.resume:
            from llm_marl.runs import RunDir

            base = RunDir.open(args.resume).load_config()
            if not isinstance(base.get("run"), dict):  # e.g. an sft run: training into it would replace its adapters
                what = "an `llm-marl sft` run, which cannot be resumed" if "sft" in base else "not a `llm-marl train` run"
                raise ValueError(f"{args.resume} is {what}: start a new run from its adapters with --init-adapters "
                                 f"{shlex.quote(str(args.resume))}")
            for section, cls in _train_sections().items():  # a hand-edited config.json is checked like a --config file
                if cls is not None and isinstance(base.get(section), dict):
                    base[section] = typed_values(cls, base[section], f"{Path(args.resume) / 'config.json'}: {section}")
            if isinstance(base.get("run"), dict) and isinstance(base["run"].get("algo"), str):
                base["run"]["algo"] = canonical_algo(base["run"]["algo"])  # a run saved as at_grpo keeps at-grpo
            saved = base.get("cluster")
            if (isinstance(saved, dict) and saved.get("rollout_workers") and saved.get("engines") == 1
                    and getattr(args, "rollout_workers", None) == 0 and not hasattr(args, "engines")):
                # Saved before config.json kept --engines as given: the 1 came with the workers, which now go.
                base["cluster"] = {**saved, "engines": 0}
                print("--rollout-workers 0: the trainer process samples with its own engine (the run's engine actor came "
                      "with its rollout workers; pass --engines 1 to keep it)", file=sys.stderr)
            if isinstance(base.get("optim"), dict):
                base["optim"].setdefault("dual_clip", 0.0)  # a run saved before --dual-clip trained plain PPO-clip: it keeps it
        elif args.config:
            base = _read_train_config(args.config)
            if canonical_algo(base.get("run", {}).get("algo", args.algo_id)) != args.algo_id:
                base.pop("algo", None)  # --algo chose another algorithm: the file's algorithm settings do not apply
        from llm_marl.algorithms import get as get_algorithm

        from llm_marl.credit.team import CreditConfig

        algorithm = get_algorithm(args.algo_id)
        algo_cls = algorithm.config_cls
        # The algorithm's section is checked once the algorithm is known (a file's misspelt setting is named, not dropped).
        if args.config and "algo" in base:
            base["algo"] = config_section(args.config, "algo", base["algo"], algo_cls)
        elif isinstance(base.get("algo"), dict):
            base["algo"] = typed_values(algo_cls, base["algo"], f"{Path(args.resume) / 'config.json'}: algo")
        config = TrainConfig(
            model=from_args(ModelConfig, args, base.get("model")),
            sampling=from_args(SamplingConfig, args, base.get("sampling")),
            # Loss settings not given (and not saved by a resumed run) take the paper's values in TrainConfig.
            optim=from_args(OptimConfig, args, base.get("optim")),
            run=from_args(RunConfig, args, base.get("run")),
            algo=from_args(algo_cls, args, base.get("algo")),
            credit=from_args(CreditConfig, args, base.get("credit")),
            cluster=from_args(ClusterConfig, args, base.get("cluster")),
        )
        if args.resume:
            _check_resume_keeps(args.resume, base, config)
        if config.cluster.enabled:
            from llm_marl.distributed import require_ray

            require_ray()  # a missing extra is one line, before the model loads
        from llm_marl_envs.registry import get as get_env

        get_env(config.run.env)  # unknown env / variant / model errors surface before anything loads
        from llm_marl_envs.registry import make_raw

        probe = make_raw(config.run.env, **config.env_kwargs())
        algorithm.check_env(probe, config.algo)
        from llm_marl.distributed.config import PATH_ENV_ARGS
        from llm_marl.evaluate import check_split_problems, episode_tasks

        # A dataset with no row in a split train plays says so now, with train's fixes (the environment's own advice,
        # another split or options={'instance': ...}, is no flag of train's).
        dataset = probe.dataset_instances(None) is not None
        larger = f"--env-arg {next((key for key in PATH_ENV_ARGS if key in config.env_kwargs()), 'dataset')}=FILE"
        if dataset:
            check_split_problems(config.run.env, "train", config.run.seed, config.env_kwargs(),
                                 f" ({larger}; train plays its steps' episodes on the train split)")
        # Options whose generator has no training instance say so now, not in step 1 after the model loads.
        probe.reset(seed=config.run.seed, options={"split": "train"})
        if config.run.eval_episodes:
            if dataset:
                check_split_problems(config.run.env, "test", 0, config.env_kwargs(),
                                     f" ({larger}), or pass --eval-episodes 0 (the held-out evaluation plays the test split)")
            # The held-out episodes: a dataset too small for them says so now, not after the model loads.
            episode_tasks(config.run.env, config.run.eval_episodes, "test", 0, config.env_kwargs(), asked="--eval-episodes")
        from llm_marl.models import load_tokenizer, resolve_model
        from llm_marl.policies import parse_policy, parse_thinking

        sigma = parse_policy(config.model.policy, probe.possible_agents)
        parse_thinking(config.model.thinking, config.model.thinking_roles, probe.possible_agents)
        if not args.resume:
            from llm_marl.runs import RunDir

            RunDir.check_root(config.run.out_dir)
        model_path = resolve_model(config.model.model)
        if config.model.init_adapters and not args.resume:
            from llm_marl.policies import LoRAConfig, warm_start_sources

            lora = LoRAConfig(r=config.model.lora_r, alpha=config.model.lora_alpha, dropout=config.model.lora_dropout)
            warm_start_sources(config.model.init_adapters, sigma, lora, model_path)  # before the model loads
        load_tokenizer(model_path)  # a base model without a chat template is refused before a run directory is made
        if config.model.engine == "vllm":
            require_vllm()  # before the model loads
        from llm_marl.tracking import check_available

        check_available(config.run.report_to)
    except (ValueError, TypeError, ClusterError) as exc:
        raise UserError(str(exc)) from None
    from llm_marl.policies import AdapterFolderError, CheckpointingError
    from llm_marl.runs import RunDirError
    from llm_marl.tracking import TrackerError
    from llm_marl.trainer import TrainingInterrupted

    try:
        run = train(config, resume=args.resume, log=lambda msg: print(msg, file=sys.stderr))
    except (RunDirError, ClusterError, AdapterFolderError, CheckpointingError, TrackerError) as exc:
        raise UserError(str(exc)) from None
    except TrainingInterrupted as exc:
        print(f"llm-marl: {exc}", file=sys.stderr)
        return exc.exit_code
    metrics = run.metrics()
    print(json.dumps({"run_dir": str(run.path), "steps": len(metrics),
                      "last": {k: v for k, v in (metrics[-1] if metrics else {}).items() if k.startswith(("step", "reward/success", "credit/"))}}))
    return 0


def cmd_sft(args: argparse.Namespace) -> int:
    from llm_marl.cli import UserError

    try:
        from llm_marl.sft import SFTConfig, read_transcripts, run_sft

        from llm_marl.config import read_config_file

        base = read_config_file(args.config, {"sft": SFTConfig, "model": ModelConfig, "resolved_env_args": None}) if args.config else {}
        config, model = from_args(SFTConfig, args, base.get("sft")), from_args(ModelConfig, args, base.get("model"))
        transcripts, heldout, episodes = _sft_transcripts(config)
        run = run_sft(config, model, transcripts, heldout, log=lambda msg: print(msg, file=sys.stderr), demo_episodes=episodes)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        raise UserError(str(exc)) from None
    print(json.dumps({"run_dir": str(run.path), **json.loads((run.path / "summary.json").read_text())}))
    return 0


def _sft_transcripts(config: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """(training transcripts, held-out transcripts, the oracle episodes behind them per split): the user's file, or
    the oracle's demonstrations on the train split; held-out ones always come from the oracle on the val split."""
    # The CLI is the application layer: it may use agents/ (the trainer modules never do).
    from agents.demonstrations import NO_ANSWER, oracle_demonstrations
    from llm_marl.config import quick_env_args
    from llm_marl.sft import check_demo_splits, read_transcripts
    from llm_marl_envs.registry import get as get_env

    name = get_env(config.env).name
    env_kwargs = quick_env_args(name, config.env_args)
    _check_oracle(name, env_kwargs, config)
    check_demo_splits(name, env_kwargs, config)
    episodes: dict[str, dict[str, Any]] = {}

    def demos(n: int, split: str, noise: float) -> list[dict[str, Any]]:
        left_out: dict[int, str] = {}
        records = list(oracle_demonstrations(name, n, split=split, seed=config.seed, env_kwargs=env_kwargs,
                                             oracle_options=config.oracle_args, noise=noise, left_out=left_out))
        failed = {str(seed): why for seed, why in left_out.items() if why != NO_ANSWER}
        episodes[split] = {"episodes": n, "left_out": len(left_out), "no_answer": len(left_out) - len(failed), "failed": failed}
        return records

    transcripts = read_transcripts(config.data) if config.data else demos(config.demos, "train", config.demo_noise)
    heldout = demos(config.heldout_demos, "val", 0.0) if config.heldout_demos else []
    return transcripts, heldout, episodes


def _check_oracle(name: str, env_kwargs: dict[str, Any], config: Any) -> None:
    """Refuse, before any episode, what the oracle cannot do, blaming the real cause: an --oracle-arg it does not take
    (named as the flag, or a --config file's setting, that gave it), or the environment's problems (a dataset it has no
    answers to: the oracle refuses them with any --oracle-arg)."""
    from agents.oracle import make_oracle

    needed = not config.data or config.heldout_demos > 0  # demonstrations to play (--data's held-out ones are the oracle's)
    if not (needed or config.oracle_args):
        return
    try:
        make_oracle(name, env_kwargs, **config.oracle_args)
        return
    except ValueError as exc:
        error = exc
    if config.oracle_args:
        try:
            make_oracle(name, env_kwargs)
        except ValueError as refusal:
            error = refusal
        else:
            raise ValueError(f"--oracle-arg (oracle_args) for {name}: {error}") from None
    if needed:
        own = "" if config.data else "transcripts of your own with --data, and "
        raise ValueError(f"no oracle demonstrations of these {name} problems (--env-arg, or env_args in --config): {error}; "
                         f"for SFT on them, pass {own}--heldout-demos 0 (the held-out replies are the oracle's)") from None


def cmd_eval(args: argparse.Namespace) -> int:
    from llm_marl.cli import UserError, check_output_file, parse_env_args, write_output_file
    from llm_marl.config import quick_env_args
    from llm_marl.engines.base import SamplingParams
    from llm_marl.evaluate import evaluate
    from llm_marl_envs.registry import get as get_env

    from llm_marl.evaluate import episode_tasks
    from llm_marl_envs.registry import make_raw

    if args.engine == "api" and args.adapters is not None:  # else the server's model is scored as if it were theirs
        raise UserError(f"--engine api serves no LoRA adapters (--adapters {args.adapters}); evaluate adapters with "
                        "--engine hf or vllm")
    if args.out:
        check_output_file(args.out, "--out")  # before the episodes whose result it keeps
    try:
        given = parse_env_args(args.env_arg)
        # A run's adapters are scored on the tasks and reply length they were trained with (an --env-arg overrides its
        # key, as it does a --config file's); other adapters, or none, on the configuration `train` uses without --env-arg.
        trained = trained_settings(args.adapters, args.env)
        if args.max_new_tokens is None:
            args.max_new_tokens = trained.get("max_new_tokens", EVAL_MAX_NEW_TOKENS)
        if trained:
            env_kwargs = {**trained["env_args"], **given}
            print(f"eval: as {trained['run']} trained (its config.json): environment options {json.dumps(env_kwargs)}, "
                  f"--max-new-tokens {args.max_new_tokens} (--env-arg and --max-new-tokens choose others)", file=sys.stderr)
        else:
            env_kwargs = quick_env_args(get_env(args.env).name, given)
        if args.n is None and make_raw(args.env, **env_kwargs).dataset_instances() is None:
            args.n = 20  # generated instances; a dataset's default is every row of the split
        episode_tasks(args.env, args.n, args.split, args.seed, env_kwargs)  # a too-small dataset says so before any model loads
        sampling = SamplingParams(temperature=args.temperature, max_new_tokens=args.max_new_tokens)
    except (ValueError, TypeError) as exc:
        raise UserError(str(exc)) from None
    engine, sigma = _eval_engine(args, env_kwargs, UserError)
    from llm_marl.engines.api import APIError

    def record(result: dict[str, Any], out: str | None) -> None:
        result.update({"env_args": env_kwargs, "max_new_tokens": args.max_new_tokens, "model": args.model,
                       "adapters": args.adapters, "engine": args.engine, "thinking": args.thinking,
                       **({} if args.engine == "api" else {"dtype": args.dtype})})
        text = json.dumps(result, indent=2)
        print(text)  # first: a file that cannot be written then loses nothing
        if out:
            write_output_file(Path(out), text + "\n", "--out")

    try:
        result = evaluate(engine, args.env, n=args.n, split=args.split, seed=args.seed, env_kwargs=env_kwargs,
                          sigma=sigma, sampling=sampling)
    except APIError as exc:
        partial = getattr(exc, "partial_result", None)
        if partial is None:
            raise UserError(str(exc)) from None
        # Beside --out, never in it: a file there is taken for the whole evaluation (the leaderboard's rows are).
        out = partial_path(args.out) if args.out else None
        record(partial, out)
        played = f"{partial['partial']['episodes']} of {partial['partial']['of']} episodes"
        raise UserError(f"{exc}; the scores of the {played} that ended before it are on stdout"
                        f"{f' and in {out}' if out else ''}, marked \"partial\"") from None
    except ValueError as exc:
        raise UserError(str(exc)) from None
    finally:
        engine.close()
    record(result, args.out)
    return 0


def partial_path(out: str) -> str:
    """Where `eval` writes the scores of an evaluation an API error cut short, when --out is `out`: eval.json ->
    eval.partial.json."""
    path = Path(out)
    return str(path.with_name(f"{path.stem}.partial{path.suffix}"))


EVAL_MAX_NEW_TOKENS = 256  # eval's reply length for adapters that are not a run's, or none


def trained_settings(adapters: str | None, env: str) -> dict[str, Any]:
    """The environment options and reply length of the run whose adapters `adapters` names (RUN_DIR, RUN_DIR/adapters or
    a checkpoint's adapters folder), as its config.json holds them, when it trained on `env`: {"run", "env_args" and,
    for a train run, "max_new_tokens"}; {} for other adapters (a copied folder, another environment's) or none."""
    if adapters is None:
        return {}
    folder = Path(adapters).resolve()
    runs = [folder]
    if folder.name == "adapters":
        runs.append(folder.parent)
        if folder.parent.parent.name == "checkpoints":
            runs.append(folder.parent.parent.parent)
    run = next((r for r in runs if (r / "config.json").is_file()), None)
    if run is None:
        return {}
    from llm_marl_envs.registry import get as get_env

    try:
        saved = json.loads((run / "config.json").read_text())
        trained = saved.get("run") or saved["sft"]
        with warnings.catch_warnings():  # an older version's name: its FutureWarning is the run's, not this command's
            warnings.simplefilter("ignore", FutureWarning)
            if get_env(trained["env"]).name != get_env(env).name:
                return {}
        settings = {"run": str(run), "env_args": dict(saved["resolved_env_args"])}
        if "sampling" in saved:
            settings["max_new_tokens"] = int(saved["sampling"]["max_new_tokens"])
        return settings
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}  # not a run's configuration (or a damaged one): eval's own defaults


def require_vllm() -> None:
    """ValueError naming the install command when vLLM cannot be imported (checked before any model loads)."""
    from llm_marl.engines.vllm import import_vllm

    try:
        import_vllm()
    except ImportError as exc:
        raise ValueError(str(exc)) from None


def adapters_base_model(adapters: str | Path | None) -> str | None:
    """The base model saved in an adapters folder's manifest (None without one)."""
    from llm_marl.policies import MANIFEST

    if adapters is None or not (Path(adapters) / MANIFEST).is_file():
        return None
    try:
        return json.loads((Path(adapters) / MANIFEST).read_text()).get("base_model") or None
    except (ValueError, AttributeError):
        return None  # a damaged manifest is reported by load_policy


def load_policy(model: str, roles: list[str], policy: str = "shared", adapters: str | Path | None = None, seed: int = 0,
                device: str | None = None, thinking: bool | tuple[str, ...] | None = None, dtype: str = "float32") -> Any:
    """The policy set of `model` (on `device`, default the CPU); with `adapters` (a folder written by
    `PolicySet.save`), built with the saved LoRA shape and loaded with the saved weights and σ. Prompts
    let the model think before it replies if `thinking`, by default as the adapters were trained (else not)."""
    from llm_marl.policies import PolicySet, read_manifest, saved_thinking

    lora = None
    if adapters is not None:
        saved, lora = read_manifest(Path(adapters), "--adapters")
        thinking = saved_thinking(saved.get("thinking")) if thinking is None else thinking
        base = saved.get("base_model")
        if base:
            from llm_marl.models import resolve_model

            if Path(resolve_model(model)).resolve() != Path(base).resolve():
                raise ValueError(f"--adapters {adapters} were trained on {base}, not on --model {model}: drop --model "
                                 "(eval then uses the adapters' base model) or pass that model")
    loaded = PolicySet.from_pretrained(model, roles=roles, policy=policy, lora=lora, seed=seed, device=device, dtype=dtype,
                                       thinking=thinking or False)
    if adapters is not None:
        loaded.load(adapters)
    return loaded


def _eval_engine(args: argparse.Namespace, env_kwargs: dict[str, Any], user_error: type[Exception]) -> tuple[Any, Any]:
    from llm_marl.engines import make_engine
    from llm_marl_envs.registry import make_raw

    # The environment's roles, built once: the api engine needs them only for --thinking-roles.
    roles = list(make_raw(args.env, **env_kwargs).possible_agents) if args.engine != "api" or args.thinking_roles else []
    if args.thinking_roles is not None:
        from llm_marl.policies import parse_thinking

        try:
            args.thinking = parse_thinking(bool(args.thinking), args.thinking_roles, roles)
        except ValueError as exc:
            raise user_error(str(exc)) from None
    if args.engine == "api":
        from llm_marl.cli import make_api_engine

        return make_api_engine(args, "--engine api"), None
    try:
        if args.adapters is not None:
            from llm_marl.policies import saved_set_folder

            args.adapters = str(saved_set_folder(args.adapters))  # a run directory stands for its final adapters
        args.model = args.model or adapters_base_model(args.adapters) or ModelConfig.model
        if args.adapters is None:
            from llm_marl.policies import parse_policy

            parse_policy(args.policy, roles)  # before the model loads
        if args.engine == "vllm":
            require_vllm()  # before the model loads
            if args.adapters is not None:
                from llm_marl.engines.vllm import lora_rank_slot
                from llm_marl.policies import read_manifest

                lora_rank_slot(read_manifest(Path(args.adapters), "--adapters")[1].r,
                               source=f"--adapters {args.adapters} of LoRA rank", fix="use --engine hf")
        from llm_marl.models import resolve_device

        # vLLM holds the weights it samples with; its policy set only writes adapter folders, so it stays on the CPU.
        device = "cpu" if args.engine == "vllm" else resolve_device(args.device)
        policy = load_policy(args.model, roles, policy=args.policy, adapters=args.adapters, seed=args.seed, device=device,
                             thinking=args.thinking, dtype=args.dtype)
    except (ValueError, FileNotFoundError, TypeError) as exc:
        raise user_error(str(exc)) from None
    if args.engine == "hf":
        engine = make_engine("hf", policy, seed=args.seed)
        dtype = str(policy.model.get_base_model().dtype).removeprefix("torch.")
    else:
        engine = make_engine("vllm", policy_set=policy, dtype=args.dtype)
        dtype = engine.dtype
    args.thinking, args.dtype = policy.thinking, dtype  # the result records what the prompts were and the weights' dtype
    # Without trained adapters the policy is the base model (adapters off).
    return engine, (policy if args.adapters else None)
