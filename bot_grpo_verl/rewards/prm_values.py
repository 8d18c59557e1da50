"""From a PRM's P(correct) to the value each step's tokens carry: the probability map, PURE's min-form credit
assignment (arXiv:2504.15275), the mix with the outcome, the clip.

In the symbols of :class:`bot_grpo_verl.rewards.math_prm.MathPRMConfig`: step k's P(correct) ``p_k`` becomes
``v_k = g(p_k)`` (:func:`to_values`), :func:`aggregate` turns ``v`` into ``a``, and :func:`mix_outcome`
gives step k ``(1 - lambda) a_k + lambda o``; :func:`clip_value` bounds a value.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

AGGREGATIONS = ("step", "min", "softmin")


def to_values(probabilities: Sequence[float], symmetric: bool) -> list[float]:
    """Step rewards from P(correct): ``2p - 1`` in [-1, 1] when ``symmetric`` (PURE's p(+) - p(-)), else p."""
    return [2.0 * p - 1.0 if symmetric else float(p) for p in probabilities]


def aggregate(values: Sequence[float], aggregation: str, temperature: float) -> list[float]:
    """The value each step's tokens carry, from the step rewards ``values`` (list of floats, one per step).

    - ``"step"``: each step keeps its own reward.
    - ``"min"``: step k gets ``min(values[k:])``, PURE's min-form credit: a step is worth its worst
      successor, so a bad step cannot be paid for by good ones after it.
    - ``"softmin"``: PURE's implementation of it: weights ``w = softmax(-values / temperature)`` over the
      steps, step k gets ``sum(w[j] * values[j] for j >= k)``; step 0 tends to ``min(values)`` as
      ``temperature -> 0`` and to ``mean(values)`` as ``temperature -> inf``.
    """
    if not values:
        return []
    if aggregation == "step":
        return [float(v) for v in values]
    if aggregation == "min":
        result, running = [], math.inf
        for value in reversed(values):
            running = min(running, value)
            result.append(running)
        return result[::-1]
    lowest = min(values)
    exps = [math.exp(-(v - lowest) / temperature) for v in values]
    total = sum(exps)
    weighted = [e / total * v for e, v in zip(exps, values, strict=True)]
    result, running = [], 0.0
    for value in reversed(weighted):
        running += value
        result.append(running)
    return result[::-1]


def mix_outcome(values: Sequence[float], outcome: float, weight: float) -> list[float]:
    """Each step's value with the outcome's share ``weight`` (lambda): ``(1 - weight) * a_k + weight * o``."""
    return [(1.0 - weight) * value + weight * outcome for value in values]


def clip_value(value: float, clip: float | None) -> float:
    """``value`` as a float, bounded to ``[-clip, clip]`` unless ``clip`` is None."""
    if clip is None:
        return float(value)
    return float(min(clip, max(-clip, value)))
