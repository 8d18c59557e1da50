"""What the plugin checks of a run that selects it, on verl's driver: the run's shape before the first rollout,
then every batch the trainer samples (:mod:`bot_grpo_verl.verl_compat.trainer_checks` calls them).

At start-up (:func:`config_problems`), the estimator, the reward manager and the placement of token rewards must
fit together. A run that cannot be what its user meant stops with one line naming the fix; a run that may be
meant (``bot_grpo`` with an outcome-only manager is GRPO) is told what it will do, once:

- ``bot_grpo`` with a manager that writes no token rewards: warning, it trains as GRPO;
- another of the plugin's estimators with such a manager: stop, it reads token rewards nobody writes;
- the ``bot_token`` manager with one of verl's outcome estimators (``grpo`` ...): stop, they sum the token rewards;
- ``placement=step_end`` with a spread estimator (``bot_grpo`` ...): stop, it reads every token's reward;
- ``placement=step_end`` with any other estimator of verl's: warning, only ``ps_grpo`` and ``pure`` read steps;
- ``placement=spread`` with ``ps_grpo`` or ``pure``: stop, every token would be a step;
- ``ps_grpo`` or ``pure`` with verl's KL in the reward: stop, it overwrites the step marks.

At the run's first batch (:func:`dropped_token_rewards`), a reward function that returns ``spans`` or
``token_rewards`` to a manager that drops them stops a run whose estimator wanted them, and is reported otherwise.

On every batch of a ``bot_token`` run (:func:`reward_failures`), a sample whose reward failed (the manager's
:data:`~bot_grpo_verl.reward.manager.REWARD_ERROR_KEY`) stops the run with the sample's uid, the problem and the
fix, or, with ``reward.bot_token.on_error=skip``, is left out and counted. A reward function that refused its
options (:data:`~bot_grpo_verl.reward.manager.REWARD_CONFIG_ERROR_KEY`) stops the run as the configuration error
it is, once, whatever ``on_error`` says (:func:`reward_config_error`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from bot_grpo_verl import ESTIMATOR_NAME
from bot_grpo_verl.options import OptionError
from bot_grpo_verl.reward import manager as reward_manager  # the manager's names are read at call time: RUN_CHECKS
from bot_grpo_verl.reward.step_layout import kl_in_reward_problem
from bot_grpo_verl.verl_compat.trainer_checks import VERL_OUTCOME_ESTIMATORS, BatchVerdict, RunChecks

logger = logging.getLogger(__name__)
PREFIX = "bot-grpo-verl: "
SPREAD_ESTIMATORS = (ESTIMATOR_NAME, "bot_grpo_shuffled", "grpo_token_mean", "grpo_token_min")
"""The plugin's estimators that read a reward on every token (``reward.bot_token.placement=spread``)."""
STEP_END_ESTIMATORS = ("ps_grpo", "pure")
"""The plugin's estimators that read step rewards (``reward.bot_token.placement=step_end``)."""
TOKEN_REWARD_KEYS = ("spans", "token_rewards")
SKIPPED_METRIC = "bot_token/skipped_samples"


@dataclass(frozen=True)
class Problem:
    """One mismatch: its one-line message (naming the fix) and whether the run stops on it."""

    message: str
    stops: bool


@dataclass(frozen=True)
class RunShape:
    """What the checks read of a run.

    Attributes:
        estimator: ``algorithm.adv_estimator``.
        manager: ``reward.reward_manager.name``.
        token_manager: whether the manager is ``bot_token`` or a subclass (it writes token rewards).
        placement: ``reward.bot_token.placement`` of a token manager, None otherwise.
    """

    estimator: str
    manager: str
    token_manager: bool
    placement: str | None


def token_reward_options(config):
    """The ``bot_token`` manager's options (``reward.bot_token``) in verl's trainer ``config``."""
    return reward_manager.TokenRewardConfig.from_reward_config(config.get("reward"))


def run_shape(config, reward_manager_cls: type) -> RunShape:
    """The :class:`RunShape` of verl's trainer ``config`` with the reward manager class verl resolved."""
    token_manager = issubclass(reward_manager_cls, reward_manager.BoTTokenRewardManager)
    placement = token_reward_options(config).placement if token_manager else None
    name = str(config.reward.reward_manager.name)
    return RunShape(str(config.algorithm.adv_estimator), name, token_manager, placement)


def overrides_for(estimator: str) -> str:
    """The overrides that run one of the plugin's estimators on token rewards (as ``recipes/algorithms.py`` does)."""
    if estimator == "pure":
        return "+preset=pure"
    chosen = "" if estimator == ESTIMATOR_NAME else f" algorithm.adv_estimator={estimator}"
    placement = " reward.bot_token.placement=step_end" if estimator in STEP_END_ESTIMATORS else ""
    return f"+preset=bot_grpo{chosen}{placement}"


def config_problems(shape: RunShape) -> list[Problem]:
    """The mismatches of a run's estimator, reward manager and placement (see the module's table)."""
    estimator, manager = shape.estimator, shape.manager
    if not shape.token_manager:
        if estimator == ESTIMATOR_NAME:
            message = (
                f"algorithm.adv_estimator={estimator} with the '{manager}' reward manager sees one score per response, "
                "so it trains exactly as grpo and drops any spans or token_rewards of the reward; for token rewards "
                "add +preset=bot_grpo"
            )
            return [Problem(message, stops=False)]
        if estimator in SPREAD_ESTIMATORS + STEP_END_ESTIMATORS:
            message = (
                f"algorithm.adv_estimator={estimator} reads token rewards, which the '{manager}' reward manager does "
                f"not write (it puts one score on each response's last token); run it with {overrides_for(estimator)}"
            )
            return [Problem(message, stops=True)]
        return []
    if estimator in VERL_OUTCOME_ESTIMATORS:
        message = (
            f"algorithm.adv_estimator={estimator} sums each response's token rewards into one score, so with the "
            f"'{manager}' reward manager it trains on that sum, not on the reward's score; for token rewards use "
            f"+preset=bot_grpo, for {estimator} on the score reward.reward_manager.name=naive"
        )
        return [Problem(message, stops=True)]
    if shape.placement == "step_end" and estimator in SPREAD_ESTIMATORS:
        message = (
            f"reward.bot_token.placement=step_end puts each step's reward on its last token only, and "
            f"algorithm.adv_estimator={estimator} reads every token's reward; set reward.bot_token.placement=spread, "
            f"or use an estimator that reads steps ({' or '.join(STEP_END_ESTIMATORS)})"
        )
        return [Problem(message, stops=True)]
    if shape.placement == "step_end" and estimator not in STEP_END_ESTIMATORS:
        message = (
            f"reward.bot_token.placement=step_end is read by {' and '.join(STEP_END_ESTIMATORS)}; "
            f"algorithm.adv_estimator={estimator} sees each step's reward on its last token and 0 on the others"
        )
        return [Problem(message, stops=False)]
    if shape.placement != "step_end" and estimator in STEP_END_ESTIMATORS:
        message = (
            f"algorithm.adv_estimator={estimator} reads steps from reward.bot_token.placement=step_end, and the "
            f"placement is {shape.placement} (every token would be a step); run it with {overrides_for(estimator)}"
        )
        return [Problem(message, stops=True)]
    return []


def dropped_token_rewards(shape: RunShape, infos: list[dict]) -> list[Problem]:
    """At a run's first batch: a reward that returns spans or token rewards to a manager that drops them.

    Args:
        shape: the run.
        infos: each sample's ``reward_extra_info`` (verl's ``naive`` and ``dapo`` managers keep every key the
            reward function returned).
    """
    if shape.token_manager:
        return []
    for info in infos:
        key = next((key for key in TOKEN_REWARD_KEYS if info.get(key) is not None), None)
        if key is None:
            continue
        dropped = (
            f"the reward function returns '{key}', which the '{shape.manager}' reward manager drops: "
            f"algorithm.adv_estimator={shape.estimator} trains on the score alone"
        )
        if shape.estimator in SPREAD_ESTIMATORS + STEP_END_ESTIMATORS:
            return [Problem(f"{dropped}; run it with {overrides_for(shape.estimator)}", stops=True)]
        return [Problem(f"{dropped}; to train on the {key}, use +preset=bot_grpo", stops=False)]
    return []


def reward_failures(infos: list[dict]) -> list[tuple[int, str]]:
    """(position, message) of each sample of a batch whose reward failed, in batch order."""
    failed = [(number, info.get(reward_manager.REWARD_ERROR_KEY)) for number, info in enumerate(infos)]
    return [(number, message) for number, message in failed if isinstance(message, str)]


def reward_config_error(infos: list[dict]) -> None:
    """Raise :class:`~bot_grpo_verl.options.OptionError` when a sample of the batch reports that the reward function
    refused its options: a configuration error, the same for every sample, that ``on_error=skip`` cannot fix."""
    key = reward_manager.REWARD_CONFIG_ERROR_KEY
    messages = [info[key] for info in infos if isinstance(info.get(key), str)]
    if messages:
        raise OptionError(f"{PREFIX}configuration error: {messages[0]}; {reward_manager.REWARD_CONFIG_FIX}")


def failure_verdict(failures: list[tuple[int, str]], batch_size: int, on_error: str) -> BatchVerdict:
    """What a batch with these reward ``failures`` gets: stop (``RuntimeError``) or leave them out and count them.

    Args:
        failures: :func:`reward_failures` of the batch.
        batch_size: the batch's samples.
        on_error: ``reward.bot_token.on_error``.
    """
    skip = on_error == "skip"
    if failures and (not skip or len(failures) == batch_size):
        cause = "every sample of the batch failed its reward, the first: " if skip else ""
        advice = "" if skip else ", or set reward.bot_token.on_error=skip to leave such samples out"
        raise RuntimeError(f"{PREFIX}{cause}{failures[0][1]}; {reward_manager.REWARD_ERROR_FIX}{advice}")
    if failures:
        logger.warning(
            f"{PREFIX}left {len(failures)} of {batch_size} samples out of the batch, their reward failed "
            f"(reward.bot_token.on_error=skip); the first: {failures[0][1]}"
        )
    metrics = {SKIPPED_METRIC: len(failures)} if skip else {}
    return BatchVerdict(left_out=tuple(number for number, _ in failures), metrics=metrics)


def report(problems: list[Problem]) -> None:
    """Log each problem that lets the run go on as a warning; raise ``ValueError`` for the first that stops it."""
    for problem in problems:
        if problem.stops:
            raise ValueError(PREFIX + problem.message)
        logger.warning(PREFIX + problem.message)


def startup_problems(config, reward_manager_cls: type) -> list[Problem]:
    """The problems of a run's shape: :func:`config_problems`, and the KL check of the step estimators (verl's
    driver raises for the ones that stop the run before Ray starts: :mod:`bot_grpo_verl.launch_checks`)."""
    shape = run_shape(config, reward_manager_cls)
    problems = config_problems(shape)
    kl_problem = kl_in_reward_problem(config.algorithm, shape.estimator)
    if shape.estimator in STEP_END_ESTIMATORS and kl_problem is not None:
        problems.append(Problem(kl_problem, stops=True))
    return problems


def check_startup(config, reward_manager_cls: type) -> None:
    """The start-up check of a run: :func:`startup_problems`, reported."""
    report(startup_problems(config, reward_manager_cls))


def check_batch(config, reward_manager_cls: type, infos: list[dict], first: bool) -> BatchVerdict:
    """The check of a batch: :func:`dropped_token_rewards` at the run's first, :func:`reward_failures` on each."""
    shape = run_shape(config, reward_manager_cls)
    if first:
        report(dropped_token_rewards(shape, infos))
    if not shape.token_manager:
        return BatchVerdict()
    reward_config_error(infos)
    return failure_verdict(reward_failures(infos), len(infos), token_reward_options(config).on_error)


RUN_CHECKS = RunChecks(startup=check_startup, batch=check_batch)
"""The checks the plugin hands verl_compat. It may build them while :mod:`bot_grpo_verl.reward.manager` is half
imported (a program that imports the manager first imports verl, which loads the plugin), so the checks read the
manager's names when they run, not when this module is imported."""
