"""`llm-marl report` (issue 13, item 1): a self-contained HTML page with learning curves per role,
the before/after evaluation and sampled replies with credit and advantage, rendered in headless
Chromium when it is installed (.ci/run installs Debian's `chromium`)."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess

import pytest

from llm_marl.cli import main
from llm_marl.report import COLORS
from llm_marl.step_time import PARTS
from tests.test_cli import README
from tests.test_progress import ARGS


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    for name, policy in (("shared-run", "shared"), ("per-role-run", "per-role")):
        assert main(["train", *ARGS, "--steps", "2", "--eval-episodes", "1", "--policy", policy, "--report-to", "none",
                     "--out-dir", str(root), "--run-name", name]) == 0
    return root / "shared-run", root / "per-role-run"


def test_readme_report_command_writes_a_self_contained_page(runs, capsys):
    run = runs[1]
    command = re.search(r"`(llm-marl report runs/<run>)`", README).group(1)
    assert main(shlex.split(command.replace("runs/<run>", shlex.quote(str(run))))[1:]) == 0
    page = (run / "report.html").read_text()
    assert capsys.readouterr().out.strip() == str(run / "report.html")
    assert "<script" not in page and not re.search(r"(src|href)=", page), "the page must load nothing"
    charts = re.findall(r'<svg[^>]*class="chart[^"]*"[^>]*>.*?</svg>', page, re.S)
    assert len(charts) == 7
    drawn = [c for c in charts if 'class="chart empty"' not in c]
    assert len(drawn) >= 4
    for chart in drawn:
        for points in re.findall(r'<polyline class="series"[^>]*points="([^"]+)"', chart):
            assert len(points.split()) == 2  # one point per step
    reward = next(c for c in charts if "Mean step reward per role" in c)
    assert ">planner<" in reward and ">tool<" in reward  # a curve per role
    step_time = next(c for c in charts if "Step time by part" in c)
    assert all(f">{part}_s<" in step_time for part in PARTS)  # a curve per part of the step
    assert "<th>before</th><th>after</th>" in page and "success rate" in page
    samples = re.search(r"<table class='samples'>.*?</table>", page, re.S).group(0)
    assert "<th>credit</th><th>advantage</th>" in samples and samples.count("<tr>") >= 2


def test_report_compares_runs(runs, tmp_path, capsys):
    out = tmp_path / "compare.html"
    assert main(["report", *map(str, runs), "--out", str(out)]) == 0
    page = out.read_text()
    assert "shared-run · planner" in page and "per-role-run · tool" in page
    assert main(["report", str(tmp_path)]) == 2
    assert "has no metrics.jsonl" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_report_renders_its_charts_in_headless_chromium(runs, tmp_path_factory, capsys):
    import numpy as np
    from PIL import Image

    run = runs[1]
    assert main(["report", str(run)]) == 0
    shot = run / "report.png"  # kept next to the page, in the test's temp dir
    profile = tmp_path_factory.mktemp("chromium-profile")
    proc = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           f"--user-data-dir={profile}", "--window-size=1280,1400", f"--screenshot={shot}",
                           (run / "report.html").as_uri()], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0 and shot.is_file(), proc.stderr[-2000:]
    image = Image.open(shot).convert("RGB")
    assert image.size == (1280, 1400)
    pixels = np.asarray(image).reshape(-1, 3)
    counts = {c: int((pixels == [int(c[i:i + 2], 16) for i in (1, 3, 5)]).all(axis=1).sum()) for c in COLORS[:2]}
    # Both series colours are drawn (curves and markers), far beyond the legend keys (under 100 px each).
    assert all(n > 1000 for n in counts.values()), counts


@pytest.mark.parametrize("where", ["folder", "missing"])
def test_an_out_that_cannot_be_written_is_one_line_before_the_page_is_built(runs, tmp_path, capsys, monkeypatch, where):
    import llm_marl.report

    monkeypatch.setattr(llm_marl.report, "render", lambda run_dirs: pytest.fail("the page was built"))
    out = tmp_path if where == "folder" else tmp_path / "no-such-folder" / "r.html"
    assert main(["report", str(runs[0]), "--out", str(out)]) == 2
    said = "it is a folder" if where == "folder" else f"{out.parent} is not a folder"
    assert capsys.readouterr().err.strip() == f"llm-marl: error: --out {out}: {said}; pass a file in a writable folder"


def test_an_out_whose_write_fails_is_one_line(runs, tmp_path, capsys, monkeypatch):
    from pathlib import Path

    def fail(self, text, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", fail)
    assert main(["report", str(runs[0]), "--out", str(tmp_path / "r.html")]) == 2
    assert capsys.readouterr().err.strip() == f"llm-marl: error: cannot write --out {tmp_path / 'r.html'} (No space left on device)"


def _hand_run(root, name="hand", steps=1, roles=("planner",), replies=("ok",)):
    """A run directory as `llm-marl train` leaves one, built by hand: metrics per step and the last step's replies."""
    import json

    run = root / name
    (run / "trajectories").mkdir(parents=True)
    (run / "metrics.jsonl").write_text("".join(
        json.dumps({"step": s, "reward/success_rate": 0.5, **{f"reward/reward/{r}": s / steps for r in roles},
                    **{f"perf/{part}_s": 0.1 for part in PARTS}}) + "\n" for s in range(1, steps + 1)))
    (run / "trajectories" / f"step_{steps:06d}.jsonl").write_text("".join(
        json.dumps({"role": roles[i % len(roles)], "turn": 0, "reward": 1.0, "credit": 1.0, "advantage": 1.0 - i / 10,
                    "text": text}) + "\n" for i, text in enumerate(replies)))
    return run


def test_a_long_sampled_reply_says_it_is_cut(tmp_path):
    """A reply was cut at 600 characters without a sign, so the page showed the start of a long reply as if it were all
    of it (the answer that earned its reward is often at the end)."""
    shown = 600  # llm_marl.report.REPLY_CHARS
    long = "<b>&" + "x" * (shown + 100) + "THE ANSWER"
    run = _hand_run(tmp_path, replies=(long, "short </pre><script>alert(1)</script>"))
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    cells = re.findall(r"<pre>(.*?)</pre></td>", page, re.S)
    assert cells[0].startswith("&lt;b&gt;&amp;xxx") and "THE ANSWER" not in cells[0]
    assert cells[0].endswith(f"… ({len(long) - shown} more characters)</i>")
    assert cells[1] == "short &lt;/pre&gt;&lt;script&gt;alert(1)&lt;/script&gt;" and "<script" not in page


def test_every_line_of_a_crowded_comparison_chart_has_its_own_look_and_legend_entry(tmp_path):
    """Three runs put 18 lines on the step-time chart: with 8 colours, lines of different runs and parts were drawn
    alike (and the legend said the first one's name), and the legend ran past the chart's bottom, where its last
    entries were cut off."""
    runs = [_hand_run(tmp_path, name, steps=2) for name in ("a", "b", "c")]
    assert main(["report", *map(str, runs), "--out", str(tmp_path / "compare.html")]) == 0
    page = (tmp_path / "compare.html").read_text()
    chart = next(c for c in re.findall(r"<svg.*?</svg>", page, re.S) if "Step time by part" in c)
    height = float(re.search(r'height="(\d+)"', chart).group(1))
    looks = re.findall(r'<polyline class="series" fill="none" (stroke="[^"]+" stroke-width="[^"]+"(?: stroke-dasharray="[^"]+")?)',
                       chart)
    keys = re.findall(r'<line class="key" [^>]*?y1="([\d.]+)"[^>]*?(stroke="[^"]+" stroke-width="[^"]+"(?: stroke-dasharray="[^"]+")?)'
                      r'/><text [^>]*>([^<]+)</text>', chart)
    assert len(looks) == len(set(looks)) == 3 * len(PARTS)
    assert [look for _, look, _ in keys] == looks  # each legend entry drawn as its line is
    assert {name for _, _, name in keys} == {f"{run} · {part}_s" for run in "abc" for part in PARTS}
    assert all(float(y) < height - 40 for y, _, _ in keys)  # above the axis's labels, inside the chart


def test_the_page_is_utf_8_in_any_locale_and_with_any_reply(tmp_path):
    """The page says it is UTF-8 but was written in the locale's encoding: in a locale that is not UTF-8 (here ASCII, with
    Python's UTF-8 mode off) writing it raised UnicodeEncodeError at its first '·', and so did a reply holding a lone
    surrogate (a `\\ud800` in a trajectories file) in any locale."""
    import os
    import sys

    run = _hand_run(tmp_path, replies=("ünï 😀 – done", "half a pair: \ud800"))
    env = {**os.environ, "LC_ALL": "C", "LANG": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
    proc = subprocess.run([sys.executable, "-m", "llm_marl.cli", "report", str(run)], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    page = (run / "report.html").read_text(encoding="utf-8")
    assert "<pre>ünï 😀 – done</pre>" in page and "<pre>half a pair: ?</pre>" in page


def test_damaged_files_in_a_run_directory_leave_the_page_whole(tmp_path):
    """A trajectories line that was JSON but no object (`[1, 2]`) raised AttributeError, and a config.json with bytes
    that are not UTF-8 raised UnicodeDecodeError: a traceback instead of the page."""
    run = _hand_run(tmp_path, replies=("kept",))
    with open(run / "trajectories" / "step_000001.jsonl", "a") as f:
        f.write("[1, 2]\n7\n")
    (run / "config.json").write_bytes(b'\xff{"run": {"env": "plan_path"}}')
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    assert "1 sampled replies of step_000001.jsonl" in page and "<pre>kept</pre>" in page
    assert '\ufffd{&quot;run&quot;: {&quot;env&quot;: &quot;plan_path&quot;}}' in page


@pytest.mark.parametrize("damaged", [("eval_after.json",), ("eval_before.json", "eval_after.json")])
def test_a_damaged_evaluation_file_is_said_not_taken_for_none(tmp_path, damaged):
    """A damaged eval_after.json was left out silently (the page showed the evaluation before training only, as for a
    run stopped before its end), and with both damaged the page said the run had no evaluation: train with
    --eval-episodes N."""
    import json

    run = _hand_run(tmp_path)
    for name in ("eval_before.json", "eval_after.json"):
        (run / name).write_text('{"episodes": 2, "succ' if name in damaged else
                                json.dumps({"episodes": 2, "success_rate": 0.5, "mean_reward": {"planner": 0.25}}))
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    assert all(f"hand: {name} is damaged (not a JSON object); not shown." in page for name in damaged)
    assert "--eval-episodes" not in page and ("<th>before</th>" in page) == (len(damaged) == 1)


def test_the_page_of_a_long_run_draws_its_lines_without_a_marker_per_step(tmp_path):
    """Every point of every line had a marker: 5000 steps made a 4 MB page (50000 steps: 39 MB) of markers that
    overlapped into a thick line anyway."""
    run = _hand_run(tmp_path, steps=150, roles=("planner", "tool"))
    assert main(["report", str(run)]) == 0
    page = (run / "report.html").read_text()
    reward = next(c for c in re.findall(r"<svg.*?</svg>", page, re.S) if "Mean step reward per role" in c)
    lines = re.findall(r'<polyline class="series"[^>]*points="([^"]+)"', reward)
    assert [len(points.split()) for points in lines] == [150, 150] and "<circle" not in page
    short = _hand_run(tmp_path, name="short", steps=3)
    assert main(["report", str(short)]) == 0
    assert (short / "report.html").read_text().count("<circle") > 0  # a short run keeps its markers


def test_a_run_given_as_dot_is_named_by_its_folder(tmp_path, monkeypatch):
    """`llm-marl report .` inside a run directory named the run "" everywhere ("llm-marl report: ", "1 run(s):  (1
    steps)"), and `..` named it ".."; compared with another run, its lines were those without a run's name."""
    run = _hand_run(tmp_path)
    other = _hand_run(tmp_path, name="other")
    monkeypatch.chdir(run / "trajectories")
    assert main(["report", "..", str(other), "--out", str(tmp_path / "compare.html")]) == 0
    monkeypatch.chdir(run)
    assert main(["report", "."]) == 0
    assert "<h1>llm-marl report: hand</h1>" in (run / "report.html").read_text()
    page = (tmp_path / "compare.html").read_text()
    assert "<h1>llm-marl report: hand, other</h1>" in page and ">hand · planner<" in page


def test_control_characters_of_a_reply_are_shown(tmp_path):
    """A reply's control characters went into the page as they were: the browser dropped NUL and drew \\x01, \\x1b and
    \\x7f as one same box, so a reply of them read as empty or unreadable."""
    run = _hand_run(tmp_path, replies=("a\x00b\x01c\x1b[31md\x7fe\x0cf\tg\nh",))
    assert main(["report", str(run)]) == 0
    assert "<pre>a␀b␁c␛[31md␡e␌f\tg\nh</pre>" in (run / "report.html").read_text()
