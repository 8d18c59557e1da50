"""The CPU demo's assets, made locally and cached: tokenizer, warm-started tiny Qwen2 policy, RL parquet files.

Nothing is downloaded. :func:`build_assets` generates a :class:`Task`'s corpus (:data:`REACT`: React/TSX
components, :mod:`demo.react_corpus`; :data:`ARITHMETIC`: multi-step arithmetic,
:mod:`demo.arithmetic`), trains a byte-level BPE tokenizer on it, builds a tiny
``Qwen2ForCausalLM`` from a config, warm-starts it with a short supervised pass on the corpus (loss on
response tokens only), measures its temperature-1 samples with the task's reward (compile rate, answer
accuracy), and writes train/val parquet files in verl's RL dataset format. The result lives in
``cache_dir/<key>/``, where ``key`` hashes the task, the settings, the seed and the builder's source, so a
second call with the same inputs returns at once and any change rebuilds.

CLI: ``python -m demo.assets --task arithmetic --cache-dir .cache/demo`` prints the paths.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import math
import os
import random
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Protocol

import pandas as pd
import torch
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers
from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM, Qwen2Tokenizer

from bot_grpo_verl.__main__ import reward_path
from demo import arithmetic, react_corpus

DATA_SOURCE = "react_tsx"
PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, "<|im_start|>", EOS_TOKEN)
# Qwen2's ChatML without a default system prompt; the model stops at <|im_end|> (its EOS).
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
REACT_TSX = reward_path("react_tsx")  # the installed reward files (in a clone: reward_models/)
ARITHMETIC_STEPS = reward_path("arithmetic_steps")

Progress = Callable[[str], None]


class Example(Protocol):
    """What a task's corpus is made of: a user prompt and the reference response to it."""

    @property
    def prompt(self) -> str: ...

    @property
    def response(self) -> str: ...


@dataclass(frozen=True)
class DemoSettings:
    """What :func:`build_assets` builds; every field is part of the cache key.

    Parameters:
        sft_examples (`int`, *optional*, defaults to `1600`):
            Prompt/solution pairs of the supervised warm-start corpus.
        train_prompts (`int`, *optional*, defaults to `256`):
            Prompts of the RL train parquet (distinct from the SFT corpus' prompts).
        val_prompts (`int`, *optional*, defaults to `64`):
            Prompts of the RL val parquet (distinct from both), also used to measure the compile rate.
            Benchmarks choose settings and checkpoints on these.
        test_prompts (`int`, *optional*, defaults to `128`):
            Prompts of the RL test parquet (distinct from all others): benchmarks report on these only.
        vocab_size (`int`, *optional*, defaults to `1024`):
            Byte-level BPE vocabulary size including the 3 special tokens (at least 259: 256 bytes + 3).
        hidden_size (`int`, *optional*, defaults to `128`):
            Qwen2 hidden size.
        intermediate_size (`int`, *optional*, defaults to `384`):
            Qwen2 MLP width.
        num_hidden_layers (`int`, *optional*, defaults to `4`):
            Qwen2 decoder layers.
        num_attention_heads (`int`, *optional*, defaults to `4`):
            Query heads (must divide ``hidden_size``).
        num_key_value_heads (`int`, *optional*, defaults to `2`):
            Key/value heads (grouped-query attention as in Qwen2; must divide ``num_attention_heads``).
        max_position_embeddings (`int`, *optional*, defaults to `512`):
            Longest sequence (prompt + response) the policy supports.
        sft_steps (`int`, *optional*, defaults to `240`):
            Optimizer steps of the supervised warm start (0 keeps the random initialisation).
        sft_batch_size (`int`, *optional*, defaults to `32`):
            Sequences per supervised step.
        sft_learning_rate (`float`, *optional*, defaults to `3e-3`):
            AdamW peak learning rate; linear warm-up over the first 10% of steps, then cosine decay to 10%.
        eval_samples (`int`, *optional*, defaults to `64`):
            Responses sampled (temperature 1, one per val prompt, cycling) to measure the compile rate.
        max_response_tokens (`int`, *optional*, defaults to `160`):
            Token limit of those samples; use the same value as verl's ``data.max_response_length``.
    """

    sft_examples: int = 1600
    train_prompts: int = 256
    val_prompts: int = 64
    test_prompts: int = 128
    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 512
    sft_steps: int = 240
    sft_batch_size: int = 32
    sft_learning_rate: float = 3e-3
    eval_samples: int = 64
    max_response_tokens: int = 160

    def __post_init__(self):
        if self.vocab_size < 256 + len(SPECIAL_TOKENS):
            raise ValueError(f"vocab_size={self.vocab_size} is below 259 (256 bytes + 3 special tokens)")
        if self.hidden_size % self.num_attention_heads or self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} must divide hidden_size={self.hidden_size} and "
                f"be a multiple of num_key_value_heads={self.num_key_value_heads}"
            )
        sizes = ("sft_examples", "train_prompts", "val_prompts", "test_prompts", "sft_batch_size", "eval_samples")
        if min(getattr(self, size) for size in sizes) < 1 or self.max_response_tokens < 1 or self.sft_steps < 0:
            raise ValueError(f"sizes must be positive (sft_steps >= 0): {asdict(self)}")


@dataclass(frozen=True)
class Task:
    """A demo task: its corpus, its verl rows, how its samples are measured and its default settings.

    Attributes:
        name: the CLI's ``--task`` value; part of the cache key.
        data_source: verl's ``data_source`` column.
        ability: verl's ``ability`` column.
        generate: ``(size, seed) -> examples``: ``size`` examples with distinct prompts, the same for the
            same seed (raises ``ValueError`` for a negative size).
        reference: ``example -> (ground_truth, info)``: the row's ``reward_model.ground_truth`` and the
            task's ``extra_info`` fields (also written to the SFT corpus lines).
        score_samples: ``(responses, examples) -> metrics``: the task's measurements of decoded samples,
            ``responses[i]`` answering ``examples[i]`` (see :func:`compile_metrics`, :func:`answer_metrics`).
        sources: files whose bytes enter the cache key besides this module (the corpus generator).
        settings: the default :class:`DemoSettings` of :func:`build_assets`.
    """

    name: str
    data_source: str
    ability: str
    generate: Callable[[int, int], Sequence[Example]]
    reference: Callable[[Example], tuple[str, dict]]
    score_samples: Callable[[Sequence[str], Sequence[Example]], dict]
    sources: tuple[Path, ...]
    settings: DemoSettings


@dataclass(frozen=True)
class DemoAssets:
    """Paths of one built asset set (all under ``root``) and the measurements of its build.

    Attributes:
        root: ``cache_dir/<key>``.
        model_dir: the policy (``save_pretrained``, safetensors) and its tokenizer: give it to verl as
            ``actor_rollout_ref.model.path``.
        tokenizer_dir: the same directory as ``model_dir``.
        train_parquet, val_parquet, test_parquet: verl RL datasets (``data.train_files``; ``data.val_files``
            takes val, or val and test in one validation).
        sft_corpus: the warm-start corpus, JSON lines ``{"prompt", "response", **info}`` (``info`` from
            :attr:`Task.reference`).
        manifest: ``manifest.json``: task, settings, seed, key and ``metrics``; written last, so it marks a
            complete build.
        metrics: the build's measurements (see :func:`build_assets`).
        from_cache: True when this call found the assets already built.
    """

    root: Path
    model_dir: Path
    tokenizer_dir: Path
    train_parquet: Path
    val_parquet: Path
    test_parquet: Path
    sft_corpus: Path
    manifest: Path
    metrics: dict
    from_cache: bool

    @classmethod
    def at(cls, root: Path, *, from_cache: bool) -> DemoAssets:
        """The assets of the build directory ``root`` (its manifest must exist)."""
        manifest = root / "manifest.json"
        return cls(
            root=root,
            model_dir=root / "model",
            tokenizer_dir=root / "model",
            train_parquet=root / "train.parquet",
            val_parquet=root / "val.parquet",
            test_parquet=root / "test.parquet",
            sft_corpus=root / "sft_corpus.jsonl",
            manifest=manifest,
            metrics=json.loads(manifest.read_text())["metrics"],
            from_cache=from_cache,
        )


def cache_key(settings: DemoSettings, seed: int, task: Task | None = None) -> str:
    """16 hex digits of SHA-256 over the task's name, the settings, the seed and the source of the task's
    corpus generator and of this builder; ``task`` defaults to :data:`REACT`."""
    task = task or REACT
    identity = {"task": task.name, "settings": asdict(settings), "seed": seed}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode())
    for source in (*task.sources, Path(__file__)):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def stderr_progress(message: str) -> None:
    """Default progress sink: one ``[demo-assets]`` line on stderr."""
    print(f"[demo-assets] {message}", file=sys.stderr, flush=True)


def train_tokenizer(texts: Sequence[str], vocab_size: int) -> Qwen2Tokenizer:
    """A byte-level BPE ``Qwen2Tokenizer`` trained on ``texts``; any NFC unicode text round-trips.

    ``AutoTokenizer`` loads every ``model_type="qwen2"`` checkpoint as ``Qwen2Tokenizer``, which imposes
    Qwen2's NFC normalizer and pre-tokenizer regex, so the BPE merges are learnt under exactly those.
    Special tokens: ``<|endoftext|>`` (pad), ``<|im_start|>``, ``<|im_end|>`` (eos); chat template
    :data:`CHAT_TEMPLATE`; no BOS token.
    """
    qwen2 = Qwen2Tokenizer().backend_tokenizer
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer, tokenizer.pre_tokenizer = qwen2.normalizer, qwen2.pre_tokenizer
    tokenizer.decoder = qwen2.decoder
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    bpe = json.loads(tokenizer.to_str())["model"]
    trained = Qwen2Tokenizer(
        vocab=bpe["vocab"],
        merges=[tuple(pair) for pair in bpe["merges"]],
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )
    trained.add_tokens([AddedToken(token, special=True) for token in SPECIAL_TOKENS], special_tokens=True)
    return trained


def prompt_ids(tokenizer: Qwen2Tokenizer, prompt: str) -> list[int]:
    """Token ids of ``prompt`` as one user turn plus the assistant header, exactly as verl's rollout sees it."""
    messages = [{"role": "user", "content": prompt}]
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"])


def response_ids(tokenizer: Qwen2Tokenizer, response: str) -> list[int]:
    """Token ids of ``response`` followed by EOS: what the policy must generate."""
    return tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]


def build_model(settings: DemoSettings, tokenizer: Qwen2Tokenizer, seed: int) -> Qwen2ForCausalLM:
    """A randomly initialised tiny ``Qwen2ForCausalLM`` (tied embeddings, float32, sdpa attention)."""
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=settings.hidden_size,
        intermediate_size=settings.intermediate_size,
        num_hidden_layers=settings.num_hidden_layers,
        num_attention_heads=settings.num_attention_heads,
        num_key_value_heads=settings.num_key_value_heads,
        max_position_embeddings=settings.max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    return model


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


def load_reward_file(path: Path) -> ModuleType:
    """The reward file at ``path``, loaded by path as verl's ``custom_reward_function`` loads it."""
    spec = importlib.util.spec_from_file_location(f"demo_reward_{path.stem}", path)
    reward = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reward)
    return reward


def compile_rate(responses: Sequence[str]) -> tuple[float | None, str]:
    """``(rate, how)``: the fraction of ``responses`` that the demo's reward marks ``compiled``.

    The reward is ``reward_models/react_tsx.py`` at its defaults (esbuild's TSX parser), loaded by path as
    verl's ``custom_reward_function`` loads it. ``rate`` is None, and ``how`` says why, when that file is
    missing or its checker cannot start (``npm ci`` not run in ``reward_models/tsx``).
    """
    if not REACT_TSX.exists():
        return None, f"not measured: {REACT_TSX} is missing"
    reward = load_reward_file(REACT_TSX)
    try:
        compiled = [reward.compute_score(DATA_SOURCE, response)["compiled"] for response in responses]
    except reward.CheckerSetupError as error:
        return None, f"not measured: {error}"
    return sum(compiled) / len(compiled), "reward_models/react_tsx.py compute_score (esbuild TSX syntax)"


def compile_metrics(
    responses: Sequence[str], examples: Sequence[react_corpus.Example]
) -> dict[str, float | str | None]:
    """:data:`REACT`'s sample metrics: ``{"compile_rate", "compile_checker"}`` (see :func:`compile_rate`)."""
    rate, how = compile_rate(responses)
    return {"compile_rate": rate, "compile_checker": how}


def answer_metrics(responses: Sequence[str], examples: Sequence[arithmetic.Problem]) -> dict[str, float]:
    """:data:`ARITHMETIC`'s sample metrics from ``reward_models/arithmetic_steps.py`` at its defaults.

    ``{"accuracy", "answer_found_rate", "step_accuracy"}``: the fraction of responses whose boxed answer
    math-verify accepts, the fraction with a boxed answer at all, and the fraction of checked steps that
    are right over all responses (0 when no response has a step).
    """
    reward = load_reward_file(ARITHMETIC_STEPS)
    results = [
        reward.compute_score(arithmetic.DATA_SOURCE, response, str(example.answer))
        for response, example in zip(responses, examples, strict=True)
    ]
    steps = sum(result["steps"] for result in results)
    return {
        "accuracy": sum(result["acc"] for result in results) / len(results),
        "answer_found_rate": sum(result["answer_found"] for result in results) / len(results),
        "step_accuracy": sum(result["steps_correct"] for result in results) / steps if steps else 0.0,
    }


REACT = Task(
    name="react_tsx",
    data_source=DATA_SOURCE,
    ability="code",
    generate=react_corpus.generate_corpus,
    reference=lambda example: (example.code, {"kind": example.kind, "component": example.name}),
    score_samples=compile_metrics,
    sources=(Path(react_corpus.__file__),),
    settings=DemoSettings(),
)
ARITHMETIC = Task(
    name="arithmetic",
    data_source=arithmetic.DATA_SOURCE,
    ability="math",
    generate=arithmetic.generate_problems,
    reference=lambda problem: (str(problem.answer), {"kind": problem.kind, "question": problem.prompt}),
    score_samples=answer_metrics,
    sources=(Path(arithmetic.__file__),),
    settings=DemoSettings(
        sft_examples=4000,
        vocab_size=512,
        max_position_embeddings=256,
        sft_steps=400,
        eval_samples=128,
        max_response_tokens=96,
    ),
)
# The same task with 6-8 operations: the warm start rarely solves a problem (sparse outcomes), while its
# steps stay checkable. Longer solutions need a longer budget.
ARITHMETIC_HARD = replace(
    ARITHMETIC,
    name="arithmetic_hard",
    generate=partial(arithmetic.generate_problems, difficulty=arithmetic.HARD),
    settings=replace(ARITHMETIC.settings, max_position_embeddings=320, max_response_tokens=160),
)
TASKS = {task.name: task for task in (REACT, ARITHMETIC, ARITHMETIC_HARD)}


def sample_metrics(
    model: Qwen2ForCausalLM,
    tokenizer: Qwen2Tokenizer,
    task: Task,
    examples: Sequence[Example],
    settings: DemoSettings,
    seed: int,
) -> dict[str, float | int | str | None]:
    """EOS rate, mean length and the task's metrics of ``settings.eval_samples`` temperature-1 samples over
    ``examples`` (cycling).

    The samples are decoded as verl's reward managers decode them (``skip_special_tokens=True``).
    """
    chosen = [examples[i % len(examples)] for i in range(settings.eval_samples)]
    responses = sample_responses(
        model, tokenizer, [example.prompt for example in chosen], settings.max_response_tokens, seed
    )
    decoded = [tokenizer.decode(ids, skip_special_tokens=True) for ids in responses]
    return {
        "eval_samples": len(responses),
        "sample_eos_rate": sum(ids[-1] == tokenizer.eos_token_id for ids in responses) / len(responses),
        "sample_mean_tokens": sum(map(len, responses)) / len(responses),
        **task.score_samples(decoded, chosen),
    }


def rl_rows(task: Task, examples: Sequence[Example], split: str) -> list[dict]:
    """verl RL dataset rows (``RLHFDataset`` with ``prompt_key="prompt"``; reward via ``data_source``).

    ``reward_model.ground_truth`` and the ``extra_info`` fields besides ``split`` and ``index`` (verl reads
    it) come from ``task.reference``: for :data:`REACT` the reference TSX solution, ``kind`` and
    ``component``; for :data:`ARITHMETIC` the answer, ``kind`` and ``question`` (the problem text).
    """
    rows = []
    for index, example in enumerate(examples):
        ground_truth, info = task.reference(example)
        rows.append(
            {
                "data_source": task.data_source,
                "prompt": [{"role": "user", "content": example.prompt}],
                "ability": task.ability,
                "reward_model": {"style": "rule", "ground_truth": ground_truth},
                "extra_info": {"split": split, "index": index, **info},
            }
        )
    return rows


def disk_bytes(path: Path) -> int:
    """Size of a file, or the total of the files under a directory."""
    if path.is_file():
        return path.stat().st_size
    return sum(child.stat().st_size for child in path.rglob("*") if child.is_file())


def token_stats(lengths: Sequence[int]) -> dict[str, float]:
    """``{"min", "mean", "max"}`` of a non-empty sequence of token counts."""
    return {"min": min(lengths), "mean": sum(lengths) / len(lengths), "max": max(lengths)}


def split_sizes(examples: Sequence[Example], sizes: Sequence[int]) -> list[Sequence[Example]]:
    """``examples`` cut into consecutive parts of ``sizes``."""
    ends = [sum(sizes[: k + 1]) for k in range(len(sizes))]
    return [examples[end - size : end] for size, end in zip(sizes, ends, strict=True)]


def _build(root: Path, task: Task, settings: DemoSettings, seed: int, progress: Progress) -> dict:
    """Write every asset of ``task`` into the empty directory ``root``; return the metrics."""
    start = time.perf_counter()
    sizes = (settings.val_prompts, settings.train_prompts, settings.test_prompts, settings.sft_examples)
    val, train, test, sft = split_sizes(task.generate(sum(sizes), seed), sizes)
    progress(f"corpus: {len(sft)} SFT examples, {len(train)} train, {len(val)} val and {len(test)} test prompts")
    with open(root / "sft_corpus.jsonl", "w", encoding="utf-8") as handle:
        for example in sft:
            row = {"prompt": example.prompt, "response": example.response, **task.reference(example)[1]}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    pd.DataFrame(rl_rows(task, train, "train")).to_parquet(root / "train.parquet")
    pd.DataFrame(rl_rows(task, val, "val")).to_parquet(root / "val.parquet")
    pd.DataFrame(rl_rows(task, test, "test")).to_parquet(root / "test.parquet")

    texts = [text for example in sft for text in (f"user\n{example.prompt}", f"assistant\n{example.response}")]
    tokenizer = train_tokenizer(texts, settings.vocab_size)
    sft_encoded = encode_examples(tokenizer, sft)
    val_encoded = encode_examples(tokenizer, val)
    response_lengths = [sum(label != -100 for label in labels) for _, labels in sft_encoded]
    prompt_lengths = [len(prompt_ids(tokenizer, example.prompt)) for example in train + val]
    progress(
        f"tokenizer: vocab {len(tokenizer)}; solution tokens (with EOS) {min(response_lengths)}-"
        f"{max(response_lengths)}, RL prompt tokens {min(prompt_lengths)}-{max(prompt_lengths)}"
    )
    if max(response_lengths) > settings.max_response_tokens:
        progress(f"warning: some solutions exceed max_response_tokens={settings.max_response_tokens}")

    model = build_model(settings, tokenizer, seed)
    parameters = sum(p.numel() for p in model.parameters())
    progress(f"model: Qwen2 with {parameters:,} parameters; SFT for {settings.sft_steps} steps")
    sft_metrics = supervised_warm_start(
        model,
        sft_encoded,
        collate(val_encoded, tokenizer.pad_token_id),
        settings,
        seed,
        tokenizer.pad_token_id,
        progress,
    )
    progress(f"SFT held-out response loss {sft_metrics['sft_loss_before']:.3f} -> {sft_metrics['sft_loss_after']:.3f}")
    model_dir = root / "model"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)

    samples = sample_metrics(model, tokenizer, task, val, settings, seed)
    measured = {key: value for key, value in samples.items() if key not in ("eval_samples", "compile_checker")}
    progress(f"{samples['eval_samples']} samples at temperature 1: {json.dumps(measured)}")
    metrics = {
        "parameters": parameters,
        "vocab_size": len(tokenizer),
        "solution_tokens": token_stats(response_lengths),
        "prompt_tokens": token_stats(prompt_lengths),
        **sft_metrics,
        **samples,
    }
    metrics["bytes"] = {p.name: disk_bytes(p) for p in sorted(root.iterdir())}
    metrics["build_seconds"] = time.perf_counter() - start
    return metrics


def build_assets(
    cache_dir: Path,
    *,
    task: Task | None = None,
    seed: int = 0,
    force: bool = False,
    settings: DemoSettings | None = None,
    progress: Progress = stderr_progress,
) -> DemoAssets:
    """Build ``task``'s assets (default :data:`REACT`; ``settings`` default ``task.settings``) into
    ``cache_dir/<cache_key>/``, or return them from there if already built.

    The build goes to a temporary sibling directory that is renamed into place once ``manifest.json`` is
    written, so an interrupted build never looks complete. ``force`` rebuilds even when cached.

    ``DemoAssets.metrics`` holds:

    - ``parameters``, ``vocab_size``;
    - ``solution_tokens`` (SFT responses with EOS) and ``prompt_tokens`` (RL train and val prompts with the
      chat template), each ``{"min", "mean", "max"}``;
    - ``sft_loss_before``/``sft_loss_after`` (held-out response-token cross-entropy, nats),
      ``sft_final_train_loss``, ``sft_seconds``;
    - ``sample_eos_rate``, ``sample_mean_tokens``, ``eval_samples`` of temperature-1 samples on val prompts,
      and the task's metrics of them: for :data:`REACT` ``compile_rate`` (fraction the demo's reward marks
      compiled, see :func:`compile_rate`; None when it cannot be measured) and ``compile_checker``; for
      :data:`ARITHMETIC` ``accuracy``, ``answer_found_rate`` and ``step_accuracy`` (:func:`answer_metrics`);
    - ``bytes`` (per asset) and ``build_seconds``.
    """
    task = task or REACT
    settings = settings or task.settings
    key = cache_key(settings, seed, task)
    root = Path(cache_dir).resolve() / key
    if (root / "manifest.json").exists() and not force:
        progress(f"cached: {root}")
        return DemoAssets.at(root, from_cache=True)
    staging = root.with_name(f".{key}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    progress(f"building into {root}")
    try:
        metrics = _build(staging, task, settings, seed, progress)
        manifest = {"key": key, "task": task.name, "seed": seed, "settings": asdict(settings), "metrics": metrics}
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        shutil.rmtree(root, ignore_errors=True)
        staging.rename(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    progress(f"built in {metrics['build_seconds']:.0f} s")
    return DemoAssets.at(root, from_cache=False)


def main(argv: Sequence[str] | None = None) -> None:
    """CLI: build (or reuse) the assets and print ``name=path`` lines, then the metrics as JSON with ``--metrics``."""
    parser = argparse.ArgumentParser(prog="python -m demo.assets", description=__doc__.split("\n")[0])
    parser.add_argument("--task", choices=sorted(TASKS), default=REACT.name, help="which demo task to build")
    parser.add_argument("--cache-dir", type=Path, default=Path(".cache/demo"), help="where builds are cached")
    parser.add_argument("--seed", type=int, default=0, help="seed of the corpus, the tokenizer data and the model")
    parser.add_argument("--force", action="store_true", help="rebuild even if a cached build exists")
    parser.add_argument("--metrics", action="store_true", help="also print the build's metrics as JSON")
    args = parser.parse_args(argv)
    assets = build_assets(args.cache_dir, task=TASKS[args.task], seed=args.seed, force=args.force)
    paths = ("model_dir", "tokenizer_dir", "train_parquet", "val_parquet", "test_parquet", "sft_corpus", "manifest")
    for name in paths:
        print(f"{name}={getattr(assets, name)}")
    if args.metrics:
        print(json.dumps(assets.metrics, indent=2))


if __name__ == "__main__":
    main()
