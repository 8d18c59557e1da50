"""The CPU demo's assets: corpus, tokenizer, chat template through verl's real RLHFDataset, model, cache."""

import json
import subprocess
import sys
import unicodedata
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch
from omegaconf import OmegaConf
from tiny_demo import TINY
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

from bot_grpo_verl.rewards.react_requirements import SPEC_KEY, ReactSpec
from demo import assets, react_corpus, sft, tasks
from demo.assets import build_assets
from demo.settings import DemoSettings
from demo.tiny_model import prompt_ids

ROOT = Path(__file__).resolve().parents[1]
needs_checker = pytest.mark.skipif(
    not (tasks.REACT_TSX.parent / "tsx" / "node_modules").exists(), reason="run npm ci in bot_grpo_verl/rewards/tsx"
)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("demo_cache")


@pytest.fixture(scope="module")
def built(cache_dir):  # the demo's warm start, a minute or more: every test using it is marked slow
    return build_assets(cache_dir, seed=3, settings=TINY, progress=lambda message: None)


def test_corpus_is_deterministic_distinct_and_covers_every_kind():
    first, again = react_corpus.generate_corpus(40, seed=7), react_corpus.generate_corpus(40, seed=7)
    assert first == again
    assert react_corpus.generate_corpus(40, seed=8) != first
    assert len({example.prompt for example in first}) == 40
    assert {example.kind for example in first} == set(react_corpus.KINDS)
    for example in first:
        assert example.prompt.startswith("Write a React component `")
        assert f"export function {example.name}(" in example.code
        assert example.response == f"```tsx\n{example.code}```"


def test_corpus_rejects_a_negative_size():
    with pytest.raises(ValueError, match="corpus size"):
        react_corpus.generate_corpus(-1, seed=0)


@needs_checker
def test_every_kind_of_solution_compiles_and_broken_code_does_not():
    responses = [example.response for example in react_corpus.generate_corpus(5 * len(react_corpus.KINDS), seed=11)]
    assert tasks.compile_rate(responses)[0] == 1.0
    unclosed = [response.replace("}\n```", "\n```") for response in responses]
    assert tasks.compile_rate(unclosed)[0] == 0.0
    assert tasks.compile_rate([*responses[:3], unclosed[3]])[0] == 0.75


def test_settings_reject_bad_values():
    with pytest.raises(ValueError, match="vocab_size"):
        DemoSettings(vocab_size=100)
    with pytest.raises(ValueError, match="num_attention_heads"):
        DemoSettings(hidden_size=100, num_attention_heads=3)
    with pytest.raises(ValueError, match="sizes must be positive"):
        DemoSettings(sft_batch_size=0)


@pytest.mark.slow
def test_tokenizer_round_trips_tsx_and_unicode_as_verl_loads_it(built):
    tokenizer = AutoTokenizer.from_pretrained(built.tokenizer_dir)  # what verl's hf_tokenizer does
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert len(tokenizer) == TINY.vocab_size
    responses = [json.loads(line)["response"] for line in built.sft_corpus.read_text().splitlines()]
    unseen = 'const label = "Grüße, 東京 ★ 🎉";\nexport const A = () => <p title={label}>naïve → ok</p>;\n'
    for text in [*responses[:20], unseen]:
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.decode(ids) == text
    assert tokenizer("x<|im_end|>", add_special_tokens=False)["input_ids"][-1] == tokenizer.eos_token_id
    # Qwen2's tokenizer normalises to NFC, so only NFC text round-trips byte for byte.
    decomposed = unicodedata.normalize("NFD", "Café")
    assert tokenizer.decode(tokenizer(decomposed)["input_ids"]) == "Café"
    assert len(tokenizer(responses[0])["input_ids"]) < len(responses[0].encode()) / 2  # BPE merged something


@pytest.mark.slow
def test_rl_parquet_has_verls_columns(built):
    splits = (
        (built.train_parquet, TINY.train_prompts, "train"),
        (built.val_parquet, TINY.val_prompts, "val"),
        (built.test_parquet, TINY.test_prompts, "test"),
    )
    for path, size, split in splits:
        frame = pd.read_parquet(path)
        assert list(frame.columns) == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
        assert len(frame) == size
        assert set(frame.data_source) == {tasks.DATA_SOURCE}
        assert [row["index"] for row in frame.extra_info] == list(range(size))
        assert {row["split"] for row in frame.extra_info} == {split}
        for prompt, reward_model in zip(frame.prompt, frame.reward_model, strict=True):
            assert [message["role"] for message in prompt] == ["user"]
            assert reward_model["style"] == "rule" and "export function" in reward_model["ground_truth"]
    train = set(pd.read_parquet(built.train_parquet).prompt.map(lambda p: p[0]["content"]))
    val = set(pd.read_parquet(built.val_parquet).prompt.map(lambda p: p[0]["content"]))
    test = set(pd.read_parquet(built.test_parquet).prompt.map(lambda p: p[0]["content"]))
    sft = {json.loads(line)["prompt"] for line in built.sft_corpus.read_text().splitlines()}
    splits = (train, val, test, sft)
    assert all(not (a & b) for k, a in enumerate(splits) for b in splits[k + 1 :])
    assert len(test) == TINY.test_prompts


@pytest.mark.slow
def test_verls_rlhf_dataset_reads_the_parquet_with_the_built_tokenizer(built, tmp_path):
    from verl.utils import hf_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    tokenizer = hf_tokenizer(str(built.tokenizer_dir))
    frame = pd.read_parquet(built.train_parquet)
    lengths = [len(prompt_ids(tokenizer, prompt[0]["content"])) for prompt in frame.prompt]
    assert max(lengths) <= built.metrics["prompt_tokens"]["max"]

    def dataset(max_prompt_length):
        config = OmegaConf.create(
            {"max_prompt_length": max_prompt_length, "filter_overlong_prompts": True, "cache_dir": str(tmp_path)}
        )
        return RLHFDataset(str(built.train_parquet), tokenizer, config)

    full = dataset(max(lengths))
    assert len(full) == TINY.train_prompts
    # verl's overlong-prompt filter counts prompt tokens exactly as the builder does
    assert len(dataset(max(lengths) - 1)) == sum(length < max(lengths) for length in lengths)
    item = full[0]
    row = frame.iloc[0]
    assert item["data_source"] == tasks.DATA_SOURCE and item["index"] == 0
    assert item["reward_model"]["ground_truth"] == row.reward_model["ground_truth"]
    # the row's requirement spec reaches the reward as verl reads it back, and its own reference meets it
    spec = ReactSpec.from_extra_info(item["extra_info"])
    assert spec == ReactSpec.from_extra_info(
        {SPEC_KEY: tasks.react_reward().reference_spec(item["reward_model"]["ground_truth"])}
    )
    assert spec.component == item["extra_info"]["component"] and spec.elements
    reward = tasks.react_reward().compute_score(
        tasks.DATA_SOURCE, f"```tsx\n{row.reward_model['ground_truth']}```", None, item["extra_info"]
    )
    assert reward["score"] == 1.0 and reward["requirements_met"] == 1
    text = tokenizer.apply_chat_template(item["raw_prompt"], add_generation_prompt=True, tokenize=False)
    assert text == f"<|im_start|>user\n{row.prompt[0]['content']}<|im_end|>\n<|im_start|>assistant\n"
    ids = prompt_ids(tokenizer, row.prompt[0]["content"])
    assert tokenizer.decode(ids) == text
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|im_start|>")


@pytest.mark.slow
def test_saved_model_loads_generates_and_is_the_trained_one(built):
    model = AutoModelForCausalLM.from_pretrained(built.model_dir)
    tokenizer = AutoTokenizer.from_pretrained(built.tokenizer_dir)
    assert isinstance(model, Qwen2ForCausalLM) and model.config.tie_word_embeddings
    assert sum(p.numel() for p in model.parameters()) == built.metrics["parameters"]
    assert model.generation_config.eos_token_id == tokenizer.eos_token_id
    assert (built.model_dir / "model.safetensors").exists()

    frame = pd.read_parquet(built.val_parquet)
    val = [
        react_corpus.Example(info["kind"], info["component"], prompt[0]["content"], reward_model["ground_truth"])
        for prompt, reward_model, info in zip(frame.prompt, frame.reward_model, frame.extra_info, strict=True)
    ]
    held_out = sft.collate(sft.encode_examples(tokenizer, val), tokenizer.pad_token_id)
    assert sft.response_loss(model, held_out) == pytest.approx(built.metrics["sft_loss_after"], rel=1e-4)

    responses = sft.sample_responses(model, tokenizer, [val[0].prompt, val[1].prompt], max_new_tokens=6, seed=0)
    assert responses == sft.sample_responses(model, tokenizer, [val[0].prompt, val[1].prompt], 6, seed=0)
    for ids in responses:
        assert 1 <= len(ids) <= 6
        assert tokenizer.eos_token_id not in ids[:-1]  # cut after the first EOS


@pytest.mark.slow
def test_sampling_draws_from_the_models_own_distribution(built):
    """Temperature 1, no top-k/top-p, left padding invisible: over prompts of different lengths batched
    together, first tokens fall into ten bins of the model's own softmax (each prompt alone, tokens sorted by
    probability, ~10% of the mass a bin) as often as that softmax says. Top-k, a temperature or padding
    leaking into attention all move mass between the bins."""
    model = AutoModelForCausalLM.from_pretrained(built.model_dir).eval()
    tokenizer = AutoTokenizer.from_pretrained(built.tokenizer_dir)
    prompts = sorted((row[0]["content"] for row in pd.read_parquet(built.val_parquet).prompt), key=len)[::-1]
    prompts = [prompts[0], prompts[-1]]  # the longest and the shortest: the shortest is left-padded
    draws = 3000
    first = sft.sample_responses(model, tokenizer, prompts * draws, max_new_tokens=1, seed=0, batch_size=2 * draws)
    for k, prompt in enumerate(prompts):
        with torch.no_grad():
            expected = torch.softmax(model(torch.tensor([prompt_ids(tokenizer, prompt)])).logits[0, -1].double(), -1)
        order = expected.argsort(descending=True)
        bin_of = torch.empty_like(order)
        bin_of[order] = (10 * (expected[order].cumsum(0) - expected[order])).long().clamp(max=9)
        expected_mass = torch.zeros(10, dtype=torch.double).index_add(0, bin_of, expected)
        sampled = torch.tensor([ids[0] for ids in first[k :: len(prompts)]])
        observed_mass = torch.bincount(bin_of[sampled], minlength=10).double() / draws
        assert 0.5 * (observed_mass - expected_mass).abs().sum().item() < 0.04, (prompt, observed_mass, expected_mass)


@pytest.mark.slow
def test_sft_lowers_the_held_out_response_loss(built):
    metrics = built.metrics
    assert metrics["sft_loss_before"] == pytest.approx(torch.log(torch.tensor(TINY.vocab_size)).item(), rel=0.1)
    assert metrics["sft_loss_after"] < 0.75 * metrics["sft_loss_before"]
    assert metrics["eval_samples"] == TINY.eval_samples
    if metrics["compile_rate"] is None:
        assert metrics["compile_checker"].startswith("not measured")
    else:
        assert 0.0 <= metrics["compile_rate"] <= 1.0


@pytest.mark.slow
def test_second_build_comes_from_the_cache(built, cache_dir):
    messages = []
    again = build_assets(cache_dir, seed=3, settings=TINY, progress=messages.append)
    assert again.from_cache and not built.from_cache
    assert again.root == built.root and messages == [f"cached: {built.root}"]
    assert again.metrics == built.metrics
    assert [path.name for path in cache_dir.iterdir()] == [built.root.name]  # no staging left behind
    assert assets.cache_key(TINY, seed=3) == built.root.name != assets.cache_key(TINY, seed=4)


@pytest.mark.slow
def test_the_cache_key_hashes_every_demo_module_the_build_loads():
    """An edit to any module that ``python -m demo.assets`` runs, or to a task's corpus generator, rebuilds."""
    script = "import sys, demo.assets; print(*(m.__file__ for n, m in sys.modules.items() if n.startswith('demo.')))"
    loaded = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True)
    hashed = {*assets.BUILDER_SOURCES, *(source for task in tasks.TASKS.values() for source in task.sources)}
    assert {Path(path) for path in loaded.stdout.split()} == hashed


@pytest.mark.slow
def test_the_cli_runs_from_the_repository_root():
    run = subprocess.run([sys.executable, "-m", "demo.assets", "--help"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0 and "--cache-dir" in run.stdout, run.stderr


def test_force_rebuilds_and_an_interrupted_build_leaves_nothing(tmp_path, monkeypatch):
    staged = []

    def fake_build(root, task, settings, seed, progress):
        staged.append(root)
        (root / "marker").write_text(str(len(staged)))
        return {"build_seconds": 0.0, "build": len(staged)}

    def failing_build(root, task, settings, seed, progress):
        raise RuntimeError("interrupted")

    quiet = {"settings": TINY, "progress": lambda message: None}
    monkeypatch.setattr(assets, "_build", fake_build)
    first = build_assets(tmp_path, **quiet)
    cached = build_assets(tmp_path, **quiet)
    forced = build_assets(tmp_path, force=True, **quiet)
    assert (first.from_cache, cached.from_cache, forced.from_cache) == (False, True, False)
    assert [first.metrics["build"], cached.metrics["build"], forced.metrics["build"]] == [1, 1, 2]
    assert (forced.root / "marker").read_text() == "2" and staged[1] != forced.root
    monkeypatch.setattr(assets, "_build", failing_build)
    with pytest.raises(RuntimeError, match="interrupted"):
        build_assets(tmp_path, seed=1, **quiet)
    assert [path.name for path in tmp_path.iterdir()] == [forced.root.name]


def test_a_build_says_each_stage_with_the_seconds_since_it_began(tmp_path, monkeypatch):
    clock = iter([100.0, 100.2, 163.7, 171.0])  # build start, then one reading per message

    def fake_build(root, task, settings, seed, progress):
        progress("SFT step 24/240")
        return {"build_seconds": 71.0}

    messages = []
    monkeypatch.setattr(assets, "_build", fake_build)
    monkeypatch.setattr(assets, "time", SimpleNamespace(monotonic=lambda: next(clock)))
    built = build_assets(tmp_path, settings=TINY, progress=messages.append)
    assert messages == [
        f"+0 s building into {built.root} (once; reused while the demo's sources and settings stay the same)",
        "+64 s SFT step 24/240",
        "+71 s built in 71 s",
    ]


def test_the_warm_start_says_where_it_is_at_least_every_progress_interval(monkeypatch):
    """20 steps report every 2nd step (a tenth); when steps take longer than ``PROGRESS_SECONDS`` each one reports."""
    config = Qwen2Config(
        vocab_size=16,
        hidden_size=8,
        intermediate_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    model = Qwen2ForCausalLM(config)
    train = [([1, 2, 3, 4, 5], [-100, -100, 3, 4, 5]), ([1, 6, 7], [-100, 6, 7])]
    settings = DemoSettings(sft_steps=20, sft_batch_size=2)
    messages = []
    sft.supervised_warm_start(model, train, sft.collate(train, 0), settings, 0, 0, messages.append)
    assert [message.split(":")[0] for message in messages] == [f"SFT step {step}/20" for step in range(2, 21, 2)]
    seconds = iter(range(0, 10_000, 31))  # every reading of the clock 31 s after the last
    monkeypatch.setattr(sft, "time", SimpleNamespace(perf_counter=lambda: float(next(seconds))))
    messages.clear()
    sft.supervised_warm_start(model, train, sft.collate(train, 0), settings, 0, 0, messages.append)
    assert [message.split(":")[0] for message in messages] == [f"SFT step {step}/20" for step in range(1, 21)]


KEPT_ARITHMETIC = ROOT / "benchmarks" / "results" / "protocol-rerun" / "warm-starts" / "58f82e925d2bb22a"


def model_bytes(root: Path) -> bytes:
    return (root / "model" / "model.safetensors").read_bytes()


def test_a_kept_build_is_installed_under_todays_key_and_then_read_from_the_cache(tmp_path):
    messages = []
    root = assets.install_warm_start(tmp_path, KEPT_ARITHMETIC, task=tasks.ARITHMETIC, progress=messages.append)
    assert root.name == assets.cache_key(tasks.ARITHMETIC.settings, 0, tasks.ARITHMETIC) != KEPT_ARITHMETIC.name
    assert "58f82e925d2bb22a" in messages[0] and str(root) in messages[0]
    cached = build_assets(tmp_path, task=tasks.ARITHMETIC, progress=lambda message: None)
    assert cached.from_cache and cached.root == root
    assert model_bytes(root) == model_bytes(KEPT_ARITHMETIC)
    assert sorted(path.name for path in tmp_path.iterdir()) == [root.name]  # no staging folder left behind


def test_a_build_already_cached_is_left_as_it_is(tmp_path):
    root = tmp_path / assets.cache_key(tasks.ARITHMETIC.settings, 0, tasks.ARITHMETIC)
    root.mkdir()
    (root / "manifest.json").write_text("{}")
    assert assets.install_warm_start(tmp_path, KEPT_ARITHMETIC, task=tasks.ARITHMETIC) == root
    assert sorted(path.name for path in root.iterdir()) == ["manifest.json"]


def test_a_kept_build_of_another_task_seed_or_settings_or_no_build_is_refused(tmp_path):
    with pytest.raises(ValueError, match="another (settings and )?task than task arithmetic_hard's"):
        assets.install_warm_start(tmp_path, KEPT_ARITHMETIC, task=tasks.ARITHMETIC_HARD)
    with pytest.raises(ValueError, match="another seed than task arithmetic's, seed 1"):
        assets.install_warm_start(tmp_path, KEPT_ARITHMETIC, task=tasks.ARITHMETIC, seed=1)
    with pytest.raises(ValueError, match="another settings"):
        assets.install_warm_start(tmp_path, KEPT_ARITHMETIC, task=tasks.ARITHMETIC, settings=TINY)
    with pytest.raises(ValueError, match="no manifest.json"):
        assets.install_warm_start(tmp_path, tmp_path, task=tasks.ARITHMETIC)
    assert list(tmp_path.iterdir()) == []
