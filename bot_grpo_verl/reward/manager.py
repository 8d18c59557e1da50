"""``bot_token``: a verl reward manager that turns a reward function's spans into dense token rewards.

It calls the user's ``compute_score`` exactly as verl's ``naive`` manager does (sync or async, same
arguments), checks the result against the contract of :mod:`bot_grpo_verl.reward.token_rewards`, aligns it
to the response tokens (:mod:`bot_grpo_verl.reward.alignment`) and returns the outcome score as a
:class:`TokenRewardScore`: a float that carries the per-token rewards. verl moves it like any score;
building the manager or a score selects the plugin in that process (:mod:`bot_grpo_verl.selection`), so that
:mod:`bot_grpo_verl.verl_compat` and :meth:`BoTTokenRewardManager.assemble_rm_scores` write it into
``rm_scores`` densely, which verl hands to the estimator as ``token_level_rewards``.

A sample it cannot score (the function raised, or returned something outside the contract) is not raised in
the reward worker, where verl would drop its group and carry on: :func:`failed_sample` reports it in the batch,
and the trainer's driver stops the run with the message or leaves the sample out (``reward.bot_token.on_error``).
The message of an exception names where the reward function raised it (file, line, function and code:
:func:`where_it_raised`), and the worker logs its traceback once per place. An option the reward function
refuses (:class:`~bot_grpo_verl.options.OptionError`) is a configuration error, the same for every sample: it is
reported under :data:`REWARD_CONFIG_ERROR_KEY` and stops the run whatever ``on_error`` says.
"""

from __future__ import annotations

import inspect
import logging
import sysconfig
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from omegaconf import OmegaConf
from verl import DataProto
from verl.experimental.reward_loop.reward_manager.base import RewardManagerBase
from verl.experimental.reward_loop.reward_manager.registry import register
from verl.utils.reward_score import default_compute_score

from bot_grpo_verl.options import OptionError, check_option_values, options_from_config
from bot_grpo_verl.reward.alignment import token_char_ranges, token_values_from_spans
from bot_grpo_verl.reward.step_layout import NOT_A_STEP, is_step_end, step_end_rewards, turn_end_rewards
from bot_grpo_verl.reward.token_rewards import TOKEN_VALUE_KEYS, parse_reward_result
from bot_grpo_verl.reward.turns import (
    RESPONSE_MASK_KEY,
    assistant_turns,
    tool_call_spans,
    turn_char_spans,
    turn_of_token,
    value_spans,
)
from bot_grpo_verl.selection import select

REWARD_MANAGER_NAME = "bot_token"
PLACEMENTS = ("spread", "step_end")
ON_ERROR = ("stop", "skip")
VERL_VALUES = {"off": None, "tool_rewards": "call_rewards", "turn_scores": "turn_rewards"}
"""``reward.bot_token.verl_values``: which of verl's agent-loop lists to read, and the result key it becomes."""
REWARD_ERROR_KEY = "bot_token_error"
"""The ``reward_extra_info`` key under which :meth:`BoTTokenRewardManager.run_single` reports a sample it could
not score (its value: the message, a string); the trainer's driver reads it (:mod:`bot_grpo_verl.run_checks`)."""
REWARD_ERROR_FIX = (
    "fix the reward function (what it may return: docs/token-rewards.md#the-contract; "
    "'bot-grpo-verl check-reward FILE' tries it on real rows in seconds)"
)
REWARD_CONFIG_ERROR_KEY = "bot_token_config_error"
"""The ``reward_extra_info`` key of a sample whose reward function refused its options (verl's ``reward_kwargs``):
the message, a string; the trainer's driver stops the run on it as a configuration error."""
REWARD_CONFIG_FIX = (
    "fix reward.custom_reward_function.reward_kwargs ('bot-grpo-verl check-reward FILE --reward-kwargs ...' "
    "checks them in seconds)"
)
logger = logging.getLogger(__name__)
_LOGGED_PLACES: set[tuple[str, int, str]] = set()
NOT_THE_REWARDS = (
    sysconfig.get_paths()["stdlib"],
    str(Path(__file__).resolve().parent),  # the manager, the contract and the alignment
    str(Path(inspect.getfile(RewardManagerBase)).resolve().parents[3]),  # verl
)
"""Files no frame of a reward function's own code is in: the standard library, this package's reward layer, verl."""


class TokenRewardScore(float):
    """An outcome score (its float value) that carries one reward per response token.

    verl's agent loop stores a sample's reward as a float and writes it on the last token; a
    ``TokenRewardScore`` passes through the same code unchanged and lets the plugin write the dense
    rewards instead. Anything that reads it as a plain float sees the outcome score.

    ``token_rewards`` is a read-only float32 array of shape (L,), the precision of ``rm_scores``: at 16k
    tokens a sample weighs about 64 kB in memory and when pickled across Ray.

    ``error`` is the message of a sample that could not be scored (its score and token rewards are then NaN),
    None otherwise.
    """

    token_rewards: np.ndarray
    error: str | None

    def __new__(cls, score: float, token_rewards, error: str | None = None):
        select()  # where the score arrives (an agent-loop worker), verl's agent loop writes it densely
        value = super().__new__(cls, score)
        value.token_rewards = np.array(token_rewards, dtype=np.float32)
        value.token_rewards.flags.writeable = False
        value.error = error
        return value

    def __reduce__(self):
        return TokenRewardScore, (float(self), self.token_rewards, self.error)


@dataclass(frozen=True)
class TokenRewardConfig:
    """Options of the ``bot_token`` reward manager, read from ``reward.bot_token`` of verl's config.

    Parameters:
        clip_range (`list[float]` or `None`, *optional*, defaults to `None`):
            ``[low, high]`` bounds applied to every final token reward. The BoT-GRPO paper finds that
            clean, bounded, stable token rewards beat richer but noisier ones; bound unbounded scorers
            (a PRM's logits, a count of lint errors) here. `None` leaves them as returned.
        outcome_weight (`float`, *optional*, defaults to `0.0`):
            Mixes the outcome score into every token: ``r_t <- (1 - w) r_t + w * score``. ``0`` keeps
            the token rewards, ``1`` gives every token the outcome (GRPO through ``bot_grpo``).
        placement (`str`, *optional*, defaults to `"spread"`):
            Where a span's value goes. `"spread"`: on every token the span covers (what ``bot_grpo``
            consumes). `"step_end"`: the step layout of process supervision (:func:`step_end_rewards`):
            each span is one step whose value sits on its last token; a response without spans is one
            step, the outcome score on its last valid token; every other token is no step. Read by
            ``ps_grpo`` (DeepSeekMath arXiv:2402.03300, section 4.1.3) and ``pure`` (arXiv:2504.15275).
            Takes no `outcome_weight` and no ``token_rewards`` (they mark no steps).
        on_error (`str`, *optional*, defaults to `"stop"`):
            What a run does with a sample whose reward failed (the reward function raised, or returned something
            outside the contract). `"stop"`: the run ends at the first batch holding one, with the sample's uid,
            the problem and the fix. `"skip"`: the sample is left out of the batch (training and validation; the
            rest of its group stays), counted in ``bot_token/skipped_samples`` and logged once per batch; a batch
            whose every sample failed still ends the run. verl's colocated reward-model path always stops.
        verl_values (`str`, *optional*, defaults to `"off"`):
            Per-call or per-turn values from verl's agent loop instead of the reward function. `"tool_rewards"`:
            verl's ``tool_rewards`` (one per tool call, from each tool's ``execute``) as the result's
            ``call_rewards``; `"turn_scores"`: verl's ``turn_scores`` as ``turn_rewards`` (one per assistant
            turn). The reward function then returns the outcome (a number, or a dict without token values).
            `"off"` reads neither.
    """

    clip_range: tuple[float, float] | None = None
    outcome_weight: float = 0.0
    placement: str = "spread"
    on_error: str = "stop"
    verl_values: str = "off"

    def __post_init__(self):
        if self.clip_range is not None:
            if (
                not isinstance(self.clip_range, Sequence)
                or len(self.clip_range) != 2
                or not self.clip_range[0] <= self.clip_range[1]
            ):
                raise ValueError(
                    f"reward.bot_token.clip_range must be [low, high] with low <= high, got {self.clip_range}"
                )
            object.__setattr__(self, "clip_range", (float(self.clip_range[0]), float(self.clip_range[1])))
        if not 0.0 <= self.outcome_weight <= 1.0:
            raise ValueError(f"reward.bot_token.outcome_weight must be in [0, 1], got {self.outcome_weight}")
        choices = {"placement": PLACEMENTS, "on_error": ON_ERROR, "verl_values": tuple(VERL_VALUES)}
        check_option_values(self, "reward.bot_token", choices=choices)
        if self.placement == "step_end" and self.outcome_weight:
            raise ValueError("reward.bot_token.placement=step_end takes no outcome_weight (it would fill every token)")

    @classmethod
    def from_reward_config(cls, reward_config: Mapping | None) -> TokenRewardConfig:
        return options_from_config(cls, reward_config, "bot_token", "reward.bot_token")


def dense_token_rewards(
    result, tokenizer, response_ids, options: TokenRewardConfig, assistant: np.ndarray | None = None
) -> tuple[np.ndarray, dict]:
    """Turn a reward function's return value into one reward per response token.

    Args:
        result: what the reward function returned (float or dict, see :mod:`bot_grpo_verl.reward.token_rewards`).
        tokenizer: the policy's tokenizer.
        response_ids: the valid response token ids, shape (L,).
        options: clipping and outcome mixing.
        assistant: as for :func:`aligned_token_rewards`.

    Returns:
        As :func:`aligned_token_rewards`.
    """
    return aligned_token_rewards(result, *token_char_ranges(tokenizer, response_ids), options, assistant)


def aligned_token_rewards(
    result,
    text: str,
    ranges: np.ndarray,
    options: TokenRewardConfig,
    assistant: np.ndarray | None = None,
    calls: list[tuple[int, int]] | None = None,
) -> tuple[np.ndarray, dict]:
    """:func:`dense_token_rewards` once the response is decoded and aligned.

    Args:
        result: what the reward function returned.
        text: the decoded response (``solution_str``).
        ranges: int64 (L, 2), each token's characters in ``text`` (:func:`token_char_ranges`).
        options: clipping and outcome mixing.
        assistant: bool (L,), the tokens the policy generated (verl's ``response_mask``); None: all of them
            (one assistant turn). The turns and tool calls of ``turn_rewards`` and ``call_rewards`` are read
            from it (:mod:`bot_grpo_verl.reward.turns`): a turn's value goes on all its tokens (with
            ``placement=step_end``: on its last token, one step per turn), a call's on the tokens of its
            characters; every other token gets 0 (``-0.0``, no step, with ``placement=step_end``).
        calls: the tool calls' characters in ``text``; None: every call in the turns
            (:func:`~bot_grpo_verl.reward.turns.tool_call_spans`).

    Returns:
        rewards: float64 array of shape (L,).
        info: scalar logs: ``score``, ``acc`` (the score, unless the function returns its own),
            ``token_reward_mean``, ``span_coverage`` (fraction of assistant tokens whose value came from a span,
            ``token_rewards``, a turn or a call) and the function's extra keys.
    """
    length = len(ranges)
    assistant = np.ones(length, dtype=bool) if assistant is None else np.asarray(assistant, dtype=bool)
    turns = assistant_turns(assistant)
    calls = tool_call_spans(text, turn_char_spans(turns, ranges)) if calls is None else calls
    parsed = parse_reward_result(result, len(text), length, len(turns), len(calls))
    if parsed.call_rewards is not None:
        parsed = replace(parsed, spans=value_spans(calls, parsed.call_rewards), call_rewards=None)
    if options.placement == "step_end":
        rewards, info = step_layout_with_info(parsed, ranges, len(text), options, assistant, turns)
        return np.where(assistant, rewards, NOT_A_STEP), info
    if parsed.turn_rewards is not None:
        values = np.append(parsed.turn_rewards, parsed.score)[turn_of_token(turns, length)]  # -1: the score
        parsed = replace(parsed, token_rewards=values, turn_rewards=None)
    if parsed.token_rewards is not None:
        rewards = parsed.token_rewards
        covered = np.ones(length, dtype=bool)
    elif parsed.spans:
        rewards = token_values_from_spans(ranges, parsed.spans, np.nan, len(text))
        covered = ~np.isnan(rewards)
        rewards = np.where(covered, rewards, parsed.score if parsed.uncovered is None else parsed.uncovered)
    else:
        rewards = np.full(length, parsed.score)
        covered = np.zeros(length, dtype=bool)

    rewards = (1.0 - options.outcome_weight) * rewards + options.outcome_weight * parsed.score
    if options.clip_range is not None:
        rewards = np.clip(rewards, *options.clip_range)
    return np.where(assistant, rewards, 0.0), reward_info(parsed, rewards[assistant], covered[assistant])


def with_verl_values(result, options: TokenRewardConfig, tool_extra_fields) -> Any:
    """``result`` with verl's ``tool_rewards`` or ``turn_scores`` (``options.verl_values``) under the key the
    contract reads them from (``call_rewards``, ``turn_rewards``); ``result`` itself when the option is off.

    Raises:
        ValueError: the reward function returned token values of its own, or verl gave no such list.
    """
    key = VERL_VALUES[options.verl_values]
    if key is None:
        return result
    values = (tool_extra_fields or {}).get(options.verl_values)
    if values is None:
        raise ValueError(
            f"reward.bot_token.verl_values={options.verl_values}: verl's agent loop gave no {options.verl_values!r} "
            "(use an agent loop that returns it, such as verl's tool_agent)"
        )
    if not isinstance(result, Mapping):
        return {"score": result, key: values}
    given = [name for name in TOKEN_VALUE_KEYS if result.get(name) is not None]
    if given:
        raise ValueError(
            f"reward.bot_token.verl_values={options.verl_values} places verl's {options.verl_values}, but the "
            f"reward function also returned {given}: return the outcome only, or turn the option off"
        )
    return {**result, key: values}


def reward_info(parsed, rewards: np.ndarray, covered: np.ndarray) -> dict:
    """The scalar logs of one response (see :func:`aligned_token_rewards`)."""
    return {
        "acc": parsed.score,  # verl's validation reports "acc" as its core metric when present
        **parsed.extra,
        "score": parsed.score,
        "token_reward_mean": float(rewards.mean()) if len(rewards) else parsed.score,
        "span_coverage": float(covered.mean()) if len(covered) else 0.0,
    }


def step_layout_with_info(
    parsed, ranges: np.ndarray, text_length: int, options: TokenRewardConfig, assistant: np.ndarray, turns: np.ndarray
) -> tuple[np.ndarray, dict]:
    """:func:`aligned_token_rewards` for ``placement=step_end``: :func:`step_end_rewards` of the parsed result
    (:func:`turn_end_rewards` for ``turn_rewards``, ``turns`` int64 (T, 2) token ranges), its step values
    clipped to ``clip_range``; ``token_reward_mean`` is the mean step value of the assistant tokens (shapes as
    there)."""
    if parsed.token_rewards is not None:
        raise ValueError(
            "reward.bot_token.placement=step_end needs spans (one per step) or a plain score: 'token_rewards' "
            "mark no steps"
        )
    clip = options.clip_range or (-np.inf, np.inf)
    if parsed.turn_rewards is not None:
        rewards, covered = turn_end_rewards(turns, np.clip(parsed.turn_rewards, *clip), len(ranges)), assistant
        return rewards, reward_info(parsed, rewards[is_step_end(rewards)], covered[assistant])
    spans = tuple((start, end, float(np.clip(value, *clip))) for start, end, value in parsed.spans or ())
    uncovered = None if parsed.uncovered is None else float(np.clip(parsed.uncovered, *clip))
    rewards, covered = step_end_rewards(ranges, spans, float(np.clip(parsed.score, *clip)), text_length, uncovered)
    steps = rewards[is_step_end(rewards) & assistant]
    return rewards, reward_info(parsed, steps, covered[assistant])


# Registered when this module runs, like verl's own managers: importing it first (``import verl`` then
# loads the plugin, which imports it again while it is half done) must still register it.
@register(REWARD_MANAGER_NAME)
class BoTTokenRewardManager(RewardManagerBase):
    """Dense token rewards from a verl reward function that returns spans or token rewards.

    Select it with ``reward.reward_manager.name=bot_token`` (the ``+preset=bot_grpo`` preset does).
    Options: ``reward.bot_token.*`` (:class:`TokenRewardConfig`).

    To bring your own token scorer (a PRM served elsewhere, a linter, a test runner), subclass it and
    override :meth:`score_response`; everything else keeps verl's calling convention. Load the subclass
    with ``reward.reward_manager.source=importlib reward.reward_manager.module.path=FILE
    reward.reward_manager.name=CLASS``.
    """

    def __init__(self, config, tokenizer, compute_score, reward_router_address=None, reward_model_tokenizer=None):
        select()  # the run uses the plugin's reward manager
        _refuse_unsupported_trainer(config)
        super().__init__(config, tokenizer, compute_score)
        self.compute_score = compute_score or default_compute_score
        self.is_async_reward_score = inspect.iscoroutinefunction(self.compute_score)
        self.options = TokenRewardConfig.from_reward_config(config.get("reward"))
        # the calls verl's tool agent loop executes per turn (its tool_rewards): the rest get no call value
        self.calls_per_turn = OmegaConf.select(config, "actor_rollout_ref.rollout.multi_turn.max_parallel_calls")
        self.extra_reward_kwargs = (
            {"reward_router_address": reward_router_address, "reward_model_tokenizer": reward_model_tokenizer}
            if reward_router_address is not None
            else {}
        )

    async def score_response(
        self, *, data_source: str, solution_str: str, ground_truth: Any, extra_info: dict, response_ids: list[int]
    ):
        """Score one response: return a float or a dict with ``score`` plus ``spans`` or ``token_rewards``.

        The default calls the configured reward function (``reward.custom_reward_function``) the way
        verl's ``naive`` manager does. ``response_ids`` are the valid response token ids, for scorers
        that work on tokens.
        """
        kwargs = dict(
            data_source=data_source,
            solution_str=solution_str,
            ground_truth=ground_truth,
            extra_info=extra_info,
            **self.extra_reward_kwargs,
        )
        if self.is_async_reward_score:
            return await self.compute_score(**kwargs)
        return await self.loop.run_in_executor(None, lambda: self.compute_score(**kwargs))

    async def run_single(self, data: DataProto) -> dict:
        data_item = data[-1]  # several outputs of one session: the reward belongs to the last one
        response_ids = data_item.batch["responses"]
        valid_length = int(data_item.batch["attention_mask"][-response_ids.shape[-1] :].sum())
        valid_response_ids = response_ids[:valid_length]
        data_source = data_item.non_tensor_batch["data_source"]
        ground_truth = data_item.non_tensor_batch["reward_model"]["ground_truth"]
        extra_info = dict(data_item.non_tensor_batch.get("extra_info", {}) or {})
        tool_extra_fields = data_item.non_tensor_batch.get("tool_extra_fields", None)
        if tool_extra_fields is not None:
            extra_info.update(tool_extra_fields.items())
        extra_info["num_turns"] = data_item.non_tensor_batch.get("__num_turns__", None)
        response_mask = data_item.non_tensor_batch.get(RESPONSE_MASK_KEY)  # absent: one assistant turn
        assistant = np.ones(valid_length, dtype=bool) if response_mask is None else response_mask[:valid_length] > 0
        extra_info["rollout_reward_scores"] = data_item.non_tensor_batch.get("reward_scores", {})

        sample = f"sample uid={data_item.non_tensor_batch.get('uid', '?')} data_source={str(data_source)!r}"
        try:
            # The alignment returns the decoded text, the solution_str of verl's naive manager: taken from its
            # byte table where that is the tokenizer's decode, at most one decode otherwise.
            text, ranges = await self.loop.run_in_executor(
                None, lambda: token_char_ranges(self.tokenizer, valid_response_ids)
            )
            turns = turn_char_spans(assistant_turns(assistant), ranges)
            calls = tool_call_spans(text, turns, self.calls_per_turn)
            extra_info["turn_spans"], extra_info["call_spans"] = turns.tolist(), list(map(list, calls))
            result = await self.score_response(
                data_source=data_source,
                solution_str=text,
                ground_truth=ground_truth,
                extra_info=extra_info,
                response_ids=valid_response_ids.tolist(),
            )
            result = with_verl_values(result, self.options, tool_extra_fields)
            # ~0.2 ms at 4k tokens: inline
            rewards, info = aligned_token_rewards(result, text, ranges, self.options, assistant, calls)
        except Exception as error:
            return failed_sample(
                failure_message(sample, error), valid_length, config_error=isinstance(error, OptionError)
            )
        return {"reward_score": TokenRewardScore(info["score"], rewards), "reward_extra_info": info}

    @classmethod
    def assemble_rm_scores(cls, data: DataProto, scores: list[float]) -> torch.Tensor:
        """Write each sample's token rewards from its first response position (colocated reward path).

        Args:
            data: the batch given to :meth:`run_single`, with ``prompts``, ``responses`` and
                ``attention_mask`` (prompts, then right-padded responses).
            scores: one :class:`TokenRewardScore` per sample.

        Returns:
            ``rm_scores`` of shape (len(data), response_length), float32.
        """
        rm_scores = torch.zeros_like(data.batch["responses"], dtype=torch.float32)
        prompt_length = data.batch["prompts"].size(1)
        valid_lengths = data.batch["attention_mask"][:, prompt_length:].sum(dim=1).tolist()
        for row, (score, length) in enumerate(zip(scores, valid_lengths, strict=True)):
            if getattr(score, "error", None) is not None:
                raise RuntimeError(f"{score.error}; {REWARD_ERROR_FIX}")
            rewards = getattr(score, "token_rewards", None)
            if rewards is None or len(rewards) != length:
                raise ValueError(
                    f"sample {row}: expected {length} token rewards from the bot_token manager, got "
                    f"{None if rewards is None else len(rewards)}"
                )
            rm_scores[row, :length] = torch.tensor(rewards)
        return rm_scores


def reward_frames(error: BaseException) -> list[traceback.FrameSummary]:
    """The frames of ``error``'s traceback in the reward function's own code (outside :data:`NOT_THE_REWARDS`),
    outermost first; those outside installed packages when there are any (the user's file rather than numpy's)."""
    frames = [
        frame for frame in traceback.extract_tb(error.__traceback__) if not frame.filename.startswith(NOT_THE_REWARDS)
    ]
    installed = tuple(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    own = [frame for frame in frames if not frame.filename.startswith(installed)]
    return own or frames


def where_it_raised(error: BaseException) -> str | None:
    """``FILE:LINE in FUNCTION: CODE`` of the innermost frame of the reward function's own code that ``error``
    passed through, None when it was raised outside it (the contract check of a returned value)."""
    frames = reward_frames(error)
    if not frames:
        return None
    frame = frames[-1]
    return f"{frame.filename}:{frame.lineno} in {frame.name}: {(frame.line or '').strip()}"


def failure_message(sample: str, error: BaseException) -> str:
    """The one-line report of a sample whose reward failed with ``error`` (where the reward raised it, if it did);
    the traceback of the reward's own frames is logged once per place in this process."""
    if isinstance(error, OptionError):
        message = f"the reward function refused its options (first seen with {sample}): {error}"
    else:
        message = f"bot_token reward failed for {sample}: {type(error).__name__}: {error}"
    where = where_it_raised(error)
    if where is None:
        return message
    frame = reward_frames(error)[-1]
    place = (frame.filename, frame.lineno or 0, type(error).__name__)
    if place not in _LOGGED_PLACES:
        _LOGGED_PLACES.add(place)
        lines = "".join(traceback.format_list(reward_frames(error)))
        logger.error(f"bot-grpo-verl: {message}\nTraceback of the reward function (most recent call last):\n{lines}")
    return f"{message} (raised at {where})"


def failed_sample(message: str, token_count: int, config_error: bool = False) -> dict:
    """:meth:`BoTTokenRewardManager.run_single`'s result for a sample it could not score: ``message`` under
    :data:`REWARD_ERROR_KEY`, NaN in place of the score and the token rewards.

    verl's agent loop stores the sample as any other; the trainer's driver finds the message in the batch and stops
    the run or leaves the sample out (``reward.bot_token.on_error``). NaN makes an estimator that would still see
    the sample fail rather than train on a made-up reward; ``acc`` is there for verl's group filter
    (``algorithm.filter_groups.metric=acc``), which reads it before the driver does. A ``config_error`` (the
    reward function refused its options) goes under :data:`REWARD_CONFIG_ERROR_KEY` instead.
    """
    nan = float("nan")
    key = REWARD_CONFIG_ERROR_KEY if config_error else REWARD_ERROR_KEY
    return {
        "reward_score": TokenRewardScore(nan, np.full(token_count, nan), error=message),
        "reward_extra_info": {"acc": nan, "score": nan, key: message},
    }


def _refuse_unsupported_trainer(config) -> None:
    """Token rewards reach the estimator only on verl's V1 trainer; refuse the others at start-up."""
    if "async_training" in config:
        raise RuntimeError(
            "the bot_token reward manager does not support verl's fully-async trainer: its agent loop keeps "
            "only a last-token reward. Use the default V1 trainer (python -m verl.trainer.main_ppo)."
        )
    if not config.trainer.get("use_v1", True):
        raise RuntimeError(
            "the bot_token reward manager does not support verl's legacy trainer (trainer.use_v1=False): it "
            "keeps only a last-token reward. Use the default V1 trainer (trainer.use_v1=True)."
        )
