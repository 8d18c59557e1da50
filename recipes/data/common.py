"""Reading records (local JSONL / JSON / parquet files, or a Hugging Face dataset) and writing verl's RL parquet.

verl's ``RLHFDataset`` (``verl/utils/dataset/rl_dataset.py``) reads one row per prompt:

- ``data_source`` (`str`): passed to the reward function; validation metrics are grouped by it;
- ``prompt`` (`list[dict]`): chat messages ``{"role", "content"}``, rendered by the policy's chat template;
- ``ability`` (`str`): a tag, logged;
- ``reward_model`` (`dict`): ``{"style": "rule", "ground_truth": str}``; ``ground_truth`` reaches the reward;
- ``extra_info`` (`dict`): ``{"split", "index", ...}``; reaches the reward function as ``extra_info``.
"""

import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

LOCAL_SUFFIXES = (".jsonl", ".json", ".parquet")


def load_records(source: str, split: str) -> list[dict]:
    """Rows of a local file, or of split ``split`` of the Hugging Face dataset named ``source``.

    Args:
        source: a path ending in ``.jsonl`` (one JSON object a line), ``.json`` (a list of objects) or
            ``.parquet``; anything else is a dataset name for ``datasets.load_dataset`` (downloads).
        split: the dataset split; ignored for local files.

    Returns:
        one dict per row.
    """
    path = Path(source).expanduser()
    if path.suffix in LOCAL_SUFFIXES:
        if not path.is_file():
            raise FileNotFoundError(f"no such file: {path}")
        if path.suffix == ".parquet":
            return pq.read_table(path).to_pylist()
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".json":
            return json.loads(text)
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    import datasets

    return datasets.load_dataset(source, split=split).to_list()


def field(record: dict, name: str, number: int, source: str):
    """``record[name]``, or a ``KeyError`` naming the row, the source and the fields it has."""
    if name not in record:
        raise KeyError(f"row {number} of {source} has no field {name!r} (fields: {sorted(record)})")
    return record[name]


def text_of(value) -> str:
    """The text of a field: a string, or the first user message of a list of chat messages."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, list):
        for message in value:
            if isinstance(message, dict) and message.get("role") == "user":
                return str(message.get("content") or "").strip()
        return ""
    raise TypeError(f"expected a string or a list of chat messages, got {type(value).__name__}")


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
        raise ValueError(f"cannot hold out {size} of {len(items)} items: need 0 < size < {len(items)}")
    shuffled = list(items)
    random.Random(seed).shuffle(shuffled)
    return shuffled[size:], shuffled[:size]


def write_parquet(rows: list[dict], path: Path) -> Path:
    """Write ``rows`` to ``path`` (parents created); refuses an empty table."""
    if not rows:
        raise ValueError(f"no rows to write to {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), path)
    print(f"wrote {len(rows)} rows to {path}")
    return path
