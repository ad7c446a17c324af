"""versions.json: what software and machine produced a run, and a resume that runs on other versions."""

from __future__ import annotations

import json
import platform

import pytest
import torch

from llm_marl import __version__
from llm_marl.cli import main
from llm_marl.provenance import changes, record, source_commit, versions


def test_version_names_the_release_and_the_commit(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"llm-marl {__version__}") and line.endswith(f", Python {platform.python_version()}")
    commit = source_commit()
    if commit is not None:  # a git checkout (CI's and this repository's): the line names its commit
        assert f"(git {commit['commit'][:12]}" in line


def test_versions_record_the_packages_environment_and_device():
    now = versions("plan_path_v2", "cpu")
    assert now["llm_marl"] == __version__ and now["environment"] == "plan_path_v2" and now["device"] == "cpu"
    assert now["packages"]["torch"] == torch.__version__ and "transformers" in now["packages"]
    assert now["python"].count(".") == 2 and now["cpu"]


def test_a_resume_on_other_versions_says_so_and_adds_them(tmp_path):
    said = []
    first = versions("plan_path_v2", "cpu")
    record(tmp_path, first, said.append)
    saved = json.loads((tmp_path / "versions.json").read_text())
    assert saved == {**first, "resumes": []} and not said

    record(tmp_path, first, said.append, resumed_at=3)  # the same software: nothing to say or add
    assert not said and json.loads((tmp_path / "versions.json").read_text())["resumes"] == []

    upgraded = {**first, "packages": {**first["packages"], "torch": "99.0"}}
    record(tmp_path, upgraded, said.append, resumed_at=5)
    assert said == [f"resumed with other software than {tmp_path} had: torch {torch.__version__} -> 99.0 "
                    "(recorded in versions.json)"]
    resumes = json.loads((tmp_path / "versions.json").read_text())["resumes"]
    assert [(r["step"], r["packages"]["torch"]) for r in resumes] == [(5, "99.0")]

    record(tmp_path, upgraded, said.append, resumed_at=7)  # compared with the versions it last ran with
    assert len(said) == 1 and len(json.loads((tmp_path / "versions.json").read_text())["resumes"]) == 1


def test_a_damaged_versions_file_is_written_again_on_resume(tmp_path):
    (tmp_path / "versions.json").write_text("{not json")
    record(tmp_path, versions(), print, resumed_at=2)
    assert json.loads((tmp_path / "versions.json").read_text())["resumes"] == []


def test_changes_in_words():
    before = {"llm_marl": "0.1.0", "git": {"commit": "a" * 40, "dirty": False}, "packages": {"torch": "2.13.0", "vllm": "0.1"}}
    after = {"llm_marl": "0.1.0", "git": {"commit": "b" * 40, "dirty": True}, "packages": {"torch": "2.13.0", "ray": "2.6"}}
    assert changes(before, after) == [f"git {'a' * 12} -> {'b' * 12} with uncommitted changes", "ray absent -> 2.6",
                                      "vllm 0.1 -> absent"]
