"""The outcome of a token-level reward function, for the outcome-reward baselines (GRPO, Dr.GRPO, DAPO, GSPO).

verl's ``naive`` and ``dapo`` reward managers use a function's ``score`` as the reward, but they also stack
every other returned key across the batch into a numpy array, which fails on ``spans`` (ragged lists).
This wrapper calls the task's token-level function and returns its outcome and scalar logs only, so the
baselines train on exactly the score the token-level algorithms see::

    reward.custom_reward_function.path=recipes/outcome_reward.py
    reward.custom_reward_function.name=compute_score
    +reward.custom_reward_function.reward_kwargs.token_reward_path=bot_grpo_verl/rewards/react_tsx.py
    +reward.custom_reward_function.reward_kwargs.level=types     # the wrapped function's own options

Returned keys: ``score``, ``acc`` (the function's own ``acc`` if it returns one, else the score: what
``algorithm.filter_groups.metric=acc`` and verl's validation read, as in the ``bot_token`` manager) and the
function's other scalar keys. Spans and token rewards are checked against the contract and dropped.
"""

import functools
import inspect

from bot_grpo_verl.reward.token_rewards import parse_reward_result


@functools.cache
def token_reward_function(path: str, name: str):
    """The synchronous reward function ``name`` of the file ``path``, loaded once per process as verl does."""
    from verl.utils.import_utils import load_extern_object

    function = load_extern_object(module_path=path, object_name=name)
    if inspect.iscoroutinefunction(function):
        raise TypeError(f"{path}:{name} is a coroutine function; name its synchronous variant")
    return function


def compute_score(
    data_source,
    solution_str,
    ground_truth,
    extra_info=None,
    *,
    token_reward_path,
    token_reward_name="compute_score",
    **kwargs,
) -> dict:
    """verl reward function: the outcome of ``token_reward_path:token_reward_name`` on the same arguments.

    Args:
        data_source, solution_str, ground_truth, extra_info: as verl passes them; forwarded unchanged.
        token_reward_path (`str`): file of the token-level reward function.
        token_reward_name (`str`, defaults to `"compute_score"`): its name in that file.
        **kwargs: forwarded (the wrapped function's ``reward_kwargs`` and verl's own keywords).

    Returns:
        ``{"acc": float, **scalar extra keys, "score": float}``.
    """
    function = token_reward_function(token_reward_path, token_reward_name)
    result = function(
        data_source=data_source, solution_str=solution_str, ground_truth=ground_truth, extra_info=extra_info, **kwargs
    )
    parsed = parse_reward_result(result, len(solution_str))
    return {"acc": parsed.score, **parsed.extra, "score": parsed.score}
