"""Dataset rows as plain dicts, from a local file or folder or from the Hugging Face Hub.

Every dataset loader (math, code, search) reads its records through `read_rows(source)`, so each
accepts the same sources:

| source | how it is read |
|---|---|
| `FILE.jsonl` | one JSON object per line (blank lines skipped); a file starting with `[` is read as a JSON list |
| `FILE.json` | a JSON list of objects, an object holding exactly one such list, or one object |
| `FILE.parquet` | pyarrow; nested columns come back as dicts and lists |
| `FOLDER` written by `Dataset.save_to_disk` or `DatasetDict.save_to_disk` | `datasets.load_from_disk`; `FOLDER@test` picks a split of a DatasetDict |
| `NAME` or `OWNER/NAME`, optionally `:CONFIG` and `@SPLIT` (`openai/gsm8k:main@test`) | `datasets.load_dataset`, only when no such file or folder exists here |

A folder or Hub dataset with several splits needs `@SPLIT` (the error lists them). A Hub dataset
that still needs a loading script does not load with `datasets` 4 or later: download one of its
data files (JSONL, JSON or parquet) and pass that. Tables (parquet, `datasets`) have every column
in every row: their null cells are dropped, so a row reads like the JSON line it came from. Rows
come back in the order of the source, each labelled for error messages (`file.jsonl:3`,
`data.parquet: row 2`). `datasets` and `pyarrow` are imported only for parquet files, folders and
Hub ids (`pip install -e '.[datasets]'`), so the environments import without them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

FILE_SUFFIXES = (".jsonl", ".json", ".parquet")
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?(:[\w.-]+)?$")
_SPLIT_NAME = re.compile(r"^[\w.-]+$")
INSTALL = "pip install -e '.[datasets]'"


class DatasetNotFound(FileNotFoundError, ValueError):
    """No such local file or folder (and the name is not a Hub id). A ValueError too, so that callers
    reporting bad options one line at a time catch it with the rest."""


def read_rows(source: str | os.PathLike[str]) -> Iterator[tuple[str, Any]]:
    """(label, record) for every row of `source` (see the module docstring). Errors are ValueErrors
    of one line naming the source and the fix."""
    text = os.fspath(source)
    path = Path(text).expanduser()
    if path.exists():
        return _read_local(path, None)
    base, split = _split_suffix(text)
    if split is not None and Path(base).expanduser().exists():
        return _read_local(Path(base).expanduser(), split)
    if _looks_local(base) or not _HUB_ID.match(base):
        raise DatasetNotFound(f"dataset file not found: {text} does not exist; pass a .jsonl, .json or .parquet file, a "
                              "save_to_disk folder (FOLDER@SPLIT picks a split) or a Hub id such as openai/gsm8k:main@test")
    name, _, config = base.partition(":")
    return _rows_of(_load_hub(name, config or None, split), f"{text}")


def canonical(source: str | os.PathLike[str]) -> str:
    """`source` with a local path made absolute (its `@SPLIT` kept), so that it names the same data from
    any working directory; a Hub id as it is."""
    text = os.fspath(source)
    path = Path(text).expanduser()
    if path.exists():
        return str(path.resolve())
    base, split = _split_suffix(text)
    if split is not None and Path(base).expanduser().exists():
        return f"{Path(base).expanduser().resolve()}@{split}"
    return text


def _split_suffix(text: str) -> tuple[str, str | None]:
    base, sep, split = text.rpartition("@")
    if sep and base and _SPLIT_NAME.match(split):
        return base, split
    return text, None


def _looks_local(text: str) -> bool:
    """A name a Hub id cannot be: a file name, an absolute or relative path, more than one `/`."""
    return (text.lower().endswith(FILE_SUFFIXES) or text.startswith(("/", ".", "~")) or text.count("/") > 1
            or os.sep != "/" and os.sep in text)


def _read_local(path: Path, split: str | None) -> Iterator[tuple[str, Any]]:
    if path.is_dir():
        return _rows_of(_load_folder(str(path.resolve()), split), str(path) + (f"@{split}" if split else ""))
    if split is not None:
        raise ValueError(f"{path} is a file, which has no splits: drop '@{split}' (splits belong to save_to_disk folders "
                         "and Hub datasets)")
    if path.suffix.lower() == ".parquet":
        return _read_parquet(path)
    return _read_json(path)


def _read_json(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        text = path.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors and exports write one) is no data
    except UnicodeDecodeError as exc:  # else only the codec's words, without the file or the fix
        raise ValueError(f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason}); save it as UTF-8") from None
    stripped = text.lstrip()
    if stripped.startswith("[") or (stripped.startswith("{") and path.suffix.lower() == ".json"):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc}); use JSONL (one object per line) or a JSON list") from None
        if isinstance(data, dict):
            lists = [v for v in data.values() if isinstance(v, list)]
            if len(lists) == 1 and all(isinstance(r, dict) for r in lists[0]):
                data = lists[0]  # {"problems": [...]}: a list wrapped in an object
            else:
                data = [data]  # one record on its own
        return iter([(f"{path}: item {i}", item) for i, item in enumerate(data)])
    return _jsonl_lines(path, text)


def _jsonl_lines(path: Path, text: str) -> Iterator[tuple[str, Any]]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not a JSON object ({exc.msg}); each line must be one JSON object") from None
        yield f"{path}:{number}", record


def _read_parquet(path: Path) -> Iterator[tuple[str, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ValueError(f"reading {path} needs pyarrow: {INSTALL}") from None
    try:
        table = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises ArrowInvalid and friends for a damaged file
        raise ValueError(f"{path}: not a parquet file ({type(exc).__name__}: {_first_line(exc)}); write it with "
                         "Dataset.to_parquet or pyarrow.parquet.write_table") from None
    return _parquet_rows(path, table)


def _parquet_rows(path: Path, table: Any) -> Iterator[tuple[str, Any]]:
    index = 0
    for batch in table.iter_batches():
        for record in batch.to_pylist():
            yield f"{path}: row {index}", _present(record)
            index += 1


def _datasets_module() -> Any:
    try:
        import datasets
    except ImportError:
        raise ValueError(f"reading a save_to_disk folder or a Hub dataset needs the datasets package: {INSTALL}") from None
    return datasets


@lru_cache(maxsize=8)
def _load_folder(folder: str, split: str | None) -> Any:
    """The Dataset saved in `folder` (of `split` for a DatasetDict). Cached: environments built one per
    task share one memory-mapped table."""
    path = Path(folder)
    if not ((path / "dataset_dict.json").is_file() or (path / "state.json").is_file()):
        raise ValueError(f"{folder} is a folder but not one written by save_to_disk (no dataset_dict.json or "
                         "state.json): pass one of its .jsonl, .json or .parquet files instead")
    datasets = _datasets_module()
    try:
        loaded = datasets.load_from_disk(folder)
    except Exception as exc:  # datasets raises FileNotFoundError / ValueError subclasses of its own
        raise ValueError(f"{folder}: cannot read the save_to_disk folder ({type(exc).__name__}: {_first_line(exc)}); "
                         "save it again with save_to_disk") from None
    return _pick_split(loaded, split, folder)


def _pick_split(loaded: Any, split: str | None, label: str) -> Any:
    if not hasattr(loaded, "keys"):  # a single Dataset
        if split is not None:
            raise ValueError(f"{label} holds one dataset without splits: drop '@{split}'")
        return loaded
    names = list(loaded.keys())
    if split is None and len(names) == 1:
        return loaded[names[0]]
    if split is None or split not in loaded:
        what = "has no split " + repr(split) if split is not None else "has several splits"
        raise ValueError(f"{label} {what}; pick one of {', '.join(names)} with {label}@{names[-1]}")
    return loaded[split]


@lru_cache(maxsize=8)
def _load_hub(name: str, config: str | None, split: str | None) -> Any:
    """`datasets.load_dataset(name, config, split=split)`, with the Hub's failures as one line."""
    datasets = _datasets_module()
    shown = name + (f":{config}" if config else "")
    try:
        loaded = datasets.load_dataset(name, config, split=split)
    except Exception as exc:  # datasets and huggingface_hub raise many types for one cause
        reason = f"{type(exc).__name__}: {_first_line(exc)}"
        if _offline(exc):
            raise ValueError(
                f"cannot reach the Hugging Face Hub to load {shown!r} ({reason}); download it where the Hub is reachable "
                f"(datasets.load_dataset(...).save_to_disk(FOLDER) or .to_parquet(FILE)) and pass the local folder or file"
            ) from None
        raise ValueError(f"cannot load {shown!r} from the Hugging Face Hub ({reason}); check the id "
                         "(OWNER/NAME[:CONFIG][@SPLIT]) or pass a local file or folder") from None
    return _pick_split(loaded, None, f"{shown}") if split is None else loaded


def _offline(exc: BaseException) -> bool:
    """Whether a load failed because the Hub could not be reached (offline mode included)."""
    for err in (exc, exc.__cause__, exc.__context__):
        if err is None:
            continue
        if isinstance(err, (ConnectionError, TimeoutError)) or type(err).__name__ in (
                "LocalEntryNotFoundError", "OfflineModeIsEnabled", "ConnectError", "ConnectTimeout"):
            return True
        text = str(err).lower()
        if any(word in text for word in ("offline", "couldn't reach", "could not reach", "connection", "resolve host")):
            return True
    return False


def _rows_of(dataset: Any, label: str) -> Iterator[tuple[str, Any]]:
    for index, record in enumerate(dataset):
        yield f"{label}: row {index}", _present(record)


def _present(record: dict[str, Any]) -> dict[str, Any]:
    """A table row without its null cells: a table has every column in every row, and a null cell
    is a field the record does not have (as a JSON line would leave it out)."""
    return {key: value for key, value in record.items() if value is not None}


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


__all__ = ["FILE_SUFFIXES", "DatasetNotFound", "canonical", "read_rows"]
