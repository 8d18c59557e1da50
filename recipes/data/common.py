"""Reading records (local JSONL / JSON / parquet files, or a Hugging Face dataset) and writing verl's RL parquet.

verl's ``RLHFDataset`` (``verl/utils/dataset/rl_dataset.py``) reads one row per prompt:

- ``data_source`` (`str`): passed to the reward function; validation metrics are grouped by it;
- ``prompt`` (`list[dict]`): chat messages ``{"role", "content"}``, rendered by the policy's chat template;
- ``ability`` (`str`): a tag, logged;
- ``reward_model`` (`dict`): ``{"style": "rule", "ground_truth": str}``; ``ground_truth`` reaches the reward;
- ``extra_info`` (`dict`): ``{"split", "index", ...}``; reaches the reward function as ``extra_info``.
"""

import json
import math
import numbers
import random
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")
MISSING_TEXTS = ("nan", "none", "null", "n/a")  # what a missing value becomes after astype(str)


class DataError(ValueError):
    """Input the preparation refuses; its message names the file and row (or line) and the fix."""


@dataclass(frozen=True)
class Record:
    """One input row and where it came from: ``"file.jsonl:12"`` (a line), ``"file.json row 3"``, ..."""

    where: str
    data: dict


def load_records(source: str, split: str) -> list[Record]:
    """Rows of a local file, or of split ``split`` of the Hugging Face dataset named ``source``.

    Args:
        source: a path ending in ``.jsonl`` (one JSON object a line), ``.json`` (a list of objects) or
            ``.parquet``; anything else is a dataset name for ``datasets.load_dataset`` (downloads).
        split: the dataset split; ignored for local files.

    Returns:
        one :class:`Record` per row.

    Raises:
        DataError: a missing or non-UTF-8 file, a line that is not JSON, a row that is not an object.
    """
    path = Path(source).expanduser()
    if path.suffix not in LOCAL_SUFFIXES:
        import datasets

        return _records(datasets.load_dataset(source, split=split).to_list(), f"{source}[{split}] row {{}}")
    if not path.is_file():
        raise DataError(f"no such file: {path}; give an existing .jsonl, .json or .parquet file")
    if path.suffix == ".parquet":
        return _records(pq.read_table(path).to_pylist(), f"{path} row {{}}")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise DataError(f"{path} is not UTF-8 text ({error}); re-encode it as UTF-8") from None
    if path.suffix == ".json":
        return _records(_json(text, str(path)), f"{path} row {{}}")
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    return [_record(_json(line, f"{path}:{number}"), f"{path}:{number}") for number, line in lines]


def _json(text: str, where: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise DataError(f"{where}: not valid JSON ({error}); fix or remove it") from None


def _records(rows, where: str) -> list[Record]:
    if not isinstance(rows, list):
        raise DataError(f"{where.format('')}: expected a list of objects, got {type(rows).__name__}")
    return [_record(row, where.format(number)) for number, row in enumerate(rows)]


def _record(row, where: str) -> Record:
    if not isinstance(row, dict):
        raise DataError(f"{where}: expected a JSON object (one row), got {type(row).__name__}")
    return Record(where, row)


def field(record: Record, name: str):
    """``record.data[name]``, or a ``DataError`` naming the row and the fields it has."""
    if name not in record.data:
        raise DataError(
            f"{record.where} has no field {name!r} (fields: {sorted(record.data)}); pick one with --*-field"
        )
    return record.data[name]


def clean_text(value, what: str, record: Record, integers: bool = False) -> str | None:
    """``value`` as a stripped, non-blank string, or None when it is missing (None, NaN, blank, ``"nan"``,
    ``"None"``, ...: :data:`MISSING_TEXTS`). With ``integers``, an int (or an integral float) is written as
    a string too. Anything else (a bool, a list, a dict, another number) raises ``DataError``."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, str):
        text = value.strip()
        return text if text and text.lower() not in MISSING_TEXTS else None
    if integers and isinstance(value, numbers.Real) and not isinstance(value, bool) and float(value).is_integer():
        return str(int(value))
    raise DataError(f"{record.where}: {what} must be a string, got {type(value).__name__}")


def keep_valid(records: list[Record], make: Callable[[Record], object], source: str) -> list:
    """``make(record)`` for every record, dropping the rows where it raises ``DataError``; prints how many rows
    each reason dropped."""
    kept, dropped = [], Counter()
    for record in records:
        try:
            kept.append(make(record))
        except DataError as error:
            dropped[str(error).removeprefix(f"{record.where}: ")] += 1
    reasons = "; ".join(f"{count} {reason}" for reason, count in dropped.most_common()) or "none"
    print(f"{source}: {len(records)} rows, {sum(dropped.values())} dropped ({reasons})")
    return kept


def text_of(value, record: Record) -> str:
    """The text of a field: a string, or the first user message of a list of chat messages."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        for message in value:
            if isinstance(message, dict) and message.get("role") == "user":
                return str(message.get("content") or "").strip()
        return ""
    raise DataError(f"{record.where}: expected a string or a list of chat messages, got {type(value).__name__}")


def verl_row(
    *, data_source: str, messages: list[dict], ability: str, ground_truth: str, split: str, index: int, **extra: str
) -> dict:
    """One row of verl's RL parquet (see the module docstring); ``extra`` goes into ``extra_info``."""
    return {
        "data_source": data_source,
        "prompt": messages,
        "ability": ability,
        "reward_model": {"style": "rule", "ground_truth": ground_truth},
        "extra_info": {"split": split, "index": index, **extra},
    }


def chat(user: str, system: str | None) -> list[dict]:
    """Chat messages: an optional system message, then the user's."""
    return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]


def holdout(items: list, size: int, seed: int) -> tuple[list, list]:
    """Shuffle ``items`` with ``seed`` and split them into (rest, ``size`` held-out items)."""
    if not 0 < size < len(items):
        raise DataError(
            f"cannot hold out {size} of {len(items)} items: give --test-size between 1 and {len(items) - 1}"
        )
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    return shuffled[size:], shuffled[:size]


def write_splits(splits: dict[str, list[dict]], out_dir: Path) -> tuple[Path, ...]:
    """Write ``<out_dir>/<name>.parquet`` for every split, only once every split has rows: nothing is written
    (or overwritten) when one is empty."""
    empty = [name for name, rows in splits.items() if not rows]
    if empty:
        raise DataError(f"no rows left for {empty} (see the counts above); nothing written to {out_dir}")
    paths = []
    for name, rows in splits.items():
        path = out_dir / f"{name}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), path)
        print(f"wrote {len(rows)} rows to {path}")
        paths.append(path)
    return tuple(paths)


def non_negative(text: str) -> int:
    """argparse type: an integer >= 0."""
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def run_cli(main: Callable[[], object]) -> int:
    """Run a preparation's ``main``; a ``DataError`` ends it with one ``PROBLEM:`` line and exit status 1."""
    try:
        main()
    except DataError as error:
        print(f"PROBLEM: {error}", file=sys.stderr)
        return 1
    return 0
