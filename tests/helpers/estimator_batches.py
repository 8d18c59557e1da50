"""Random estimator inputs (groups, lengths, masked gaps, empty rows) and a counter of host reads of tensors."""

import numpy as np
import torch


def random_batch(generator, *, max_group=16, num_groups=6, length=24, gaps=True, empty_rows=True, dense=True):
    """Groups of 1..max_group rows, varied lengths, masked gaps inside responses and some empty rows."""
    sizes = torch.randint(1, max_group + 1, (num_groups,), generator=generator).tolist()
    index = np.array([f"uid-{g}" for g, size in enumerate(sizes) for _ in range(size)], dtype=object)
    batch = len(index)
    lengths = torch.randint(1, length + 1, (batch,), generator=generator)
    if empty_rows:
        lengths[torch.rand(batch, generator=generator) < 0.1] = 0
    mask = (torch.arange(length)[None, :] < lengths[:, None]).float()
    if gaps:  # tool output inside a multi-turn response
        mask *= (torch.rand(batch, length, generator=generator) > 0.15).float()
    if dense:
        rewards = torch.randn(batch, length, generator=generator) * mask
    else:
        rewards = torch.zeros(batch, length)
        last = (mask * torch.arange(length)).argmax(-1)
        rewards[torch.arange(batch), last] = torch.randint(0, 2, (batch,), generator=generator).float()
    permutation = torch.randperm(batch, generator=generator)
    return rewards[permutation], mask[permutation], index[permutation.numpy()]


HOST_READS = ("item", "tolist", "__bool__", "__float__", "__int__", "__index__", "numpy", "cpu", "__array__")


def count_host_reads(monkeypatch) -> list[str]:
    """Record every host read of a tensor's value until ``monkeypatch.undo()``."""
    reads = []
    for name in HOST_READS:
        original = getattr(torch.Tensor, name)
        monkeypatch.setattr(
            torch.Tensor, name, lambda self, *a, _f=original, _n=name, **k: reads.append(_n) or _f(self, *a, **k)
        )
    return reads
