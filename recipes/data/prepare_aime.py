"""Math training problems and AIME test problems into verl's RL parquet (``train.parquet``, ``test.parquet``).

    python -m recipes.data.prepare_aime                                    # the default datasets below
    python -m recipes.data.prepare_aime --train-source math.jsonl --test-source aime_2025.jsonl

Defaults (Hugging Face): training on ``agentica-org/DeepScaleR-Preview-Dataset`` (split ``train``, fields
``problem`` and ``answer``; ~40k competition problems), testing on ``HuggingFaceH4/aime_2024`` (split
``train``, fields ``problem`` and ``answer``; the 30 AIME 2024 problems). Every name, split and field is an
argument; local ``.jsonl`` / ``.json`` / ``.parquet`` files work as sources.

- Every row is validated before anything is written: a problem must be a non-blank string, an answer a
  non-blank string or an integer. Missing values (None, NaN, blank, ``"nan"``, ``"None"``, ``"null"``) and
  values of other types (bools, lists, dicts, fractional numbers) drop a training row, counted by reason on
  stdout; training problems whose text is a test problem's are dropped too (counted).
- Test rows are never dropped: a bad one raises ``DataError`` naming the file and row (or line), and so do
  test answers that are not AIME answers, integers 0 to 999 (leading zeros are dropped: ``"033"`` becomes
  ``"33"``). An unreadable file or line (not UTF-8, not JSON) raises ``DataError`` naming it; run as a
  command, each prints one ``PROBLEM:`` line and exits 1, with no file written.
- The prompt is the problem followed by ``--instruction``, which asks for blank-line separated steps
  (the step separator of ``bot_grpo_verl/rewards/math_prm.py``) and a ``\\boxed{}`` answer.
- ``ground_truth`` is the answer as a string; ``extra_info`` has ``split``, ``index`` and ``question`` (the
  problem, which ``math_prm`` shows its process reward model).
"""

import argparse
import re
import sys
from pathlib import Path

from recipes.data.common import (
    DataError,
    Record,
    chat,
    clean_text,
    field,
    keep_valid,
    load_records,
    non_negative,
    run_cli,
    verl_row,
    write_splits,
)

DEFAULT_TRAIN_SOURCE = "agentica-org/DeepScaleR-Preview-Dataset"
DEFAULT_TEST_SOURCE = "HuggingFaceH4/aime_2024"
INSTRUCTION = (
    "Solve the problem step by step, separating the steps with a blank line, and put the final answer within \\boxed{}."
)
AIME_ANSWER = re.compile(r"\d{1,3}")


def problem_answer(record: Record, problem_field: str, answer_field: str) -> tuple[str, str]:
    """``(problem, answer)`` of one row as non-blank strings, or ``DataError`` naming the row and the reason."""
    problem = clean_text(field(record, problem_field), "the problem", record)
    answer = clean_text(field(record, answer_field), "the answer", record, integers=True)
    if problem is None:
        raise DataError(f"{record.where}: blank or missing problem")
    if answer is None:
        raise DataError(f"{record.where}: blank or missing answer")
    return problem, answer


def training_problems(records: list[Record], problem_field: str, answer_field: str, source: str) -> list:
    """``(problem, answer)`` of every valid row; the others dropped and counted by reason."""
    return keep_valid(records, lambda record: problem_answer(record, problem_field, answer_field), source)


def aime_problems(records: list[Record], problem_field: str, answer_field: str) -> list[tuple[str, str]]:
    """``(problem, answer)`` of every row, answers in canonical form; a ``DataError`` names a bad row."""
    pairs = []
    for record in records:
        problem, answer = problem_answer(record, problem_field, answer_field)
        if not AIME_ANSWER.fullmatch(answer):
            raise DataError(f"{record.where}: AIME answers are integers 0-999, got {answer!r}; fix the test file")
        pairs.append((problem, str(int(answer))))
    return pairs


def rows(
    pairs: list[tuple[str, str]], split: str, data_source: str, instruction: str, system: str | None
) -> list[dict]:
    return [
        verl_row(
            data_source=data_source,
            messages=chat(f"{problem}\n\n{instruction}", system),
            ability="math",
            ground_truth=answer,
            split=split,
            index=index,
            question=problem,
        )
        for index, (problem, answer) in enumerate(pairs)
    ]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m recipes.data.prepare_aime", description=__doc__.splitlines()[0])
    for split, source, data_source in (
        ("train", DEFAULT_TRAIN_SOURCE, "deepscaler"),
        ("test", DEFAULT_TEST_SOURCE, "aime_2024"),
    ):
        parser.add_argument(
            f"--{split}-source", default=source, help="local .jsonl/.json/.parquet file or HF dataset name"
        )
        parser.add_argument(f"--{split}-split", default="train", help="dataset split (HF datasets only)")
        parser.add_argument(f"--{split}-problem-field", default="problem")
        parser.add_argument(f"--{split}-answer-field", default="answer")
        parser.add_argument(f"--{split}-data-source", default=data_source, help="data_source column")
    parser.add_argument(
        "--max-train", type=non_negative, default=None, help="keep at most this many training problems (>= 0)"
    )
    parser.add_argument("--instruction", default=INSTRUCTION, help="appended to every problem")
    parser.add_argument("--system-prompt", default="", help="system message (default: none)")
    parser.add_argument("--out-dir", type=Path, default=Path("data/aime"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> tuple[Path, Path]:
    args = parse_args(argv)
    test_records = load_records(args.test_source, args.test_split)
    test = aime_problems(test_records, args.test_problem_field, args.test_answer_field)
    train_records = load_records(args.train_source, args.train_split)
    train = training_problems(train_records, args.train_problem_field, args.train_answer_field, args.train_source)
    test_problems = {problem for problem, _ in test}
    clean = [pair for pair in train if pair[0] not in test_problems]
    print(f"{args.train_source}: {len(train) - len(clean)} problems that are test problems dropped")
    clean = clean[: args.max_train]
    system = args.system_prompt or None
    return write_splits(
        {
            "train": rows(clean, "train", args.train_data_source, args.instruction, system),
            "test": rows(test, "test", args.test_data_source, args.instruction, system),
        },
        args.out_dir,
    )


if __name__ == "__main__":
    sys.exit(run_cli(main))
