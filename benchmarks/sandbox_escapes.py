"""Sandbox escapes: how many attempts of the adversarial corpus the sandbox contains.

    python benchmarks/sandbox_escapes.py                          # print the table
    python benchmarks/sandbox_escapes.py --write benchmarks.md    # and record it

Runs every attempt of `tests/support/sandbox_corpus.py` (file system, process, network,
introspection, ctypes and memory, resources, signals, persistence) twice: with every layer this
machine provides, and with the kernel layers off (no namespaces, Landlock or seccomp: the audit
hook alone, with resource limits and dropped privileges). All attempts target this machine only
(loopback at most). The test suite asserts the same verdicts (`tests/test_sandbox_escapes.py`).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout: python benchmarks/...

from benchmarks._report import write_section  # noqa: E402
from tests.support.sandbox_corpus import CATEGORIES, LIMITS, corpus_sandbox, results_by_category, run_corpus  # noqa: E402

MODES = {"kernel layers on": True, "audit hook alone": False}


def measure() -> dict[str, dict]:
    """mode -> {"layers", "verdicts", "seconds"}."""
    out = {}
    for mode, kernel_layers in MODES.items():
        with corpus_sandbox(kernel_layers) as sandbox:
            layers = sandbox.isolation()
        start = time.perf_counter()
        verdicts = run_corpus(kernel_layers)
        out[mode] = {"layers": layers, "verdicts": verdicts, "seconds": time.perf_counter() - start}
    return out


def table(results: dict[str, dict]) -> str:
    """contained / tried, per category (rows) and mode (columns)."""
    counts = {mode: results_by_category(r["verdicts"]) for mode, r in results.items()}
    lines = ["| category | " + " | ".join(f"{m}: contained / tried" for m in MODES) + " |",
             "|---|" + "---:|" * len(MODES)]
    for category in CATEGORIES:
        lines.append(f"| {category} | " + " | ".join("{} / {}".format(*counts[m][category]) for m in MODES) + " |")
    totals = [tuple(sum(c[i] for c in counts[m].values()) for i in (0, 1)) for m in MODES]
    lines.append("| **all** | " + " | ".join(f"**{c} / {t}**" for c, t in totals) + " |")
    return "\n".join(lines)


def notes(results: dict[str, dict], load: tuple[float, float]) -> list[str]:
    out = [
        "An attempt is contained when nothing of it shows outside the run: no secret text or sandbox "
        "handle in its output, the secret file and the directory outside unchanged, no connection or "
        "datagram at the loopback and UNIX listeners, the canary process and the fork server alive, no "
        "process left, and an empty directory for the next run on the same worker (persistence attempts "
        "run a second program there that looks for what the first left). Statuses vary: most are "
        "`blocked`; where the kernel layers are on, some are refused by the kernel itself (`error`) "
        "and resource attempts end in `timeout`, `memory` or `output_limit`.",
        f"Limits: wall {LIMITS.wall_time_s} s, CPU {LIMITS.cpu_time_s} s, memory {LIMITS.memory_mb} MiB, "
        f"output {LIMITS.output_bytes} bytes, file {LIMITS.file_bytes} bytes; one worker per mode.",
    ]
    for mode, r in results.items():
        layers = ", ".join(f"{k}={v}" for k, v in r["layers"].items())
        escaped = [f"{name} ({v.status}: {v.why})" for name, v in r["verdicts"].items() if not v.contained]
        out.append(f"{mode} ({r['seconds']:.0f} s): {layers}. Not contained: {'; '.join(escaped) or 'none'}.")
    out.append(f"Load average (1 min) before / after: {load[0]:.2f} / {load[1]:.2f}.")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", metavar="PATH", help="also write the 'sandbox-escapes' section of this markdown file")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    results = measure()
    body = table(results) + "\n\n" + "\n\n".join(notes(results, (load_before, os.getloadavg()[0])))
    print(body)
    if args.write:
        command = shlex.join(["python", "benchmarks/sandbox_escapes.py", *(sys.argv[1:] if argv is None else argv)])
        write_section(args.write, "sandbox-escapes", "Sandbox: adversarial corpus, with and without the kernel layers",
                      command, body)


if __name__ == "__main__":
    main()
