"""`llm-marl report RUN [RUN...]`: one self-contained HTML page per run or comparison.

    llm-marl report runs/my-run                       # -> runs/my-run/report.html
    llm-marl report runs/a runs/b --out compare.html  # both runs on the same charts

The page has no scripts and loads nothing: charts are inline SVG. It shows learning curves per role
(mean step reward, success rate, groups with reward variance, approximate KL, clip fraction,
reply tokens), the step time by part (`llm_marl.step_time`), the held-out evaluation before and
after training when the run has one (`eval_before.json`, `eval_after.json`), and a few sampled
replies of the last step with their reward, credit and advantage (`trajectories/`).
"""

from __future__ import annotations

import argparse
import html
import json
import math
import os
from pathlib import Path
from typing import Any

from llm_marl.step_time import PARTS

COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
DASHES = ("", "8 4", "2 3")
"""Line patterns: the series after the first len(COLORS) repeat the colours, dashed (a comparison has many lines)."""
LEGEND_ROW = 14
MARKERS = 100
"""A line of more points has no marker on each: they would overlap, and make the page of a long run tens of MB."""
CHARTS = (
    # (title, y label, metric key prefix; "*" is a role or an adapter, the series name)
    ("Mean step reward per role", "reward", "reward/reward/*"),
    ("Success rate (sampled episodes)", "fraction", "reward/success_rate"),
    ("Groups with reward variance", "fraction of groups", "signal/frac_groups_with_variance"),
    ("Approximate KL to the sampling policy, per adapter", "KL (k3)", "loss/*/approx_kl"),
    ("Clip fraction per adapter", "fraction of tokens", "loss/*/clip_frac"),
    ("Reply tokens per role", "tokens", "perf/response_tokens/*"),
    # A tuple: several metrics on one chart, each line named after its key.
    ("Step time by part (they add up to the step)", "seconds", tuple(f"perf/{part}_s" for part in PARTS)),
)
SAMPLES = 6
"""Sampled replies shown per run (from its last trajectories file)."""
REPLY_CHARS = 600
"""Characters shown of each sampled reply; a longer one says how many more its trajectories file holds."""


def _match(pattern: str, key: str) -> str | None:
    """The `*` part of `key` under `pattern` ("" for a pattern without `*`); None when it does not match."""
    if "*" not in pattern:
        return "" if key == pattern else None
    head, tail = pattern.split("*")
    if key.startswith(head) and key.endswith(tail) and len(key) > len(head) + len(tail):
        middle = key[len(head):len(key) - len(tail)]
        return middle if "/" not in middle else None
    return None


def series(runs: dict[str, list[dict[str, Any]]], pattern: str | tuple[str, ...]) -> dict[str, list[tuple[float, float]]]:
    """{label: [(step, value), ...]} of every metric matching `pattern` (or each of a tuple of patterns), in every run."""
    out: dict[str, list[tuple[float, float]]] = {}
    if isinstance(pattern, tuple):
        for key in pattern:
            name = key.rsplit("/", 1)[-1]
            for label, points in series(runs, key).items():
                out[f"{label} · {name}" if len(runs) > 1 else name] = points
        return out
    for run_name, history in runs.items():
        for record in history:
            for key, value in record.items():
                part = _match(pattern, key)
                if part is None or not isinstance(value, (int, float)) or not math.isfinite(value):
                    continue
                label = " · ".join(x for x in ((run_name if len(runs) > 1 else ""), part) if x) or pattern
                out.setdefault(label, []).append((float(record["step"]), float(value)))
    return out


def svg_chart(title: str, ylabel: str, lines: dict[str, list[tuple[float, float]]], width: int = 560, height: int = 260) -> str:
    """A line chart as inline SVG (no scripts); `class="empty"` when there is nothing to draw."""
    left, right, top, bottom = 56, 12, 28, 40
    points = [p for line in lines.values() for p in line]
    height = max(height, top + 6 + LEGEND_ROW * len(lines) + bottom)  # room for every legend entry
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart{" empty" if not points else ""}" width="{width}" '
             f'height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{html.escape(title)}">',
             f'<text x="{width / 2}" y="16" text-anchor="middle" font-size="13" font-weight="bold">{html.escape(title)}</text>']
    if not points:
        parts.append(f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#888">not logged by this run</text></svg>')
        return "".join(parts)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(xs)
    y0, y1 = min(ys), max(ys)
    if x0 == x1:
        x0, x1 = x0 - 1, x1 + 1
    if y0 == y1:
        y0, y1 = y0 - 0.5, y1 + 0.5
    pad = (y1 - y0) * 0.05
    y0, y1 = y0 - pad, y1 + pad
    sx = lambda x: left + (x - x0) / (x1 - x0) * (width - left - right)  # noqa: E731
    sy = lambda y: top + (y1 - y) / (y1 - y0) * (height - top - bottom)  # noqa: E731
    parts.append(f'<rect x="{left}" y="{top}" width="{width - left - right}" height="{height - top - bottom}" fill="none" stroke="#ccc"/>')
    for i in range(5):
        y = y0 + (y1 - y0) * i / 4
        parts.append(f'<text x="{left - 4}" y="{sy(y) + 4:.1f}" text-anchor="end" font-size="10">{y:.3g}</text>')
        parts.append(f'<line x1="{left}" x2="{width - right}" y1="{sy(y):.1f}" y2="{sy(y):.1f}" stroke="#eee"/>')
    for x in sorted(set(xs))[:: max(1, len(set(xs)) // 8)]:
        parts.append(f'<text x="{sx(x):.1f}" y="{height - bottom + 14}" text-anchor="middle" font-size="10">{x:g}</text>')
    parts.append(f'<text x="{width / 2}" y="{height - 6}" text-anchor="middle" font-size="11">step</text>')
    parts.append(f'<text x="12" y="{height / 2}" text-anchor="middle" font-size="11" transform="rotate(-90 12 {height / 2})">'
                 f'{html.escape(ylabel)}</text>')
    for i, (label, line) in enumerate(sorted(lines.items())):
        color = COLORS[i % len(COLORS)]
        dash = DASHES[i // len(COLORS) % len(DASHES)]
        style = f'stroke="{color}" stroke-width="2.5"' + (f' stroke-dasharray="{dash}"' if dash else "")
        line = sorted(line)
        coords = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in line)
        parts.append(f'<polyline class="series" fill="none" {style} points="{coords}"/>')
        if len(line) <= MARKERS:
            parts.extend(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="3.5" fill="{color}"/>' for x, y in line)
        row = top + 11 + LEGEND_ROW * i
        parts.append(f'<line class="key" x1="{left + 6}" x2="{left + 24}" y1="{row}" y2="{row}" {style}/>'
                     f'<text x="{left + 28}" y="{row + 4}" font-size="11">{html.escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def eval_table(name: str, run_dir: Path) -> str:
    paths = [run_dir / "eval_before.json", run_dir / "eval_after.json"]
    if not any(path.exists() for path in paths):
        return f"<p class='noeval'>{html.escape(name)}: no held-out evaluation (train with --eval-episodes N).</p>"
    before, after = map(_read_json, paths)
    # A file that is there but unreadable is said, not shown as an evaluation the run never had.
    damaged = "".join(f"<p class='noeval'>{html.escape(name)}: {path.name} is damaged (not a JSON object); not shown.</p>"
                      for path, e in zip(paths, (before, after)) if path.exists() and not isinstance(e, dict))
    cols = [(label, e) for label, e in (("before", before), ("after", after)) if isinstance(e, dict)]
    if not cols:
        return damaged
    roles = sorted({r for _, e in cols for r in (e.get("mean_reward") or {})})
    rows = [("success rate", [e.get("success_rate") for _, e in cols]), ("episodes", [e.get("episodes") for _, e in cols])]
    rows += [(f"mean reward · {r}", [(e.get("mean_reward") or {}).get(r) for _, e in cols]) for r in roles]
    head = "".join(f"<th>{label}</th>" for label, _ in cols)
    body = "".join(f"<tr><td>{html.escape(k)}</td>" + "".join(f"<td>{_fmt(v)}</td>" for v in vals) + "</tr>" for k, vals in rows)
    return damaged + (f"<table class='eval'><caption>{html.escape(name)}: held-out test split, greedy</caption><tr><th></th>{head}</tr>"
                      f"{body}</table>")


def _fmt(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else html.escape(str(value)) if value is not None else "–"


_CONTROLS = {c: 0x2400 + c for c in range(32) if chr(c) not in "\t\n\r"} | {0x7F: 0x2421}
"""Control characters as their Unicode pictures (ESC as ␛): a browser drops NUL and draws the others as one same box."""


def _reply(text: str) -> str:
    """The reply, escaped; cut at REPLY_CHARS saying so (the answer that earned the reward is often at its end)."""
    text = text.translate(_CONTROLS)
    if len(text) <= REPLY_CHARS:
        return html.escape(text)
    return html.escape(text[:REPLY_CHARS]) + f"<i>… ({len(text) - REPLY_CHARS} more characters)</i>"


def sample_rows(name: str, run_dir: Path, k: int = SAMPLES) -> str:
    files = sorted((run_dir / "trajectories").glob("step_*.jsonl"))
    if not files:
        return f"<p>{html.escape(name)}: no trajectories.</p>"
    records = []
    for line in files[-1].read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict):  # a damaged line that is still JSON is no reply either
            records.append(record)
    # The largest |advantage| first: the replies that moved the policy most.
    records.sort(key=lambda r: -abs(float(r.get("advantage") or 0.0)))
    rows = "".join(
        f"<tr><td>{html.escape(str(r.get('role')))}</td><td>{r.get('turn')}</td><td>{_fmt(r.get('reward'))}</td>"
        f"<td>{_fmt(r.get('credit'))}</td><td>{_fmt(r.get('advantage'))}</td>"
        f"<td><pre>{_reply(str(r.get('text', '')))}</pre></td></tr>" for r in records[:k])
    return (f"<table class='samples'><caption>{html.escape(name)}: {min(k, len(records))} sampled replies of "
            f"{html.escape(files[-1].name)} (largest |advantage| first)</caption>"
            f"<tr><th>role</th><th>turn</th><th>reward</th><th>credit</th><th>advantage</th><th>reply</th></tr>{rows}</table>")


def render(run_dirs: list[Path]) -> str:
    """The HTML page of one run or a comparison of several."""
    from llm_marl.runs import RunDir

    names = [Path(os.path.abspath(d)).name for d in run_dirs]  # "." or ".." named by the folder they are
    if len(set(names)) < len(names):
        names = [str(d) for d in run_dirs]
    histories = {n: RunDir(d).metrics() for n, d in zip(names, run_dirs)}
    charts = "".join(svg_chart(title, ylabel, series(histories, pattern)) for title, ylabel, pattern in CHARTS)
    evals = "".join(eval_table(n, d) for n, d in zip(names, run_dirs))
    samples = "".join(sample_rows(n, d) for n, d in zip(names, run_dirs))
    configs = "".join(f"<details><summary>{html.escape(n)}: config.json</summary><pre>"
                      f"{html.escape((d / 'config.json').read_text(errors='replace') if (d / 'config.json').is_file() else '(none)')}</pre></details>"
                      for n, d in zip(names, run_dirs))
    title = "llm-marl report: " + ", ".join(names)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 24px; color: #222; }}
.charts {{ display: flex; flex-wrap: wrap; gap: 12px; }}
table {{ border-collapse: collapse; margin: 12px 0; }}
td, th {{ border: 1px solid #ddd; padding: 4px 8px; vertical-align: top; font-size: 13px; }}
caption {{ text-align: left; font-weight: bold; padding: 4px 0; }}
pre {{ white-space: pre-wrap; max-width: 640px; margin: 0; font-size: 12px; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{len(run_dirs)} run(s): {", ".join(f"{html.escape(n)} ({len(h)} steps)" for n, h in histories.items())}</p>
<h2>Learning curves</h2><div class="charts">{charts}</div>
<h2>Held-out evaluation</h2>{evals}
<h2>Sampled replies</h2>{samples}
<h2>Configuration</h2>{configs}
</body></html>
"""


def cmd_report(args: argparse.Namespace) -> int:
    from llm_marl.cli import UserError, check_output_file, write_output_file

    run_dirs = [Path(r) for r in args.runs]
    for d in run_dirs:
        if not (d / "metrics.jsonl").is_file():
            raise UserError(f"{d} has no metrics.jsonl: pass run directories written by `llm-marl train`")
    out = check_output_file(args.out if args.out else (run_dirs[0] / "report.html" if len(run_dirs) == 1 else "report.html"),
                            "--out")
    from llm_marl.runs import RunDirError

    try:
        page = render(run_dirs)
    except RunDirError as exc:
        raise UserError(str(exc)) from None
    write_output_file(out, page, "--out")
    print(out)
    return 0


def add_command(sub: Any) -> None:
    p = sub.add_parser("report", help="an HTML page of one or more runs: learning curves, evaluations, sampled replies",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("runs", nargs="+", metavar="RUN", help="run directories (several: compared on the same charts)")
    p.add_argument("--out", default=None, help="the HTML file (default: RUN/report.html for one run, ./report.html for several)")
    p.set_defaults(func=cmd_report)
