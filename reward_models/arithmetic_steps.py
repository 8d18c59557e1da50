r"""Arithmetic reward for verl: every step checked exactly (an exact process verifier as the PRM) plus a
math-verify outcome, as token-level spans.

Use from any verl recipe (the demo's arithmetic task, :mod:`bot_grpo_verl.demo.arithmetic`)::

    reward.custom_reward_function.path=reward_models/arithmetic_steps.py
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.noise=0.5

:func:`compute_score` splits the response into steps (a blank line between steps). The step holding the
last ``\boxed{...}`` is the answer step: math-verify compares the boxed answer with ``ground_truth``, and
the answer step's characters carry the outcome (1 or 0, also the score). Every other step must be
``a op b = c`` (integers, ``op`` one of ``+ - *``): it is evaluated with Python integers and its
characters get ``+step_value`` if ``c`` is right, ``-step_value`` if it is wrong or the step is not of that
form. See :class:`ArithmeticStepsConfig` for the scale, noise and clipping options of the stability
experiment. Synchronous, pure and thread safe.
"""

# No ``from __future__ import annotations``: verl's loader does not register this module in sys.modules,
# and dataclasses look string annotations up there (AttributeError at load time).
import hashlib
import random
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# verl loads this file by path (importlib spec, not as a package member), so its sibling modules are
# imported through the repository root, put on sys.path once.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.append(_ROOT)

from bot_grpo_verl.options import options_from_kwargs  # noqa: E402
from bot_grpo_verl.token_rewards import split_steps  # noqa: E402
from reward_models.math_prm import BOXED, check_answer, find_final_answer  # noqa: E402

# ``a op b = c`` with integers of at most 30 digits (bounds the cost of checking a step).
STEP = re.compile(r"[ \t]*(-?\d{1,30})[ \t]*([-+*])[ \t]*(-?\d{1,30})[ \t]*=[ \t]*(-?\d{1,30})[ \t]*")
OPERATIONS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}


@dataclass(frozen=True)
class ArithmeticStepsConfig:
    r"""Options of :func:`compute_score`, passed as verl's
    ``+reward.custom_reward_function.reward_kwargs.<name>=<value>``.

    Step k's characters carry ``clip(scale * s_k * step_value + noise * z_k)``, where ``s_k`` is +1 for a
    correct step and -1 for a wrong or unparseable one and ``z_k`` is a standard normal draw; the answer
    step's characters carry the outcome (1 if math-verify accepts the boxed answer, else 0), which is also
    the score and is never scaled, noised or clipped.

    Parameters:
        step_value (`float`, *optional*, defaults to `1.0`):
            Magnitude of a checked step's value (> 0). With the defaults every token reward lies in
            [-1, 1] (clean and bounded).
        scale (`float`, *optional*, defaults to `1.0`):
            Multiplies the step values (> 0). With `scale` > 1 and no `clip` the process rewards outgrow
            the outcome: the "unbounded" arm of the stability experiment (PURE, arXiv:2504.15275, shows
            that unbounded or summed process rewards destabilise RL; clipping or min-form credit helps).
        noise (`float`, *optional*, defaults to `0.0`):
            Standard deviation of Gaussian noise added to each step value (>= 0): a noisy PRM. The draws
            are seeded by SHA-256 of the response text, so a response always gets the same values
            (deterministic, reproducible, the same in every worker process).
        clip (`float`, *optional*, defaults to `None`):
            Bound the step values to [-clip, clip] (> 0); None leaves them unbounded.
        step_separator (`str`, *optional*, defaults to `"\n\n"`):
            Steps are the text between runs of this separator (`bot_grpo_verl.token_rewards.split_steps`).
    """

    step_value: float = 1.0
    scale: float = 1.0
    noise: float = 0.0
    clip: float | None = None
    step_separator: str = "\n\n"

    def __post_init__(self):
        for name in ("step_value", "scale", "noise", "clip"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                raise ValueError(f"{name}={value!r} must be a number")
        checks = {
            "step_value": self.step_value > 0,
            "scale": self.scale > 0,
            "noise": self.noise >= 0,
            "clip": self.clip is None or self.clip > 0,
            "step_separator": isinstance(self.step_separator, str) and bool(self.step_separator),
        }
        for name, valid in checks.items():
            if not valid:
                raise ValueError(f"{name}={getattr(self, name)!r} is out of range (see ArithmeticStepsConfig)")

    @classmethod
    def from_kwargs(cls, kwargs: Mapping) -> "ArithmeticStepsConfig":
        """The config from ``compute_score``'s keyword arguments; an unknown name raises ``ValueError``."""
        return options_from_kwargs(cls, kwargs, "arithmetic_steps")

    def step_values(self, correct: list[bool], text: str) -> list[float]:
        """Per step of ``text``, the value of a correct (True) or wrong (False) step, noised and clipped."""
        rng = random.Random(int.from_bytes(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()[:8]))
        values = []
        for ok in correct:
            value = self.scale * self.step_value * (1.0 if ok else -1.0)
            if self.noise:
                value += rng.gauss(0.0, self.noise)
            if self.clip is not None:
                value = min(self.clip, max(-self.clip, value))
            values.append(float(value))
        return values


def check_step(step: str) -> bool:
    """Whether ``step`` is ``a op b = c`` (integers; ``op`` in ``+ - *``; spaces and tabs free) with ``c`` right."""
    match = STEP.fullmatch(step.strip())
    if match is None:
        return False
    left, operation, right, result = match.groups()
    return OPERATIONS[operation](int(left), int(right)) == int(result)


def boxed_answer(text: str) -> tuple[int, int] | None:
    r"""Character range ``[start, end)`` of the content of the last balanced ``\boxed{...}``, or None."""
    answer = find_final_answer(text)
    if answer is None or not text[: answer[0]].endswith(BOXED):
        return None  # find_final_answer fell back to the last number: no boxed answer
    return answer


def _ground_truth_text(ground_truth) -> str:
    if isinstance(ground_truth, bool) or not isinstance(ground_truth, str | int):
        raise ValueError(f"ground_truth must be a string or an integer, got {ground_truth!r}")
    text = str(ground_truth).strip()
    if not text:
        raise ValueError("ground_truth is blank")
    return text


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """verl reward function: exact step checks and the math-verify outcome as token-level spans.

    Args:
        data_source: logged only (any value).
        solution_str: the decoded response (str).
        ground_truth: the reference answer (str or int, e.g. ``"86"``); a math-verify-unparseable or blank
            one raises ``ValueError``.
        extra_info: verl's per-sample dict; not used.
        **kwargs: :class:`ArithmeticStepsConfig` options (verl's ``reward_kwargs``).

    Returns:
        ``{"score", "spans", "acc", "steps", "steps_correct", "answer_found"}``: ``score`` = ``acc`` = the
        outcome (1.0 or 0.0); ``spans`` = one ``(start, end, value)`` per step, tiling the response (see
        :func:`bot_grpo_verl.token_rewards.split_steps`); ``steps`` counts the checked (non-answer) steps,
        ``steps_correct`` the right ones; ``answer_found`` is 1.0 if a ``\\boxed{}`` answer exists. An empty
        response has no spans; a whitespace-only one is one wrong step.
    """
    config = ArithmeticStepsConfig.from_kwargs(kwargs)
    if not isinstance(solution_str, str):
        raise ValueError(f"solution_str must be a string, got {type(solution_str).__name__}")
    truth = _ground_truth_text(ground_truth)
    ranges = split_steps(solution_str, config.step_separator)
    answer = boxed_answer(solution_str)
    # Called without an answer too, so a ground truth that math-verify cannot parse always raises.
    outcome = float(check_answer(truth, solution_str[answer[0] : answer[1]] if answer else "")[0])
    answer_step = next((k for k, (start, end) in enumerate(ranges) if answer and start <= answer[0] < end), None)
    checked = [k for k in range(len(ranges)) if k != answer_step]
    right = [check_step(solution_str[ranges[k][0] : ranges[k][1]]) for k in checked]
    values = dict(zip(checked, config.step_values(right, solution_str), strict=True))
    if answer_step is not None:
        values[answer_step] = outcome
    spans = [(start, end, values[k]) for k, (start, end) in enumerate(ranges)]
    return {
        "score": outcome,
        "spans": spans,
        "acc": outcome,
        "steps": float(len(checked)),
        "steps_correct": float(sum(right)),
        "answer_found": float(answer is not None),
    }
