"""Every baseline row is a valid `llm-marl` command line."""

import pytest

from baselines import SEARCH_ENVS, SINGLE_AGENT_VARIANT, rows
from llm_marl.cli import build_parser


@pytest.mark.parametrize("env", sorted(SINGLE_AGENT_VARIANT))
def test_rows_parse(env):
    table = rows(env)
    assert [name for name, _ in table][0] == "single agent"
    for _, argv in table:
        args = build_parser(argv).parse_args(argv)
        assert args.command in ("train", "eval")


def test_unknown_env_names_the_fix():
    with pytest.raises(ValueError, match="available"):
        rows("chess")


@pytest.mark.parametrize("env", SEARCH_ENVS)
def test_search_rows_name_their_algorithms_and_parse(env):
    table = dict(rows(env))
    algos = {argv[argv.index("--algo") + 1] for argv in table.values() if "--algo" in argv}
    assert algos == ({"mhgpo"} if env == "mass" else {"grpo", "matpo", "sharp"})
    for argv in table.values():
        assert build_parser(argv).parse_args(argv).command in ("train", "eval")
