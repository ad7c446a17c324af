"""The 16-core rows of the environment and sandbox speed benchmarks, on a GPU machine that reaches no
package index: build here what those two scripts need there, and print the one command that runs them.

    python benchmarks/device_carry.py --pettingllms /tmp/peers_src

writes `.devcarry/` in the checkout (ignored by git through `.git/info/exclude`): `whl/`, the wheels
for that machine's Python (3.12: built by a `python3.12` of this machine, `--python`) of pettingzoo, gymnasium and reasoning-gym and of their
dependencies, less the packages its image already holds (`PRESENT`, which the wheels keep it from
replacing); and `peers/`, the PettingLLMs files the two scripts import, copied from the checkout given
(nothing of it is committed or installed into the project). The command it prints installs the wheels
into that machine's interpreter and runs `env_speed.py` and `sandbox_speed.py` there with the settings
of benchmarks.md's 16-core sections, writing each section under `$OUT`; send it with `.devcarry`
carried. The carry must stay under the 64 MiB that such a call takes; the script says its size.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["pettingzoo==1.27.0", "gymnasium==1.4.0", "reasoning-gym==0.1.25"]
PRESENT = {  # in the GPU machine's image (its interpreter has torch), at versions that fit: not carried
    "numpy", "sympy", "mpmath", "matplotlib", "pillow", "fonttools", "contourpy", "kiwisolver", "cycler",
    "pyparsing", "python-dateutil", "six", "packaging", "pyyaml", "typing-extensions",
    "cloudpickle", "rich", "markdown-it-py", "mdurl", "pygments",
}
PETTINGLLMS_FILES = [  # what env_speed.py's and sandbox_speed.py's peer workers import
    "pettingllms/__init__.py",
    "pettingllms/multi_agent_env/__init__.py",
    "pettingllms/multi_agent_env/stateful/env_state.py",
    "pettingllms/multi_agent_env/stateful/utils.py",
    "pettingllms/multi_agent_env/math/math_worker.py",
]
CARRY_LIMIT = 64 * 2**20
REMOTE_PYTHON = "/opt/torch/.venv/bin/python3"


def project(wheel: Path) -> str:
    """The normalised project name of a wheel file (PEP 503)."""
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def download(dest: Path, python: str) -> list[Path]:
    """The wheels of PACKAGES and their dependencies for `python`'s version, less PRESENT's. `pip wheel`
    rather than `pip download --platform`: some of reasoning-gym's dependencies (cellpylib) publish only
    a source archive, which it builds into a wheel."""
    try:
        subprocess.run([python, "-m", "pip", "wheel", "-q", "--disable-pip-version-check", "-w", str(dest), *PACKAGES],
                       check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SystemExit(f"building the wheels with {python} failed ({exc}); give --python an interpreter of the "
                         "GPU machine's Python version that has pip") from None
    for wheel in dest.glob("*.whl"):
        if project(wheel) in PRESENT:
            wheel.unlink()
    return sorted(dest.glob("*.whl"))


def copy_peers(src: Path, dest: Path) -> None:
    missing = [f for f in PETTINGLLMS_FILES if not (src / f).is_file()]
    if missing:
        raise SystemExit(f"{src} is not a PettingLLMs checkout: it lacks {', '.join(missing)}")
    for name in PETTINGLLMS_FILES:
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src / name, dest / name)


def exclude(name: str) -> None:
    """Keep `name` out of git in this checkout only (the carry is nothing to commit)."""
    path = ROOT / ".git" / "info" / "exclude"
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = path.read_text().splitlines() if path.exists() else []
    if f"/{name}/" not in lines:
        path.write_text("\n".join([*lines, f"/{name}/"]) + "\n")


def remote_command(carry: str, python: str = REMOTE_PYTHON) -> str:
    """What the GPU machine runs: install the carried wheels (pip keeps what the image has), then both
    benchmarks with benchmarks.md's 16-core settings. The sandbox reference's `python` is a bare venv
    of the same interpreter, as PettingLLMs runs its programs in a venv of its own."""
    names = " ".join(p.split("==")[0] for p in PACKAGES)
    return (f"export PYTHONUNBUFFERED=1; P={python}; "
            f"$P -m pip install -q --disable-pip-version-check --no-index --find-links {carry}/whl {names} || exit; "
            f"$P -m venv --without-pip /tmp/pv || exit; nproc; "
            f"$P benchmarks/env_speed.py --base 6f3db78 --rounds 15 --peers $P --pettingllms $PWD/{carry}/peers "
            f"--write $OUT/env.md; "
            f"$P benchmarks/sandbox_speed.py --base 'c25bd86~1' --rounds 9 --calls 60 --peers /tmp/pv/bin/python "
            f"--pettingllms $PWD/{carry}/peers --write $OUT/sandbox.md")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pettingllms", metavar="SRC", required=True, type=Path,
                    help="a PettingLLMs checkout (git clone https://github.com/pettingllms-ai/PettingLLMs)")
    ap.add_argument("--python", default="python3.12", help="an interpreter of the GPU machine's Python version, "
                    "with pip, that builds the wheels (default %(default)s)")
    ap.add_argument("--out", default=".devcarry", help="the carry folder, relative to the checkout (default %(default)s)")
    args = ap.parse_args()
    out = ROOT / args.out
    if out.exists():
        shutil.rmtree(out)
    (out / "whl").mkdir(parents=True)
    copy_peers(args.pettingllms, out / "peers")
    wheels = download(out / "whl", args.python)
    exclude(args.out)
    size = sum(f.stat().st_size for f in out.rglob("*") if f.is_file())
    print(f"{out}: {len(wheels)} wheels ({', '.join(project(w) for w in wheels)}) and {len(PETTINGLLMS_FILES)} "
          f"PettingLLMs files, {size / 2**20:.1f} MiB" + (" (over the 64 MiB a call carries)" if size > CARRY_LIMIT else ""))
    print(f"carry: [{args.out!r}]\ncommand:\n{remote_command(args.out)}")


if __name__ == "__main__":
    main()
