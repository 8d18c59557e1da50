"""React code generation prompts into verl's RL parquet (``train.parquet``, ``test.parquet``).

    python -m recipes.data.prepare_react                                   # the default dataset below
    python -m recipes.data.prepare_react --source my_prompts.jsonl --field instruction --test-size 64

Default source: ``cfahlgren1/react-code-instructions`` (Hugging Face, split ``train``): chat transcripts in
the ``messages`` field, whose first user message is a request for a React app or component. Any local
``.jsonl`` / ``.json`` / ``.parquet`` file or other dataset works: ``--field`` names the column holding the
request, as a string or as chat messages (the first user message is taken).

Requests are stripped, blank ones dropped and duplicates kept once (both counted on stdout), then a
seeded shuffle holds ``--test-size`` of them out as the test split. Every prompt is the system prompt
(``--system-prompt``) plus the request. The reward (``bot_grpo_verl/rewards/react_tsx.py``) compiles the answer,
so there is no reference answer: ``ground_truth`` is empty. ``extra_info`` has ``split``, ``index`` and
``instruction``.

Requirement specs: where your data says what each request must produce, attach it to the row as
``extra_info["react_spec"]`` (``{"component": "TodoList", "default_export": true, "elements": ["ul", "li"],
"only_elements": false, "props": ["items"], "texts": ["Empty"]}``, every key optional; see
``bot_grpo_verl/rewards/react_requirements.py``) and the reward checks it: a response that is not the requested
component scores 0. With a reference solution per row, ``spec_from_reference`` of its outline (the TSX
worker's ``outline``) derives one. This script attaches none: the default dataset's requests are free-form.
"""

import argparse
import sys
from pathlib import Path

from recipes.data.common import (
    Record,
    chat,
    field,
    holdout,
    load_records,
    non_negative,
    run_cli,
    text_of,
    verl_row,
    write_splits,
)

DEFAULT_SOURCE = "cfahlgren1/react-code-instructions"
SYSTEM_PROMPT = (
    "You are an expert React developer. Answer with one self-contained React component written in "
    "TypeScript (TSX), in a single ```tsx code block, with a default export. Import only from 'react'."
)


def instructions(records: list[Record], field_name: str, source: str) -> list[str]:
    """The distinct non-blank requests of ``records``, in first-seen order."""
    texts = [text_of(field(record, field_name), record) for record in records]
    distinct = list(dict.fromkeys(text for text in texts if text))
    blank = sum(not text for text in texts)
    duplicates = len(texts) - blank - len(distinct)
    print(f"{source}: {len(records)} rows, {blank} blank requests dropped, {duplicates} duplicates dropped")
    return distinct


def rows(requests: list[str], split: str, system_prompt: str, data_source: str) -> list[dict]:
    return [
        verl_row(
            data_source=data_source,
            messages=chat(request, system_prompt),
            ability="code",
            ground_truth="",
            split=split,
            index=index,
            instruction=request,
        )
        for index, request in enumerate(requests)
    ]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m recipes.data.prepare_react", description=__doc__.splitlines()[0])
    parser.add_argument("--source", default=DEFAULT_SOURCE, help="local .jsonl/.json/.parquet file or HF dataset name")
    parser.add_argument("--split", default="train", help="dataset split (HF datasets only)")
    parser.add_argument("--field", default="messages", help="column with the request (string or chat messages)")
    parser.add_argument("--test-size", type=int, default=256, help="requests held out for validation")
    parser.add_argument(
        "--max-train", type=non_negative, default=None, help="keep at most this many training requests (>= 0)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the train/test shuffle")
    parser.add_argument("--system-prompt", default=SYSTEM_PROMPT, help="system message ('' for none)")
    parser.add_argument("--data-source", default="react_tsx", help="data_source column (groups validation metrics)")
    parser.add_argument("--out-dir", type=Path, default=Path("data/react"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> tuple[Path, Path]:
    args = parse_args(argv)
    requests = instructions(load_records(args.source, args.split), args.field, args.source)
    train, test = holdout(requests, args.test_size, args.seed)
    train = train[: args.max_train]
    return write_splits(
        {
            "train": rows(train, "train", args.system_prompt, args.data_source),
            "test": rows(test, "test", args.system_prompt, args.data_source),
        },
        args.out_dir,
    )


if __name__ == "__main__":
    sys.exit(run_cli(main))
