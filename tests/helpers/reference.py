"""An independent, loop-based BoT-GRPO written straight from the spec (float64, one row at a time)."""

import math
from collections import defaultdict

import torch


def reference_bot_grpo(
    rewards, mask, index, *, weighting="inverse_length", norm_by_std=True, outcome_broadcast="auto", eps=1e-6
):
    rewards = rewards.double().tolist()
    mask = mask.double().tolist()
    batch = len(rewards)

    def is_outcome_like(row, row_mask):
        valid = [t for t, m in enumerate(row_mask) if m]
        last = valid[-1] if valid else 0
        nonzero = [t for t, value in enumerate(row) if value != 0]
        return len(nonzero) <= 1 and all(t >= last for t in nonzero)

    broadcast = outcome_broadcast == "always" or (
        outcome_broadcast == "auto" and all(is_outcome_like(rewards[i], mask[i]) for i in range(batch))
    )
    if broadcast:
        rewards = [[sum(rewards[i]) * m for m in mask[i]] for i in range(batch)]

    members = defaultdict(list)
    for i in range(batch):
        members[index[i]].append(i)

    advantages = [[0.0] * len(mask[i]) for i in range(batch)]
    for rows in members.values():
        bag = []  # (weight, reward) pairs of the whole group
        non_empty = 0
        for i in rows:
            length = sum(mask[i])
            if length == 0:
                continue
            non_empty += 1
            for t, m in enumerate(mask[i]):
                if m:
                    bag.append((1.0 / length if weighting == "inverse_length" else 1.0, rewards[i][t]))
        if non_empty <= 1:
            mean, std = 0.0, 1.0
        else:
            total = sum(w for w, _ in bag)
            mean = sum(w * r for w, r in bag) / total
            std = math.sqrt(sum(w * (r - mean) ** 2 for w, r in bag) / (total - 1))
        for i in rows:
            for t, m in enumerate(mask[i]):
                if m:
                    centered = rewards[i][t] - mean
                    advantages[i][t] = centered / (std + eps) if norm_by_std else centered
    return torch.tensor(advantages, dtype=torch.float64)


def reference_char_ends(tokenizer, ids):
    """Characters decoded after each token, by decoding every prefix (quadratic, independent of the
    incremental method); None where the prefix ends inside a character (U+FFFD at the end)."""
    ends = []
    for k in range(1, len(ids) + 1):
        prefix = tokenizer.decode(ids[:k], skip_special_tokens=True)
        ends.append(None if prefix.endswith("\ufffd") else len(prefix))
    return ends


def reference_token_values(tokenizer, ids, spans, default):
    """One value per token: a token owns the characters its prefix decode added (a token ending inside a
    character owns the characters the completing token adds); the span holding most of them wins, the
    later span on ties, ``default`` when uncovered characters are the majority or there are none."""
    ends = reference_char_ends(tokenizer, ids)
    values, start, pending = [], 0, []
    owned = {}
    for k, end in enumerate(ends):
        pending.append(k)
        if end is None:
            continue
        for j in pending:
            owned[j] = range(start, end)
        pending, start = [], end
    for k in range(len(ids)):
        chars = owned.get(k, range(0))
        tally = {}
        for c in chars:
            holder = None
            for number, (a, b, _) in enumerate(spans):
                if a <= c < b:
                    holder = number  # later spans own shared characters
            tally[holder] = tally.get(holder, 0) + 1
        covered = {h: n for h, n in tally.items() if h is not None}
        if not covered:
            values.append(default)
            continue
        best = max(covered, key=lambda h: (covered[h], h))
        values.append(spans[best][2] if covered[best] > tally.get(None, 0) else default)
    return values


def reference_suffix_mean(advantages, mask):
    """Return-to-go credit: each valid token gets the mean advantage of itself and the later valid tokens."""
    out = torch.zeros_like(advantages, dtype=torch.float64)
    for i in range(advantages.shape[0]):
        for t in range(advantages.shape[1]):
            if mask[i, t]:
                later = [float(advantages[i, s]) for s in range(t, advantages.shape[1]) if mask[i, s]]
                out[i, t] = sum(later) / len(later)
    return out


def reference_pure(rewards, mask, index, temperature, credit="min"):
    """PURE from its definition (``bot_grpo_verl.estimators.pure``; the authors' code is ``pure_reference``): a step
    ends at each valid token not holding -0.0; softmin weights over a row's steps (``"min"``) or none (``"sum"``);
    leave-one-out reward per token ``b``; each step's weighted reward minus ``b`` times its other valid tokens,
    on its end; returns summed to go; advantages 0 on the step ends."""
    rewards, mask = rewards.double().tolist(), mask.tolist()
    steps = []
    for row, row_mask in zip(rewards, mask, strict=True):
        ends = [t for t, m in enumerate(row_mask) if m and (row[t] != 0 or math.copysign(1.0, row[t]) > 0)]
        if credit == "min" and ends:
            z = [math.exp(-(row[t] - min(row[s] for s in ends)) / temperature) for t in ends]
            steps.append({t: row[t] * value / sum(z) for t, value in zip(ends, z, strict=True)})
        else:
            steps.append({t: row[t] for t in ends})
    lengths = [sum(row_mask) for row_mask in mask]
    advantages, returns = [], []
    for i, row_mask in enumerate(mask):
        others = [j for j in range(len(mask)) if j != i and index[j] == index[i]]
        others_length = sum(lengths[j] for j in others)
        per_token = sum(sum(steps[j].values()) for j in others) / others_length if others_length else 0.0
        step_rewards, previous = [0.0] * len(row_mask), -1
        for end, value in sorted(steps[i].items()):
            between = sum(row_mask[previous + 1 : end])
            step_rewards[end] = value - per_token * between
            previous = end
        row_returns = [sum(step_rewards[t:]) if row_mask[t] else 0.0 for t in range(len(row_mask))]
        returns.append(row_returns)
        advantages.append([0.0 if t in steps[i] else value for t, value in enumerate(row_returns)])
    return torch.tensor(advantages, dtype=torch.float64), torch.tensor(returns, dtype=torch.float64)
