"""The CPU demo's assets, made locally and cached: tokenizer, warm-started tiny Qwen2 policy, RL parquet files.

Nothing is downloaded. :func:`build_assets` generates a task's corpus (:mod:`demo.tasks`), trains a byte-level
BPE tokenizer on it and builds a tiny ``Qwen2ForCausalLM`` from a config (:mod:`demo.tiny_model`), warm-starts
it with a short supervised pass on the corpus (loss on response tokens only; :mod:`demo.sft`), measures its
temperature-1 samples with the task's reward (compile rate, answer accuracy), and writes train/val/test parquet
files in verl's RL dataset format. The result lives in ``cache_dir/<key>/``, where ``key`` hashes the task,
the settings, the seed and the sources of the builder and of the task's corpus generator, so a second call with
the same inputs returns at once and any change rebuilds.

CLI (from the repository root): ``python -m demo.assets --task arithmetic --cache-dir .cache/demo`` prints the
paths.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd
from transformers import Qwen2ForCausalLM, Qwen2Tokenizer

from demo.settings import DemoSettings
from demo.sft import Progress, collate, encode_examples, sample_responses, supervised_warm_start
from demo.tasks import REACT, TASKS, Example, Task
from demo.tiny_model import build_model, prompt_ids, train_tokenizer

# The builder's modules: their bytes enter the cache key (with the task's corpus generator, Task.sources).
BUILDER_SOURCES = tuple(
    Path(__file__).with_name(f"{name}.py") for name in ("assets", "settings", "sft", "tasks", "tiny_model")
)


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
    """16 hex digits of SHA-256 over the task's name, the settings, the seed and the sources of the task's
    corpus generator and of the builder (:data:`BUILDER_SOURCES`); ``task`` defaults to :data:`REACT`."""
    task = task or REACT
    identity = {"task": task.name, "settings": asdict(settings), "seed": seed}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode())
    for source in (*task.sources, *BUILDER_SOURCES):
        digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def stderr_progress(message: str) -> None:
    """Default progress sink: one ``[demo-assets]`` line on stderr."""
    print(f"[demo-assets] {message}", file=sys.stderr, flush=True)


def with_elapsed(progress: Progress, started: float) -> Progress:
    """``progress`` with each message prefixed by the whole seconds since ``started`` (a ``time.monotonic()``)."""
    return lambda message: progress(f"+{time.monotonic() - started:.0f} s {message}")


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
        model, tokenizer, [example.prompt for example in chosen], settings.max_response_tokens, seed, task.tool
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
    ``component``; for :data:`~demo.tasks.ARITHMETIC` the answer, ``kind`` and ``question`` (the problem text).
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
    progress(f"tokenizer: training a byte-level BPE of {settings.vocab_size} tokens on the SFT corpus")
    tokenizer = train_tokenizer(texts, settings.vocab_size)
    sft_encoded = encode_examples(tokenizer, sft)
    val_encoded = encode_examples(tokenizer, val)
    response_lengths = [
        len(labels) - len(prompt_ids(tokenizer, example.prompt))
        for example, (_, labels) in zip(sft, sft_encoded, strict=True)
    ]
    prompt_lengths = [len(prompt_ids(tokenizer, example.prompt)) for example in train + val]
    progress(
        f"tokenizer: vocab {len(tokenizer)}; solution tokens (with EOS) {min(response_lengths)}-"
        f"{max(response_lengths)}, RL prompt tokens {min(prompt_lengths)}-{max(prompt_lengths)}"
    )
    if max(response_lengths) > settings.max_response_tokens:
        progress(f"warning: some solutions exceed max_response_tokens={settings.max_response_tokens}")

    model = build_model(tokenizer, seed, **settings.architecture)
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

    progress(f"measuring the warm start: {settings.eval_samples} samples at temperature 1, scored by the task's reward")
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
      and the task's metrics of them (``task.score_samples``): for :data:`REACT`
      ``compile_rate`` (fraction the demo's reward marks compiled; None when it cannot be measured) and
      ``compile_checker``; for the arithmetic tasks ``accuracy``, ``answer_found_rate`` and ``step_accuracy``;
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
    progress = with_elapsed(progress, time.monotonic())
    progress(f"building into {root} (once; reused while the demo's sources and settings stay the same)")
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


def install_warm_start(
    cache_dir: Path,
    kept: Path,
    *,
    task: Task | None = None,
    seed: int = 0,
    settings: DemoSettings | None = None,
    progress: Progress = stderr_progress,
) -> Path:
    """Install a kept build (``kept``: a benchmark's ``warm-starts/<key>/`` folder, the build's files without its
    SFT corpus) as ``task``'s cached assets, so that runs start from exactly those weights: a rebuild on another
    CPU, or by a later builder, can train different ones. The kept build must be of the same task, seed and
    settings; its key may differ, since the builder's sources enter the key. A build already cached under this
    key is left as it is (the matrix's guard compares its weights with the committed runs'). Returns the cache
    folder ``cache_dir/<cache_key>``.

    Raises:
        ValueError: ``kept`` holds no manifest, or one of another task, seed or settings.
    """
    task = task or REACT
    settings = settings or task.settings
    root = Path(cache_dir).resolve() / cache_key(settings, seed, task)
    if (root / "manifest.json").exists():
        return root
    manifest = Path(kept) / "manifest.json"
    if not manifest.exists():
        raise ValueError(f"{kept}: no manifest.json, so not a kept build (benchmarks/results/*/warm-starts/<key>/)")
    built = json.loads(manifest.read_text())
    wanted = json.loads(json.dumps({"task": task.name, "seed": seed, "settings": asdict(settings)}))
    differs = sorted(name for name, value in wanted.items() if built.get(name) != value)
    if differs:
        raise ValueError(f"{kept}: a build of another {' and '.join(differs)} than task {task.name}'s, seed {seed}")
    staging = root.with_name(f".{root.name}.tmp-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(kept, staging)
    staging.rename(root)
    progress(f"installed the kept build {kept} (key {built.get('key')}) as {root}")
    return root


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
