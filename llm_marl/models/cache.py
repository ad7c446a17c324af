"""The on-disk cache of built-in models, safe against concurrent builders.

A built-in model is built into a temporary folder next to its final place and renamed into place
in one step (`os.rename` is atomic on one filesystem), so a reader never sees a half-written model
and a builder killed midway leaves only a `.tmp-*` folder behind. A per-model `flock` makes a
second process wait for the first build instead of repeating it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX: the atomic rename alone still protects readers
    fcntl = None  # type: ignore[assignment]

CACHE_ENV = "LLM_MARL_CACHE"


class CacheError(ValueError):
    """The cache folder cannot be made or written; the message names the fix."""


def cache_root() -> Path:
    """`$LLM_MARL_CACHE`, else `~/.cache/llm-marl`."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "llm-marl").expanduser()


def _writable_folder(path: Path) -> Path:
    """`path`, made if missing, or a `CacheError` naming the fix (a read-only home, a mistyped variable)."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        why = None if os.access(path, os.W_OK | os.X_OK) else "not writable"
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
    if why:
        raise CacheError(f"cannot write the model cache at {path} ({why}); set {CACHE_ENV} to a writable folder")
    return path


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    with open(path, "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            if fcntl is not None:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def cached_build(key: str, build: Callable[[Path], None]) -> Path:
    """The folder `<cache>/models/<key>`, calling `build(tmp_folder)` once if it does not exist yet."""
    final = cache_root() / "models" / key
    if final.is_dir():
        return final
    with _file_lock(_writable_folder(final.parent) / f".{key}.lock"):
        if final.is_dir():  # another process built it while we waited
            return final
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.tmp-", dir=final.parent))
        try:
            build(tmp)
            os.rename(tmp, final)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return final
