"""Every baseline row is a valid `llm-marl` command line."""

import pytest

from baselines import SINGLE_AGENT_VARIANT, rows
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
