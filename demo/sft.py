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
from demo.tasks import Example, Tool
from demo.tiny_model import prompt_ids, response_ids, tool_output_ids

Progress = Callable[[str], None]
PROGRESS_SECONDS = 30.0  # the warm start says where it is at least this often (a loaded machine is slow)


def session_parts(example: Example) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """An example's assistant turns and the tool outputs between them: ``assistant_turns`` and ``tool_outputs`` of
    a multi-turn example (:class:`demo.tool_arithmetic.ToolProblem`), else its ``response`` and none."""
    return getattr(example, "assistant_turns", (example.response,)), getattr(example, "tool_outputs", ())


def encode_examples(tokenizer: Qwen2Tokenizer, examples: Sequence[Example]) -> list[tuple[list, list]]:
    """Per example ``(input_ids, labels)``: the prompt, then each assistant turn with its EOS and, between turns,
    the tool's output as verl's tool agent loop writes it (:func:`demo.tiny_model.tool_output_ids`); labels -100
    everywhere but on the assistant turns."""
    encoded = []
    for example in examples:
        turns, outputs = session_parts(example)
        ids = prompt_ids(tokenizer, example.prompt)
        labels = [-100] * len(ids)
        for k, turn in enumerate(turns):
            between = tool_output_ids(tokenizer, outputs[k - 1]) if k else []
            generated = response_ids(tokenizer, turn)
            ids, labels = ids + between + generated, labels + [-100] * len(between) + generated
        encoded.append((ids, labels))
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
    """Train ``model`` in place on ``train`` (response tokens only); return held-out losses and timing. Says its step
    and loss to ``progress`` every tenth of the steps, and after any step that ends :data:`PROGRESS_SECONDS` after the
    last line.

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
    said = start
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
        if (step + 1) % max(1, steps // 10) == 0 or step + 1 == steps or time.perf_counter() - said >= PROGRESS_SECONDS:
            progress(f"SFT step {step + 1}/{steps}: loss {train_loss:.3f} ({time.perf_counter() - start:.0f} s)")
            said = time.perf_counter()
    return {
        "sft_loss_before": loss_before,
        "sft_loss_after": response_loss(model, held_out),
        "sft_final_train_loss": train_loss,
        "sft_seconds": time.perf_counter() - start,
    }


@torch.no_grad()
def generate_turns(
    model: Qwen2ForCausalLM,
    tokenizer: Qwen2Tokenizer,
    contexts: Sequence[list[int]],
    max_new_tokens: int,
    batch_size: int = 32,
) -> list[list[int]]:
    """Pure sampling at temperature 1 (no top-k/top-p), as verl's rollout does, continuing each of ``contexts``
    (token ids); the new ids per context, cut after the first EOS (kept), at most ``max_new_tokens``."""
    model.eval()
    generated = []
    for first in range(0, len(contexts), batch_size):
        batch = contexts[first : first + batch_size]
        width = max(len(ids) for ids in batch)
        input_ids = torch.tensor([[tokenizer.pad_token_id] * (width - len(ids)) + ids for ids in batch])
        attention_mask = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in batch])
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
            generated.append(row[:end])
    return generated


def sample_responses(
    model: Qwen2ForCausalLM,
    tokenizer: Qwen2Tokenizer,
    prompts: Sequence[str],
    max_new_tokens: int,
    seed: int,
    tool: Tool | None = None,
    batch_size: int = 32,
) -> list[list[int]]:
    """One sampled response per prompt (:func:`generate_turns`, ``batch_size`` rows at once), at most
    ``max_new_tokens`` ids each.

    With a ``tool``, a response is a session, as verl's tool agent loop runs it: after each assistant turn that
    calls the tool, the tool's output (:func:`demo.tiny_model.tool_output_ids`) and the next turn follow, until a
    turn makes no call or the budget is spent; the response holds every turn and output.
    """
    torch.manual_seed(seed)
    responses: list[list[int]] = [[] for _ in prompts]
    contexts = {row: prompt_ids(tokenizer, prompt) for row, prompt in enumerate(prompts)}
    while contexts:
        rows = list(contexts)
        budget = max_new_tokens - min(len(responses[row]) for row in rows)
        turns = generate_turns(model, tokenizer, [contexts[row] for row in rows], budget, batch_size)
        for row, turn in zip(rows, turns, strict=True):
            turn = turn[: max_new_tokens - len(responses[row])]
            responses[row] += turn
            output = tool(tokenizer.decode(turn, skip_special_tokens=True)) if tool else None
            between = tool_output_ids(tokenizer, output) if output is not None else []
            if output is None or len(responses[row]) + len(between) >= max_new_tokens:
                del contexts[row]
                continue
            responses[row] += between
            contexts[row] = contexts[row] + turn + between
    return responses
