"""Math training problems and AIME test problems into verl's RL parquet (``train.parquet``, ``test.parquet``).

    python -m recipes.data.prepare_aime                                    # the default datasets below
    python -m recipes.data.prepare_aime --train-source math.jsonl --test-source aime_2025.jsonl

Defaults (Hugging Face): training on ``agentica-org/DeepScaleR-Preview-Dataset`` (split ``train``, fields
``problem`` and ``answer``; ~40k competition problems), testing on ``HuggingFaceH4/aime_2024`` (split
``train``, fields ``problem`` and ``answer``; the 30 AIME 2024 problems). Every name, split and field is an
argument; local ``.jsonl`` / ``.json`` / ``.parquet`` files work as sources.

- Training rows with a blank problem or answer are dropped, and so are training problems whose text is a
  test problem's (both counted on stdout).
- Test answers must be AIME answers, integers 0 to 999; anything else raises ``ValueError`` naming the row
  (leading zeros are dropped: ``"033"`` becomes ``"33"``).
- The prompt is the problem followed by ``--instruction``, which asks for blank-line separated steps
  (the step separator of ``reward_models/math_prm.py``) and a ``\\boxed{}`` answer.
- ``ground_truth`` is the answer as a string; ``extra_info`` has ``split``, ``index`` and ``question`` (the
  problem, which ``math_prm`` shows its process reward model).
"""

import argparse
import re
from pathlib import Path

from recipes.data.common import chat, field, load_records, verl_row, write_parquet

DEFAULT_TRAIN_SOURCE = "agentica-org/DeepScaleR-Preview-Dataset"
DEFAULT_TEST_SOURCE = "HuggingFaceH4/aime_2024"
INSTRUCTION = (
    "Solve the problem step by step, separating the steps with a blank line, and put the final answer within \\boxed{}."
)
AIME_ANSWER = re.compile(r"\d{1,3}")


def problem_answer(record: dict, problem_field: str, answer_field: str, number: int, source: str) -> tuple[str, str]:
    """``(problem, answer)`` of one row as stripped strings (a missing answer is ``""``)."""
    problem = str(field(record, problem_field, number, source) or "").strip()
    answer = field(record, answer_field, number, source)
    return problem, "" if answer is None else str(answer).strip()


def training_problems(records: list[dict], problem_field: str, answer_field: str, source: str) -> list[tuple[str, str]]:
    """``(problem, answer)`` of every row whose problem and answer are not blank."""
    pairs = [
        problem_answer(record, problem_field, answer_field, number, source) for number, record in enumerate(records)
    ]
    kept = [(problem, answer) for problem, answer in pairs if problem and answer]
    print(f"{source}: {len(records)} rows, {len(records) - len(kept)} with a blank problem or answer dropped")
    return kept


def aime_problems(records: list[dict], problem_field: str, answer_field: str, source: str) -> list[tuple[str, str]]:
    """``(problem, answer)`` of every row, answers in canonical form; a ``ValueError`` names a bad row."""
    pairs = []
    for number, record in enumerate(records):
        problem, answer = problem_answer(record, problem_field, answer_field, number, source)
        if not problem:
            raise ValueError(f"row {number} of {source} has a blank problem")
        if not AIME_ANSWER.fullmatch(answer):
            raise ValueError(f"row {number} of {source}: AIME answers are integers 0-999, got {answer!r}")
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
    parser.add_argument("--max-train", type=int, default=None, help="keep at most this many training problems")
    parser.add_argument("--instruction", default=INSTRUCTION, help="appended to every problem")
    parser.add_argument("--system-prompt", default="", help="system message (default: none)")
    parser.add_argument("--out-dir", type=Path, default=Path("data/aime"))
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> tuple[Path, Path]:
    args = parse_args(argv)
    test_records = load_records(args.test_source, args.test_split)
    test = aime_problems(test_records, args.test_problem_field, args.test_answer_field, args.test_source)
    train_records = load_records(args.train_source, args.train_split)
    train = training_problems(train_records, args.train_problem_field, args.train_answer_field, args.train_source)
    test_problems = {problem for problem, _ in test}
    clean = [pair for pair in train if pair[0] not in test_problems]
    print(f"{args.train_source}: {len(train) - len(clean)} problems that are test problems dropped")
    clean = clean[: args.max_train]
    system = args.system_prompt or None
    return (
        write_parquet(
            rows(clean, "train", args.train_data_source, args.instruction, system), args.out_dir / "train.parquet"
        ),
        write_parquet(
            rows(test, "test", args.test_data_source, args.instruction, system), args.out_dir / "test.parquet"
        ),
    )


if __name__ == "__main__":
    main()
