"""Decoding for the ``hf_cpu`` rollout: a batch of requests decoded together, one KV-cached forward per
step, each request handed back the moment its row finishes.

A :class:`DecodeBatch` holds the rows in flight: one ``transformers`` KV cache in which each row's tokens are
right-aligned (left padding, masked out), and per row its sampling parameters and the tokens generated so
far. :func:`decode` runs the loop: each step feeds every row its last token, samples the next token of every
row at once (:func:`sample_next`) and delivers the rows that finished (a stop token or ``max_tokens``),
which leave the batch; the left padding that no remaining row needs is cut from the cache, so attention
never spans more than the longest row in flight (on full-attention layers). When the batch is empty the
requests that arrived meanwhile start the next one (letting them join a running batch instead adds
padding to its attention that costs more than the steps it saves on a small model).

Each row samples from ``softmax(logits / temperature)`` restricted by its top-k and top-p, exactly as when
decoded alone; the random stream is shared by the rows of a step, so which draws a row gets depends on the
batch it runs in (the distribution does not). Log-probs are ``log_softmax(logits / temperature)`` of the
sampled token over the whole vocabulary, i.e. what verl's actor recomputes for the same sequence (top-k and
top-p only restrict sampling), and the raw ``log_softmax(logits)`` when sampling is greedy (temperature 0).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from bot_grpo_verl.cpu.sampling_params import SamplingParams


@dataclass(frozen=True)
class Request:
    """One prompt to complete: ``prompt_ids`` (non-empty), its :class:`SamplingParams`, and ``owner``, any
    value the caller wants back with the completion."""

    prompt_ids: Sequence[int]
    params: SamplingParams
    owner: Any = None


@dataclass(frozen=True)
class Completion:
    """One generated sequence: ``token_ids`` (the stop token included, as vLLM does), their log-probs,
    and ``finish_reason`` ``"stop"`` (a stop token) or ``"length"`` (``max_tokens`` reached)."""

    token_ids: list[int]
    log_probs: list[float]
    finish_reason: str


@dataclass
class DecodeStats:
    """What a decoding loop did: ``batches`` (batches started, one prefill each), ``steps`` (sampling steps),
    ``row_steps`` (tokens sampled, summed over the rows of each step) and ``peak_rows`` (most rows in one
    step). ``row_steps / steps`` is the mean batch size."""

    batches: int = 0
    steps: int = 0
    row_steps: int = 0
    peak_rows: int = 0


def filter_top_k_top_p(logits: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Set to ``-inf`` the logits outside each row's top-k, then outside its top-p nucleus.

    Args:
        logits: ``[B, V]`` float (already divided by the temperature).
        top_k: ``[B]`` int, ``<= 0`` keeps every token.
        top_p: ``[B]`` float in (0, 1]; keeps the smallest set of most likely tokens (after top-k) whose
            mass reaches ``top_p`` (the most likely token is always kept).
    Returns:
        ``[B, V]`` filtered logits.
    """
    vocab = logits.shape[-1]
    sorted_logits, order = logits.sort(dim=-1, descending=True)
    ranks = torch.arange(vocab, device=logits.device)[None, :]
    k = torch.where(top_k > 0, top_k.clamp(max=vocab), torch.full_like(top_k, vocab))
    drop = ranks >= k[:, None]
    probs = torch.softmax(sorted_logits.masked_fill(drop, float("-inf")), dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs
    drop |= mass_before >= top_p[:, None]
    return torch.empty_like(logits).scatter_(1, order, sorted_logits.masked_fill(drop, float("-inf")))


def sample_next(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pick the next token of every row and its log-prob.

    Args:
        logits: ``[B, V]`` float32 next-token logits.
        temperature: ``[B]``; rows with ``0`` are greedy.
        top_k, top_p: ``[B]``, see :func:`filter_top_k_top_p`.
    Returns:
        ``(tokens [B] long, log_probs [B] float32)``, the log-prob taken from ``log_softmax(logits / T)``
        over the full vocabulary (``T = 1`` for greedy rows).
    """
    greedy = temperature <= 0
    scaled = logits / torch.where(greedy, torch.ones_like(temperature), temperature)[:, None]
    log_probs = torch.log_softmax(scaled, dim=-1)
    tokens = scaled.argmax(dim=-1)
    if not bool(greedy.all()):
        filtered = scaled
        if bool(((top_k > 0) | (top_p < 1)).any()):
            filtered = filter_top_k_top_p(scaled, top_k, top_p)
        sampled = torch.multinomial(torch.softmax(filtered, dim=-1), 1, generator=generator).squeeze(1)
        tokens = torch.where(greedy, tokens, sampled)
    return tokens, log_probs.gather(1, tokens[:, None]).squeeze(1)


def left_pad(prompts: Sequence[Sequence[int]], pad_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(input_ids [B, L] long, attention_mask [B, L] long)`` with every prompt right-aligned."""
    if any(len(prompt) == 0 for prompt in prompts):
        raise ValueError("hf_cpu rollout: empty prompt")
    width = max(len(prompt) for prompt in prompts)
    input_ids = torch.full((len(prompts), width), pad_token_id, dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.as_tensor(list(prompt), dtype=torch.long)
        attention_mask[row, width - len(prompt) :] = 1
    return input_ids, attention_mask


def stop_id_table(params: Sequence[SamplingParams], eos_token_ids: Iterable[int]) -> torch.Tensor:
    """``[B, S]`` long: each row's stop tokens (its ``stop_token_ids``, plus EOS unless ``ignore_eos``),
    right-padded with ``-1`` (never a token)."""
    eos = tuple(eos_token_ids)
    stops = [sorted(set(p.stop_token_ids) | (set() if p.ignore_eos else set(eos))) for p in params]
    table = torch.full((len(stops), max(map(len, stops))), -1, dtype=torch.long)
    for row, ids in enumerate(stops):
        table[row, : len(ids)] = torch.tensor(ids, dtype=torch.long)
    return table


def drop_left_columns(cache, columns: int) -> int:
    """Cut the first ``columns`` positions from every layer of a ``transformers`` ``DynamicCache`` (a view,
    no copy) and return ``columns``; return 0 and leave a cache with a sliding-window layer (which keeps a
    rolling window of positions of its own) as it is."""
    if any(getattr(layer, "is_sliding", False) for layer in cache.layers):
        return 0
    for layer in cache.layers:
        layer.keys, layer.values = layer.keys[:, :, columns:], layer.values[:, :, columns:]
    return columns


@dataclass
class DecodeBatch:
    """The rows being decoded together (``B`` rows, KV length ``T``, at most ``W`` new tokens).

    Attributes:
        cache: a ``transformers`` ``DynamicCache``; every layer's keys and values ``[B, H_kv, T, D]``.
        attention_mask: ``[B, T]`` long, 1 on a row's tokens (right-aligned), 0 on its left padding.
        next_tokens: ``[B]`` long, each row's last sampled token, fed at the next step.
        next_positions: ``[B]`` long, that token's position id (the row's length so far).
        temperature, top_p: ``[B]`` float32; top_k: ``[B]`` long (see :func:`sample_next`).
        max_tokens: ``[B]`` long; stop_ids: ``[B, S]`` long (see :func:`stop_id_table`).
        token_ids: ``[B, W]`` long and log_probs: ``[B, W]`` float32, the tokens generated so far
            (the first ``lengths[b]`` of row ``b``); lengths: ``[B]`` long.
        stopped: ``[B]`` bool, whether a row's last token is one of its stop tokens.
        owners: the ``owner`` of each row's :class:`Request`, in row order.
    """

    cache: Any
    attention_mask: torch.Tensor
    next_tokens: torch.Tensor
    next_positions: torch.Tensor
    temperature: torch.Tensor
    top_k: torch.Tensor
    top_p: torch.Tensor
    max_tokens: torch.Tensor
    stop_ids: torch.Tensor
    token_ids: torch.Tensor
    log_probs: torch.Tensor
    lengths: torch.Tensor
    stopped: torch.Tensor
    owners: list

    def __len__(self) -> int:
        return len(self.owners)


@torch.no_grad()
def prefill(
    model: torch.nn.Module, requests: Sequence[Request], eos_token_ids: Iterable[int], pad_token_id: int
) -> tuple[DecodeBatch, torch.Tensor]:
    """Run the prompts of ``requests`` (left-padded together) through ``model``.

    Returns:
        ``(batch, logits)``: a :class:`DecodeBatch` of ``b = len(requests)`` rows with nothing generated
        yet, and ``[b, V]`` float32 logits of each row's first new token.
    """
    from transformers import DynamicCache

    params = [request.params for request in requests]
    input_ids, attention_mask = left_pad([request.prompt_ids for request in requests], pad_token_id)
    cache = DynamicCache(config=model.config)
    logits = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=(attention_mask.cumsum(dim=-1) - 1).clamp(min=0),
        past_key_values=cache,
        use_cache=True,
        logits_to_keep=1,
    ).logits[:, -1, :]
    rows, width = len(requests), max(p.max_tokens for p in params)
    batch = DecodeBatch(
        cache=cache,
        attention_mask=attention_mask,
        next_tokens=torch.zeros(rows, dtype=torch.long),
        next_positions=attention_mask.sum(dim=-1),
        temperature=torch.tensor([p.temperature for p in params], dtype=torch.float32),
        top_k=torch.tensor([p.top_k for p in params], dtype=torch.long),
        top_p=torch.tensor([p.top_p for p in params], dtype=torch.float32),
        max_tokens=torch.tensor([p.max_tokens for p in params], dtype=torch.long),
        stop_ids=stop_id_table(params, eos_token_ids),
        token_ids=torch.zeros((rows, width), dtype=torch.long),
        log_probs=torch.zeros((rows, width), dtype=torch.float32),
        lengths=torch.zeros(rows, dtype=torch.long),
        stopped=torch.zeros(rows, dtype=torch.bool),
        owners=[request.owner for request in requests],
    )
    return batch, logits.float()


@torch.no_grad()
def forward_step(model: torch.nn.Module, batch: DecodeBatch) -> torch.Tensor:
    """Feed every row its last token; the cache and mask grow by one position (``T -> T + 1``).

    Returns:
        ``[B, V]`` float32 logits of each row's next token.
    """
    batch.attention_mask = F.pad(batch.attention_mask, (0, 1), value=1)
    logits = model(
        input_ids=batch.next_tokens[:, None],
        attention_mask=batch.attention_mask,
        position_ids=batch.next_positions[:, None],
        past_key_values=batch.cache,
        use_cache=True,
        logits_to_keep=1,
    ).logits[:, -1, :]
    batch.next_positions = batch.next_positions + 1
    return logits.float()


def record(batch: DecodeBatch, tokens: torch.Tensor, log_probs: torch.Tensor) -> torch.Tensor:
    """Append each row's sampled token (``[B]`` long) and its log-prob (``[B]`` float32).

    Returns:
        ``[B]`` bool, the rows that are finished: a stop token, or ``max_tokens`` reached.
    """
    rows = torch.arange(len(batch))
    batch.token_ids[rows, batch.lengths] = tokens
    batch.log_probs[rows, batch.lengths] = log_probs
    batch.lengths = batch.lengths + 1
    batch.stopped = (batch.stop_ids == tokens[:, None]).any(dim=1)
    batch.next_tokens = tokens
    return batch.stopped | (batch.lengths >= batch.max_tokens)


def completion_of(batch: DecodeBatch, row: int) -> Completion:
    """The :class:`Completion` of ``row`` so far."""
    length = int(batch.lengths[row])
    return Completion(
        token_ids=batch.token_ids[row, :length].tolist(),
        log_probs=batch.log_probs[row, :length].tolist(),
        finish_reason="stop" if bool(batch.stopped[row]) else "length",
    )


def keep_rows(batch: DecodeBatch, rows: torch.Tensor) -> DecodeBatch:
    """The batch of ``rows`` (``[R]`` long, in order) only (``batch`` is consumed), with the left padding
    no row needs any more cut from the cache and mask (so ``T`` never exceeds the longest row in flight)."""
    mask = batch.attention_mask[rows]
    batch.cache.batch_select_indices(rows)
    cut = drop_left_columns(batch.cache, mask.shape[1] - int(mask.sum(dim=1).max()))
    return DecodeBatch(
        cache=batch.cache,
        attention_mask=mask[:, cut:],
        next_tokens=batch.next_tokens[rows],
        next_positions=batch.next_positions[rows],
        temperature=batch.temperature[rows],
        top_k=batch.top_k[rows],
        top_p=batch.top_p[rows],
        max_tokens=batch.max_tokens[rows],
        stop_ids=batch.stop_ids[rows],
        token_ids=batch.token_ids[rows],
        log_probs=batch.log_probs[rows],
        lengths=batch.lengths[rows],
        stopped=batch.stopped[rows],
        owners=[batch.owners[row] for row in rows.tolist()],
    )


def decode(
    model: torch.nn.Module,
    admit: Callable[[int], Sequence[Request]],
    deliver: Callable[[Any, Completion], None],
    *,
    eos_token_ids: Iterable[int],
    pad_token_id: int,
    max_rows: int,
    generator: torch.Generator | None = None,
    stats: DecodeStats | None = None,
) -> DecodeStats:
    """Decode batches until ``admit`` has nothing more.

    ``admit(max_rows)`` returns the requests of the next batch (at most ``max_rows``; none ends the loop).
    Each step samples one token for every row; ``deliver(owner, completion)`` each row that finished,
    which leaves the batch. When no row is left, ``admit`` is asked for the next batch.

    Returns:
        ``stats`` (a new :class:`DecodeStats` if None), counted up step by step.
    """
    if max_rows < 1:
        raise ValueError(f"max_rows must be >= 1, got {max_rows}")
    eos = tuple(eos_token_ids)
    stats = DecodeStats() if stats is None else stats
    batch: DecodeBatch | None = None
    while True:
        if batch is None:
            requests = admit(max_rows)
            if not requests:
                return stats
            batch, logits = prefill(model, requests, eos, pad_token_id)
            stats.batches += 1
        else:
            logits = forward_step(model, batch)
        tokens, log_probs = sample_next(logits, batch.temperature, batch.top_k, batch.top_p, generator)
        finished = record(batch, tokens, log_probs)
        stats.steps += 1
        stats.row_steps += len(batch)
        stats.peak_rows = max(stats.peak_rows, len(batch))
        done = finished.nonzero().flatten().tolist()
        for row in done:
            deliver(batch.owners[row], completion_of(batch, row))
        if len(done) == len(batch):
            batch = None
        elif done:
            batch = keep_rows(batch, (~finished).nonzero().flatten())


def generate_batch(
    model: torch.nn.Module,
    prompts: Sequence[Sequence[int]],
    params: Sequence[SamplingParams],
    eos_token_ids: Iterable[int],
    pad_token_id: int,
    generator: torch.Generator | None = None,
) -> list[Completion]:
    """Complete every prompt, all decoded together by :func:`decode`; completions in prompt order."""
    pending = [Request(prompt, param, index) for index, (prompt, param) in enumerate(zip(prompts, params, strict=True))]
    completions: list[Completion | None] = [None] * len(pending)

    def admit(rows: int) -> list[Request]:
        taken = pending[:rows]
        del pending[:rows]
        return taken

    def deliver(index: int, completion: Completion) -> None:
        completions[index] = completion

    decode(
        model,
        admit,
        deliver,
        eos_token_ids=eos_token_ids,
        pad_token_id=pad_token_id,
        max_rows=max(1, len(pending)),
        generator=generator,
    )
    return completions
