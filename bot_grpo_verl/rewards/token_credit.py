r"""Token-credit reward for verl: every answer letter checked exactly against the reference, as token-level spans.

For the token-credit tasks (in a clone, ``demo/token_credit.py`` generates them): the answer is a list of
whitespace-separated items, the ground truth the reference list joined by single spaces. Item ``i`` of the
response is right when it equals item ``i`` of the reference (position by position: a dropped or inserted item
makes every later one wrong); an item past the reference's end is wrong. In the free-length family the row's
``extra_info["min_items"]`` says the fewest items a right answer holds: any prefix of the reference at least that
long is right (default: all of them). ::

    reward.custom_reward_function.path=bot_grpo_verl/rewards/token_credit.py
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.flip=0.1

Each item's span (the item and the whitespace before it) carries its label, 1 (right) or 0 (wrong); the score
is the outcome, 1 when the response is exactly the reference's items, else 0. The tokens no span covers (the EOS,
trailing whitespace) carry the stop's label (``uncovered``): 1 when the response stopped after as many items as
the reference has (free-length: from ``min_items`` to as many), else 0, so the EOS is labelled by its own
correctness, not by the outcome. With ``flip`` > 0
every label (each item's and the stop's) is flipped with that probability (a noisy token scorer); the score stays
exact. Synchronous, deterministic, thread safe, linear in the response's length.
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

ITEM = re.compile(r"\S+")


@dataclass(frozen=True)
class TokenCreditConfig:
    """Options of :func:`compute_score`, passed as verl's
    ``+reward.custom_reward_function.reward_kwargs.<name>=<value>``.

    Parameters:
        flip (`float`, *optional*, defaults to `0.0`):
            Probability, in [0, 1), that an item's label (1 right, 0 wrong) is flipped: label noise of a token
            scorer. The draws are seeded by SHA-256 of ``flip``, the ground truth and the response, so a sample
            always gets the same labels (deterministic, the same in every worker process). The score is never
            flipped. 0 gives the exact labels.
    """

    flip: float = 0.0

    def __post_init__(self):
        check_options(type(self), {field.name: getattr(self, field.name) for field in fields(self)}, "token_credit")
        check_option_values(self, "", ranges={"flip": 0 <= self.flip < 1})

    @classmethod
    def from_kwargs(cls, kwargs: Mapping) -> "TokenCreditConfig":
        """The config from ``compute_score``'s keyword arguments; an unknown name raises ``ValueError``."""
        return options_from_kwargs(cls, kwargs, "token_credit")

    def flips(self, count: int, ground_truth: str, solution_str: str) -> list[bool]:
        """Whether each of ``count`` labels of this sample is flipped (all False when ``flip`` is 0)."""
        if not self.flip:
            return [False] * count
        key = "\0".join((repr(self.flip), ground_truth, solution_str)).encode("utf-8", "surrogatepass")
        rng = random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8]))
        return [rng.random() < self.flip for _ in range(count)]


def item_spans(solution_str: str) -> list[tuple[int, int, str]]:
    """``(start, end, item)`` per whitespace-separated item of ``solution_str``: ``[start, end)`` holds the item
    and the whitespace before it, so consecutive spans tile the response up to its last item."""
    spans, previous_end = [], 0
    for match in ITEM.finditer(solution_str):
        spans.append((previous_end, match.end(), match.group()))
        previous_end = match.end()
    return spans


def item_labels(items: list[str], reference: list[str]) -> list[bool]:
    """Whether each response item equals the reference's item at its position (past the end: wrong)."""
    return [i < len(reference) and item == reference[i] for i, item in enumerate(items)]


def fewest_items(extra_info, reference_items: int) -> int:
    """The fewest items a right answer holds: ``extra_info["min_items"]`` (absent or None: ``reference_items``).

    Raises:
        ValueError: a ``min_items`` that is not a whole number from 1 to ``reference_items``.
    """
    fewest = (extra_info or {}).get("min_items")
    if fewest is None:
        return reference_items
    if isinstance(fewest, bool) or not isinstance(fewest, numbers.Integral) or not 1 <= fewest <= reference_items:
        raise ValueError(
            f"extra_info['min_items'] must be a whole number from 1 to the reference's {reference_items} items, "
            f"got {fewest!r}"
        )
    return int(fewest)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs) -> dict:
    """verl reward function: per-item labels of a token-credit answer as spans, and the exact-match outcome.

    Args:
        data_source: logged only (any value).
        solution_str: the decoded response (str).
        ground_truth: the reference answer, items separated by whitespace (a non-blank str).
        extra_info: verl's per-sample dict; its ``min_items`` (:func:`fewest_items`), if any, is read.
        **kwargs: :class:`TokenCreditConfig` options (verl's ``reward_kwargs``).

    Returns:
        ``{"score", "acc", "spans", "uncovered", "items", "items_correct", "length_error", "flipped"}``:
        ``score`` = ``acc`` = 1.0 when the response's items are exactly the reference's, else 0.0; ``spans`` one
        ``(start, end, label)`` per item (:func:`item_spans`); ``uncovered`` the stop's label, 1.0 when the
        response has as many items as the reference (free-length: from ``min_items`` to as many; the labels
        flipped where the noise says so); ``items`` the response's item count; ``items_correct`` the fraction of
        the items the response answers for (its own, counted from ``min_items`` up to the reference's; without
        ``min_items``: the reference's) that it has right in place (exact labels); ``length_error`` the response's
        items minus the reference's; ``flipped`` the fraction of labels flipped, the stop's included.

    Raises:
        ValueError: ``solution_str`` not a str, a blank or non-str ``ground_truth``, a bad ``min_items``, or a bad
        option.
    """
    config = TokenCreditConfig.from_kwargs(kwargs)
    if not isinstance(solution_str, str):
        raise ValueError(f"solution_str must be a string, got {type(solution_str).__name__}")
    if not isinstance(ground_truth, str) or not ground_truth.split():
        raise ValueError(f"ground_truth must be the reference items as a non-blank string, got {ground_truth!r}")
    reference = ground_truth.split()
    fewest = fewest_items(extra_info, len(reference))
    spans = item_spans(solution_str)
    labels = item_labels([item for _, _, item in spans], reference)
    stopped_right = fewest <= len(labels) <= len(reference)
    answered_for = max(fewest, min(len(labels), len(reference)))
    flips = config.flips(len(labels) + 1, ground_truth, solution_str)  # the items', then the stop's
    exact = float(stopped_right and all(labels))
    noisy = [float(label != flipped) for label, flipped in zip([*labels, stopped_right], flips, strict=True)]
    return {
        "score": exact,
        "acc": exact,
        "spans": [(start, end, value) for (start, end, _), value in zip(spans, noisy[:-1], strict=True)],
        "uncovered": noisy[-1],
        "items": float(len(labels)),
        "items_correct": sum(labels) / answered_for,
        "length_error": float(len(labels) - len(reference)),
        "flipped": sum(flips) / len(flips),
    }
