"""The demo policy's supervised warm start and its sampling: response-only cross-entropy on a task's corpus,
then temperature-1 samples as verl's rollout draws them."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence

import torch
from transformers import Qwen2ForCausalLM, Qwen2Tokenizer

from demo.settings import DemoSettings
from demo.tasks import Example
from demo.tiny_model import prompt_ids, response_ids

Progress = Callable[[str], None]


def encode_examples(tokenizer: Qwen2Tokenizer, examples: Sequence[Example]) -> list[tuple[list, list]]:
    """Per example ``(input_ids, labels)``: prompt + response + EOS, labels -100 on the prompt."""
    encoded = []
    for example in examples:
        prompt, response = prompt_ids(tokenizer, example.prompt), response_ids(tokenizer, example.response)
        encoded.append((prompt + response, [-100] * len(prompt) + response))
    return encoded


def collate(batch: Sequence[tuple[list, list]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-pad to the longest sequence: ``input_ids``, ``attention_mask``, ``labels``, each ``(B, T)``."""
    width = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), width), pad_id)
    labels = torch.full((len(batch), width), -100)
    attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, (ids, target) in enumerate(batch):
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, : len(ids)] = torch.tensor(target)
        attention_mask[row, : len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


@torch.no_grad()
def response_loss(model: Qwen2ForCausalLM, batch: dict[str, torch.Tensor]) -> float:
    """Mean cross-entropy (nats per token) on the response tokens of ``batch`` (a :func:`collate` output)."""
    model.eval()
    return model(**batch).loss.item()


def supervised_warm_start(
    model: Qwen2ForCausalLM,
    train: list[tuple[list, list]],
    held_out: dict[str, torch.Tensor],
    settings: DemoSettings,
    seed: int,
    pad_id: int,
    progress: Progress,
) -> dict[str, float]:
    """Train ``model`` in place on ``train`` (response tokens only); return held-out losses and timing.

    Returns ``{"sft_loss_before", "sft_loss_after", "sft_final_train_loss", "sft_seconds"}``; the losses are
    response-token cross-entropies (nats per token) on ``held_out``.
    """
    loss_before = response_loss(model, held_out)
    steps = settings.sft_steps
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.sft_learning_rate, betas=(0.9, 0.95))
    warmup = max(1, steps // 10)

    def schedule(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    rng = random.Random(seed)
    order: list[int] = []
    start, train_loss = time.perf_counter(), float("nan")
    model.train()
    for step in range(steps):
        if len(order) < settings.sft_batch_size:
            order += rng.sample(range(len(train)), len(train))
        batch = collate([train[order.pop()] for _ in range(settings.sft_batch_size)], pad_id)
        loss = model(**batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        train_loss = loss.item()
        if (step + 1) % max(1, steps // 10) == 0 or step + 1 == steps:
            progress(f"SFT step {step + 1}/{steps}: loss {train_loss:.3f} ({time.perf_counter() - start:.0f} s)")
    return {
        "sft_loss_before": loss_before,
        "sft_loss_after": response_loss(model, held_out),
        "sft_final_train_loss": train_loss,
        "sft_seconds": time.perf_counter() - start,
    }


@torch.no_grad()
def sample_responses(
    model: Qwen2ForCausalLM,
    tokenizer: Qwen2Tokenizer,
    prompts: Sequence[str],
    max_new_tokens: int,
    seed: int,
    batch_size: int = 32,
) -> list[list[int]]:
    """Pure sampling at temperature 1 (no top-k/top-p), as verl's rollout does; the response ids per prompt.

    Each response is cut after its first EOS (kept) and holds at most ``max_new_tokens`` ids.
    """
    model.eval()
    torch.manual_seed(seed)
    responses = []
    for first in range(0, len(prompts), batch_size):
        encoded = [prompt_ids(tokenizer, prompt) for prompt in prompts[first : first + batch_size]]
        width = max(len(ids) for ids in encoded)
        input_ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(ids)) + ids for ids in encoded])
        attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in encoded])
        output = model.generate(
            input_ids=input_ids,
            attention_mask=attention_mask,
            do_sample=True,
            temperature=1.0,
            top_k=0,
            top_p=1.0,
            max_new_tokens=max_new_tokens,
        )
        for row in output[:, width:].tolist():
            end = row.index(tokenizer.eos_token_id) + 1 if tokenizer.eos_token_id in row else len(row)
            responses.append(row[:end])
    return responses
