"""The PURE authors' credit and baseline computation, copied as a test fixture for ``bot_grpo_verl.estimators.pure``.

Source: github.com/CJReinforce/PURE at commit 41f9363 ("Update README.md"):

- ``openrlhf/utils/utils.py``, ``turn_process_reward_logits_to_reward``: copied verbatim below.
- ``openrlhf/trainer/ppo_utils/experience_maker.py``: ``NaiveExperienceMaker.make_experience`` (the step
  rewards placed on the step-end tokens), ``_generate_vllm`` (``score_ids``), ``make_experience``'s
  ``num_tokens_per_step``, ``process_experiences`` (the ``--reward_baseline token`` branch) and
  ``make_experience_list`` (the ``rloo`` returns and the separator mask). Those lines are copied with their
  inputs passed as arguments instead of read from ``Samples``/``Experience``; the ``VR`` branch is left out
  (``--reward_mode PRM``), and so is the KL term (verl applies KL in the loss).
- ``openrlhf/trainer/ppo_utils/replay_buffer.py``, ``NaiveReplayBuffer.normalize``: copied below with ``self``'s
  items passed as a list of ``(advantages, action_mask)`` per sample, as ``remove_padding_in_sequences`` leaves
  them (the right padding cut off), and ``strategy.all_reduce`` the identity (one process holds the batch).
  ``pure_trainer.py`` calls it unless ``--disable_advantage_normalization``, ``mask_separator_adv`` on unless
  ``--nomask_separator_adv``.

The PRM's logits are made from step rewards ``r`` in [-1, 1] as ``log([(1 - r) / 2, (1 + r) / 2])``, whose
softmax difference ``p(+) - p(-)`` is ``r`` again.
"""

import torch


def turn_process_reward_logits_to_reward(
    logits, reward_mask,
    return_outcome_reward=False,
    temperature=0.1,
    disable_weighted_reward=False,
):  # fmt: skip
    assert logits.ndim == 3 and \
        logits.size(-1) == 2 and \
            reward_mask.ndim == 2 and \
                reward_mask.shape == logits.shape[:2]  # fmt: skip

    softmax_logits = logits.softmax(dim=-1)
    process_reward = softmax_logits[..., 1] - softmax_logits[..., 0]
    process_reward = process_reward.masked_fill(~reward_mask, 0)

    if not disable_weighted_reward:
        weight = torch.softmax(
            -process_reward.masked_fill(
                ~reward_mask, float("inf")
            ) / temperature,
            dim=-1,
        )  # fmt: skip
    else:
        weight = torch.softmax(
            torch.ones_like(process_reward).masked_fill(
                ~reward_mask, -float("inf")
            ),
            dim=-1,
        )  # fmt: skip
    process_reward = weight * process_reward

    if return_outcome_reward:
        outcome_reward = process_reward.sum(dim=-1)
        return process_reward, outcome_reward
    return process_reward


class OneProcess:
    """``strategy`` with one data-parallel rank: ``all_reduce`` returns its input."""

    @staticmethod
    def all_reduce(tensor, op):
        return tensor


def normalize(items, mask_separator_adv=True):
    """``NaiveReplayBuffer.normalize("advantages", strategy)``: ``items`` is a list of ``(advantages,
    action_mask)`` per sample; returns the whitened advantages per sample."""
    strategy = OneProcess()
    advantages = [advantage for advantage, _ in items]
    action_masks = []
    # no norm for step separator tokens, keep them 0 adv
    step_separator_mask = []
    for advantage, action_mask in items:
        action_masks.append(action_mask)
        step_separator_mask.append(advantage == 0)

    items_vector = torch.cat(advantages).float().flatten()

    if action_masks[0] is None:
        # packing samples has no action mask
        action_masks_vector = 1
        num_actions = items_vector.numel()
    else:
        action_masks_vector = torch.cat(action_masks).flatten()
        num_actions = action_masks_vector.sum()
        if mask_separator_adv:
            step_separator_mask_vector = torch.cat(step_separator_mask).flatten()
            num_actions -= step_separator_mask_vector.sum()

    # for DP
    # mean
    sum_and_count = torch.tensor([items_vector.sum(), num_actions], device=items_vector.device)
    all_sum, all_count = strategy.all_reduce(sum_and_count, "sum")
    mean = all_sum / all_count
    # std
    std = ((items_vector - mean).pow(2) * action_masks_vector).sum()
    all_std = strategy.all_reduce(std, "sum")
    rstd = (all_std / all_count).clamp(min=1e-8).rsqrt()

    whitened = []
    for i in range(len(items)):
        target = (advantages[i] - mean) * rstd
        whitened.append(
            target.masked_fill(
                step_separator_mask[i], 0
            ) if mask_separator_adv else target
        )  # fmt: skip
    return whitened


def authors_whitened(advantages, mask):
    """``advantages`` (bs, T) whitened by :func:`normalize` over the valid tokens of ``mask`` (bs, T), each row
    cut to them as ``remove_padding_in_sequences`` cuts off the padding; (bs, T) float64, 0 off the mask."""
    valid = [row_mask.bool() for row_mask in mask]
    cut = [row[keep] for row, keep in zip(advantages, valid, strict=True)]
    items = [(row, torch.ones_like(row, dtype=torch.bool)) for row in cut]
    whitened = torch.zeros(advantages.shape, dtype=torch.float64)
    for i, row in enumerate(normalize(items)):
        whitened[i, valid[i]] = row.double()
    return whitened


def authors_pure_advantages(
    step_rewards, step_ends, lengths, n_samples_per_prompt, temperature=0.1, dtype=torch.float32
):
    """The authors' advantages for one batch of whole groups (rows ``k * n .. k * n + n - 1`` are one prompt's).

    Args:
        step_rewards: per row, its step rewards (floats in [-1, 1]); every row has at least one step.
        step_ends: per row, each step's last token (increasing column indices).
        lengths: per row, its valid tokens (``response_length``).
        n_samples_per_prompt: the group size.
        dtype: the dtype of the rewards and returns: float32 (torch's default) in the authors' trainer, which
            decides which returns come out exactly 0 (the tokens the batch whitening leaves out).

    Returns:
        float64 tensor (bs, max(lengths)): the ``rloo`` returns (computed in ``dtype``), 0 on the step-end tokens.
    """
    bs, num_actions = len(step_rewards), max(lengths)
    max_num_steps = max(len(ends) for ends in step_ends)
    # _generate_vllm: score_ids = step-end column + 1, reward_mask marks the step-end columns
    score_ids = torch.full((bs, max_num_steps), -1, dtype=torch.long)
    reward_mask = torch.zeros((bs, num_actions), dtype=torch.bool)
    for j, ends in enumerate(step_ends):
        score_ids[j, : len(ends)] = torch.tensor(ends) + 1
        reward_mask[j, ends] = True
    score_mask = score_ids != -1
    response_lengths = torch.tensor(lengths, dtype=dtype)
    # make_experience: num_tokens_per_step
    num_tokens_per_step = torch.zeros((bs, max_num_steps), dtype=dtype)
    for i in range(bs):
        for idx, j in enumerate(score_ids[i][score_mask[i]]):
            if idx == 0:
                num_tokens_per_step[i, idx] = j - 1
            else:
                num_tokens_per_step[i, idx] = j - score_ids[i, idx - 1] - 1
    # make_experience: the PRM's step rewards, softmin-weighted, on the step-end tokens
    rewards = torch.zeros((bs, max_num_steps), dtype=dtype)
    for i, values in enumerate(step_rewards):
        rewards[i, : len(values)] = torch.tensor(values, dtype=dtype)
    logits = torch.stack([((1 - rewards) / 2).log(), ((1 + rewards) / 2).log()], dim=-1)
    process_reward = turn_process_reward_logits_to_reward(
        logits, score_mask, return_outcome_reward=False, temperature=temperature
    )
    process_reward_matrix = torch.zeros((bs, num_actions), dtype=dtype)
    process_reward_matrix[reward_mask] = process_reward[score_mask]
    # process_experiences, --reward_baseline token
    process_rewards = process_reward_matrix.reshape(-1, n_samples_per_prompt, process_reward_matrix.size(1))
    outcome_rewards = process_rewards.sum(-1)
    response_lengths = response_lengths.reshape(-1, n_samples_per_prompt)
    average_reward_per_token = (outcome_rewards.sum(-1, keepdim=True) - outcome_rewards) / (
        response_lengths.sum(-1, keepdim=True) - response_lengths
    )
    process_rewards = process_rewards.reshape(bs, -1)
    average_reward_per_token = average_reward_per_token.flatten()
    for i in range(bs):
        process_rewards[i, reward_mask[i]] -= average_reward_per_token[i] * num_tokens_per_step[i, score_mask[i]]
    # make_experience_list, advantage_estimator rloo: returns, 0 on the step separators
    returns = process_rewards.fliplr().cumsum(dim=1).fliplr()
    returns.masked_fill_(reward_mask, 0)
    action_mask = torch.arange(num_actions) < torch.tensor(lengths).unsqueeze(-1)
    return (returns * action_mask).double()
