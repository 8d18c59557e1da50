r"""Arithmetic reward for verl: every step checked exactly (an exact process verifier as the PRM) plus a
math-verify outcome, as token-level spans.

Use from any verl recipe (in a clone, ``demo/arithmetic.py`` generates the CPU demo's problems for it)::

    reward.custom_reward_function.path=bot_grpo_verl/rewards/arithmetic_steps.py
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.noise=0.5

:func:`compute_score` splits the response into steps (a blank line between steps). The step holding the
last ``\boxed{...}`` is the answer step: math-verify compares the boxed answer with ``ground_truth``, and
the answer step's characters carry the outcome (1 or 0, also the score). Every other step must be
``a op b = c`` (integers, ``op`` one of ``+ - *``): it is evaluated with Python integers and its
characters get ``+step_value`` if ``c`` is right, ``-step_value`` if it is wrong or the step is not of that
form. See :class:`ArithmeticStepsConfig` for the scale, noise and clipping options of the stability
experiment. Synchronous, deterministic and thread safe; the answer is checked in a worker process within
the time and size limits of :mod:`bot_grpo_verl.rewards.answer_check`.
"""

# No ``from __future__ import annotations``: verl's loader does not register this module in sys.modules,
# and dataclasses look string annotations up there (AttributeError at load time).
import hashlib
import numbers
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields

from bot_grpo_verl.options import check_option_values, check_options, options_from_kwargs
from bot_grpo_verl.reward.token_rewards import split_steps
from bot_grpo_verl.rewards.answer_check import MAX_TIMEOUT_S, TIMEOUT_S, check_answer, ground_truth_text
from bot_grpo_verl.rewards.math_prm import find_boxed

# ``a op b = c`` with integers of at most 30 digits (bounds the cost of checking a step).
STEP = re.compile(r"[ \t]*(-?\d{1,30})[ \t]*([-+*])[ \t]*(-?\d{1,30})[ \t]*=[ \t]*(-?\d{1,30})[ \t]*")
OPERATIONS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
# Bound of step_value, scale, noise and clip: every step value stays a finite float (also in float32).
MAX_MAGNITUDE = 1e6


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
            Steps are the text between runs of this separator (`bot_grpo_verl.reward.token_rewards.split_steps`).
        answer_timeout_s (`float`, *optional*, defaults to `5.0`):
            Wall-clock bound of the answer check, in (0, 600]; see `bot_grpo_verl.rewards.answer_check` for its
            limits. An answer refused or still running at this bound scores 0, with `answer_refused` = 1.

    Every option is type-checked when the config is built (`bot_grpo_verl.options.check_options`:
    finite numbers, not bool; so `noise=inf`, `nan` or `True` raise `ValueError`); `step_value`, `scale`,
    `noise` and `clip` are at most 1e6 (:data:`MAX_MAGNITUDE`).
    """

    step_value: float = 1.0
    scale: float = 1.0
    noise: float = 0.0
    clip: float | None = None
    step_separator: str = "\n\n"
    answer_timeout_s: float = TIMEOUT_S

    def __post_init__(self):
        options = {field.name: getattr(self, field.name) for field in fields(self)}
        check_options(type(self), options, "arithmetic_steps")
        ranges = {
            "step_value": 0 < self.step_value <= MAX_MAGNITUDE,
            "scale": 0 < self.scale <= MAX_MAGNITUDE,
            "noise": 0 <= self.noise <= MAX_MAGNITUDE,
            "clip": self.clip is None or 0 < self.clip <= MAX_MAGNITUDE,
            "step_separator": bool(self.step_separator),
            "answer_timeout_s": 0 < self.answer_timeout_s <= MAX_TIMEOUT_S,
        }
        check_option_values(self, "", ranges=ranges)

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


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """verl reward function: exact step checks and the math-verify outcome as token-level spans.

    Args:
        data_source: logged only (any value).
        solution_str: the decoded response (str).
        ground_truth: the reference answer (str or integer, numpy integers included, e.g. ``"86"``); a
            missing one (None, NaN, blank, ``"nan"``: see ``bot_grpo_verl.rewards.answer_check.ground_truth_text``),
            one math-verify cannot parse, or one over the answer-check limits raises ``ValueError``.
        extra_info: verl's per-sample dict; not used.
        **kwargs: :class:`ArithmeticStepsConfig` options (verl's ``reward_kwargs``).

    Returns:
        ``{"score", "spans", "acc", "steps", "steps_correct", "answer_found", "answer_refused"}``:
        ``answer_refused`` is 1.0 when the answer exceeded a check limit or ``answer_timeout_s`` (it then
        scores 0, see :mod:`bot_grpo_verl.rewards.answer_check`); ``score`` = ``acc`` = the
        outcome (1.0 or 0.0); ``spans`` = one ``(start, end, value)`` per step, tiling the response (see
        :func:`bot_grpo_verl.reward.token_rewards.split_steps`); ``steps`` counts the checked (non-answer) steps,
        ``steps_correct`` the right ones; ``answer_found`` is 1.0 if a ``\\boxed{}`` answer exists. An empty
        response has no spans; a whitespace-only one is one wrong step.
    """
    config = ArithmeticStepsConfig.from_kwargs(kwargs)
    if not isinstance(solution_str, str):
        raise ValueError(f"solution_str must be a string, got {type(solution_str).__name__}")
    truth = ground_truth_text(ground_truth, numbers.Integral)
    if truth is None:
        raise ValueError(f"ground_truth is missing ({ground_truth!r}): every arithmetic sample needs its answer")
    ranges = split_steps(solution_str, config.step_separator)
    answer = find_boxed(solution_str)
    # Called without an answer too, so a ground truth that math-verify cannot parse always raises.
    verdict = check_answer(truth, solution_str[answer[0] : answer[1]] if answer else None, config.answer_timeout_s)
    outcome = float(verdict.correct)
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
        "answer_refused": float(verdict.refused),
    }
