"""``bot-grpo-verl check-reward FILE``: try a reward function on real rows in seconds, without a trainer or Ray.

It does to a few rows what a run does to every sample, in this process:

1. loads the function as verl loads ``reward.custom_reward_function`` (verl's own ``get_custom_reward_fn``: the
   file by path, ``reward_kwargs`` merged into every call), after a shipped reward's options and data needs are
   checked (:mod:`bot_grpo_verl.shipped_rewards`);
2. calls it on the first ``--rows`` rows of ``--data`` (verl's RL parquet or JSONL, or a rollout dump of
   ``trainer.rollout_data_dir`` whose ``output`` is the response), with the rows' own responses or a small group of
   generated ones, as the ``bot_token`` manager calls it (the response decoded from the run's tokenizer's ids, the
   turn and tool-call spans in ``extra_info``);
3. checks each result against the contract and aligns it to the tokens (:mod:`bot_grpo_verl.reward.manager`), and
   counts the span boundaries that fall inside a token of the tokenizer (such a token takes the value of the span
   that owns most of its characters);
4. runs the estimator on each row's group (``--estimator``, default ``bot_grpo``) and checks its advantages.

It prints one table line per call (score, spans, token rewards, advantages, time per call) and each problem with
the file and line of the reward's code where it raised (or of the function that returned a bad value); exit
status 1 when there is a problem.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import math
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

GENERATED_GROUP = (
    "The answer is \\boxed{{{truth}}}.",
    "Step one: 2 + 2 = 4\n\nStep two: 4 * 3 = 13\n\nThe answer is \\boxed{{0}}.",
    "```tsx\nexport default function App() {{\n  return <div>Hello</div>;\n}}\n```",
    "",
)
"""The responses tried on a row that has none (``{truth}``: its ground truth): a right answer, wrong steps, code,
nothing."""
GENERATED_ROW = {
    "data_source": "check_reward",
    "prompt": [{"role": "user", "content": "What is 2 + 2?"}],
    "reward_model": {"ground_truth": "4"},
    "extra_info": {"index": 0},
}
"""The row tried without ``--data``."""


@dataclass
class Call:
    """One call of the reward function and what became of it."""

    row: int
    response: int
    seconds: float = 0.0
    score: float | None = None
    spans: int | None = None
    rewards: np.ndarray | None = None
    split_boundaries: int = 0
    advantages: np.ndarray | None = None


@dataclass
class Report:
    """The calls, and each problem found (one line, plus the reward's traceback where it raised) with the calls
    that met it."""

    calls: list[Call] = field(default_factory=list)
    found: dict[str, list[str]] = field(default_factory=dict)

    def add(self, problem: str, where: str = "") -> None:
        self.found.setdefault(problem, []).append(where)

    @property
    def problems(self) -> list[str]:
        """Each problem once, after the calls that met it (``row 0 response 1``, ...)."""
        return [f"{', '.join(filter(None, wheres)) + ': ' if any(wheres) else ''}{problem}"
                for problem, wheres in self.found.items()]  # fmt: skip


def parse_kwargs(items: list[str]) -> dict:
    """``--reward-kwargs``: ``key=value`` pairs (values read as YAML, as hydra reads them) or one JSON object."""
    import yaml

    if len(items) == 1 and items[0].lstrip().startswith("{"):
        return json.loads(items[0])
    kwargs = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--reward-kwargs takes key=value pairs or a JSON object, got {item!r}")
        kwargs[key.strip()] = yaml.safe_load(value)
    return kwargs


def byte_tokenizer():
    """One token per byte (byte-level BPE without merges): the tokenizer used without ``--tokenizer``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    model = models.BPE(vocab={character: index for index, character in enumerate(sorted(alphabet))}, merges=[])
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer)


def load_tokenizer(path: str | None):
    """The run's tokenizer from a local folder (``actor_rollout_ref.model.path``), or :func:`byte_tokenizer`."""
    if path is None:
        return byte_tokenizer()
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path, local_files_only=True)


def row_inputs(row: Mapping) -> tuple[Any, Any, dict, list[str] | None]:
    """(data_source, ground_truth, extra_info, the row's own responses or None) of a data row: verl's RL format,
    or a rollout dump line (``output``, ``gts``)."""
    reward_model = row.get("reward_model")
    truth = reward_model.get("ground_truth") if isinstance(reward_model, Mapping) else row.get("gts")
    extra = row.get("extra_info")
    own = row.get("output", row.get("response"))
    return (
        row.get("data_source", "check_reward"),
        truth,
        dict(extra) if isinstance(extra, Mapping) else {},
        ([own] if isinstance(own, str) else None),
    )


def reward_traceback(error: BaseException) -> str:
    """The frames of the reward's own code that ``error`` passed through, formatted as Python prints them."""
    from bot_grpo_verl.reward.manager import reward_frames

    frames = [frame for frame in reward_frames(error) if frame.filename != __file__]
    if not frames:
        return ""
    return "\n" + "".join(traceback.format_list(frames)).rstrip()


def defined_at(function) -> str:
    """``FILE:LINE`` of the reward function's ``def`` (what a bad return value points to)."""
    raw = getattr(function, "args", (function,))[0]  # verl wraps it: partial(_call_with_kwargs, raw_fn, kwargs)
    try:
        return f"{inspect.getsourcefile(raw)}:{inspect.getsourcelines(raw)[1]}"
    except (OSError, TypeError):
        return getattr(raw, "__qualname__", repr(raw))


def split_boundaries(spans, ranges: np.ndarray) -> int:
    """How many span boundaries fall strictly inside a token's characters (``ranges`` int64 (L, 2))."""
    inside = 0
    for start, end, _ in spans or ():
        for boundary in (start, end):
            inside += int(np.any((ranges[:, 0] < boundary) & (boundary < ranges[:, 1])))
    return inside


def call_reward(function, tokenizer, row_number: int, response_number: int, row, response: str, options, report):
    """One call as the ``bot_token`` manager makes it; the :class:`Call`, its token rewards on success."""
    from bot_grpo_verl.reward.alignment import token_char_ranges
    from bot_grpo_verl.reward.manager import aligned_token_rewards, where_it_raised
    from bot_grpo_verl.reward.turns import assistant_turns, tool_call_spans, turn_char_spans

    call = Call(row_number, response_number)
    data_source, truth, extra_info, _ = row_inputs(row)
    text, ranges = token_char_ranges(tokenizer, tokenizer.encode(response, add_special_tokens=False))
    assistant = np.ones(len(ranges), dtype=bool)
    turns = turn_char_spans(assistant_turns(assistant), ranges)
    calls = tool_call_spans(text, turns)
    extra_info.update(turn_spans=turns.tolist(), call_spans=[list(span) for span in calls], num_turns=None)
    where = f"row {row_number} response {response_number}"
    start = time.perf_counter()
    try:
        result = function(data_source=data_source, solution_str=text, ground_truth=truth, extra_info=extra_info)
        if inspect.isawaitable(result):
            result = asyncio.run(result)
    except Exception as error:
        call.seconds = time.perf_counter() - start
        at = where_it_raised(error)
        place = f" at {at}" if at else ""
        report.add(f"the reward raised {type(error).__name__}: {error}{place}{reward_traceback(error)}", where)
        return call
    call.seconds = time.perf_counter() - start
    try:
        rewards, info = aligned_token_rewards(result, text, ranges, options, assistant, calls)
    except ValueError as error:
        report.add(f"the reward returned {error} (returned by the function at {defined_at(function)})", where)
        return call
    spans = result.get("spans") if isinstance(result, Mapping) else None
    call.score, call.spans, call.rewards = info["score"], len(spans or ()), rewards
    call.split_boundaries = split_boundaries(spans, ranges)
    return call


def estimate(group: list[Call], estimator: str, report: Report) -> None:
    """Run ``estimator`` on one row's calls that scored (one group); store each call's advantages."""
    import torch

    from bot_grpo_verl.plugin import estimators

    scored = [call for call in group if call.rewards is not None]
    if len(scored) < 2:
        return
    length = max(1, *(len(call.rewards) for call in scored))
    rewards = torch.zeros(len(scored), length)
    mask = torch.zeros(len(scored), length)
    for number, call in enumerate(scored):
        rewards[number, : len(call.rewards)] = torch.tensor(call.rewards)
        mask[number, : len(call.rewards)] = 1.0
    try:
        advantages, _ = estimators()[estimator](rewards, mask, np.zeros(len(scored), dtype=object))
    except ValueError as error:
        report.add(f"the estimator {estimator} refused the group: {error}", f"row {scored[0].row}")
        return
    for number, call in enumerate(scored):
        call.advantages = advantages[number, : len(call.rewards)].numpy()
    if not torch.isfinite(advantages).all():
        report.add(f"the estimator {estimator} gave non-finite advantages", f"row {scored[0].row}")


def check(args) -> Report:
    """Load the reward, check a shipped one's options and rows, call it, align, estimate."""
    from omegaconf import OmegaConf
    from verl.trainer.ppo.reward import get_custom_reward_fn

    from bot_grpo_verl.launch_checks import first_rows, reward_file_problem
    from bot_grpo_verl.reward.manager import TokenRewardConfig
    from bot_grpo_verl.run_checks import STEP_END_ESTIMATORS
    from bot_grpo_verl.shipped_rewards import SHIPPED, shipped_name

    report = Report()
    kwargs = parse_kwargs(args.reward_kwargs)
    rows = first_rows(Path(args.data), args.rows) if args.data else [GENERATED_ROW]
    problem = reward_file_problem(Path(args.file), args.name)
    if problem is not None:
        report.add(problem)
        return report
    shipped = shipped_name(args.file)
    if shipped is not None:
        reward = SHIPPED[shipped]()
        try:
            options = reward.options(kwargs)
        except ValueError as error:
            report.add(f"reward_kwargs of {shipped}: {error}")
            return report
        for number, row in enumerate(rows):
            problem = reward.row_problem(options, row)
            if problem is not None:
                report.add(f"the {shipped} reward cannot score this row: {problem}", f"row {number}")
    custom = {"path": str(args.file), "name": args.name, "reward_kwargs": kwargs}
    try:
        function = get_custom_reward_fn(OmegaConf.create({"reward": {"custom_reward_function": custom}}))
    except Exception as error:
        at = traceback.extract_tb(error.__traceback__)[-1]
        report.add(f"loading {args.file} failed: {type(error).__name__}: {error} at {at.filename}:{at.lineno}")
        return report
    tokenizer = load_tokenizer(args.tokenizer)
    placement = "step_end" if args.estimator in STEP_END_ESTIMATORS else "spread"
    options = TokenRewardConfig(placement=placement)
    for number, row in enumerate(rows):
        _, truth, _, own = row_inputs(row)
        responses = args.response or own or [text.format(truth=truth) for text in GENERATED_GROUP]
        group = [
            call_reward(function, tokenizer, number, index, row, response, options, report)
            for index, response in enumerate(responses)
        ]
        estimate(group, args.estimator, report)
        report.calls.extend(group)
    return report


def summary(values: np.ndarray | None) -> str:
    """``min/mean/max`` of ``values``, ``-`` without any."""
    if values is None or not len(values):
        return "-"
    finite = values[np.isfinite(values)]
    if not len(finite):
        return "nan"
    return f"{finite.min():+.3g}/{finite.mean():+.3g}/{finite.max():+.3g}"


def table(calls: list[Call]) -> str:
    """One line per call: row, response, score, spans, tokens, token rewards and advantages (min/mean/max), time."""
    lines = [f"{'row':>4} {'resp':>4} {'score':>8} {'spans':>5} {'tokens':>6} {'token rewards':>22} "
             f"{'advantages':>22} {'ms/call':>8}"]  # fmt: skip
    for call in calls:
        score = "failed" if call.score is None else f"{call.score:.4g}" if math.isfinite(call.score) else "nan"
        spans = "-" if call.spans is None else f"{call.spans}" + ("*" if call.split_boundaries else "")
        tokens = "-" if call.rewards is None else str(len(call.rewards))
        lines.append(
            f"{call.row:>4} {call.response:>4} {score:>8} {spans:>5} {tokens:>6} {summary(call.rewards):>22} "
            f"{summary(call.advantages):>22} {call.seconds * 1000:>8.1f}"
        )
    if any(call.split_boundaries for call in calls):
        lines.append(
            "* some span boundaries fall inside a token of this tokenizer: such a token takes the value of "
            "the span that owns most of its characters"
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from bot_grpo_verl import ESTIMATOR_NAME

    parser.add_argument("file", help="the reward file (reward.custom_reward_function.path)")
    parser.add_argument("--name", default="compute_score", help="the function (reward.custom_reward_function.name)")
    parser.add_argument("--data", help="rows to try: verl's RL .parquet/.jsonl, or a rollout dump .jsonl (its outputs)")
    parser.add_argument("--rows", type=int, default=4, help="how many rows of --data (default 4)")
    parser.add_argument(
        "--response",
        action="append",
        help="a response to try on every row (repeatable); "
        "default: the row's own output, else a generated group (answer, wrong steps, code, nothing)",
    )
    parser.add_argument(
        "--reward-kwargs",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="reward.custom_reward_function.reward_kwargs: key=value pairs or a JSON object",
    )
    parser.add_argument("--tokenizer", help="the run's tokenizer folder (actor_rollout_ref.model.path); default: bytes")
    parser.add_argument("--estimator", default=ESTIMATOR_NAME, help="the estimator run on each row's group")


def main(args) -> int:
    """Run the check, print the table and the problems; 0 when there is none."""
    from bot_grpo_verl.plugin import estimators

    if args.estimator not in estimators():
        print(f"PROBLEM: --estimator {args.estimator} is none of the plugin's: {sorted(estimators())}")
        return 1
    report = check(args)
    if report.calls:
        print(table(report.calls))
    for problem in report.problems:
        print(f"PROBLEM: {problem}")
    calls = len(report.calls)
    print("OK" if not report.problems else f"{len(report.problems)} problem(s)", f"({calls} call(s))")
    return 1 if report.problems else 0
