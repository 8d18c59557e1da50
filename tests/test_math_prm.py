"""Tests of bot_grpo_verl/rewards/math_prm.py and the PRM modules (prm*.py, micro_batcher.py) on tiny PRMs built
here (no downloads).

The PRMs are random-weight ``Qwen2ForTokenClassification`` (2 labels; Qwen2.5-Math-PRM and PURE-PRM are
Qwen2 token classifiers) and ``LlamaForCausalLM`` (Math-Shepherd is a Mistral/Llama causal LM), with a
byte-level BPE tokenizer trained here with the ``tokenizers`` library, the formats' special tokens added,
saved and loaded back through ``from_pretrained``. The served backend is tested against a vLLM look-alike
HTTP server on 127.0.0.1 that answers from the same model with plain torch.
"""

import contextlib
import json
import math
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import fake_vllm
import numpy as np
import pytest
import torch

from benchmarks.local_tokenizers import byte_level_bpe_model
from bot_grpo_verl.reward.token_rewards import parse_reward_result, split_steps
from bot_grpo_verl.rewards import (
    answer_check,
    math_prm,
    micro_batcher,
    prm_endpoint,
    prm_formats,
    prm_http,
    prm_values,
)

ROOT = Path(__file__).resolve().parents[1]
MATH_PRM_PATH = str(ROOT / "bot_grpo_verl" / "rewards" / "math_prm.py")

QUESTION = "What is 1/4 + 1/4?"
RESPONSE = "Step 1: 1/4 + 1/4 = 2/4.\n\nStep 2: 2/4 = 1/2 because 2 + 2 = 4.\n\nThe answer is \\boxed{\\frac{1}{2}}."
STEPS = [text.strip() for text in RESPONSE.split("\n\n")]


@pytest.fixture(scope="module")
def prm_dirs(tmp_path_factory):
    """``{"classifier": dir, "lm": dir}``: tiny PRM checkpoints with a locally trained tokenizer."""
    from transformers import (
        LlamaConfig,
        LlamaForCausalLM,
        PreTrainedTokenizerFast,
        Qwen2Config,
        Qwen2ForTokenClassification,
    )

    corpus = [RESPONSE, QUESTION, "Let x = 4 - 1, then x = 3 and 10 * 3 = 30."] * 20
    tokenizer = byte_level_bpe_model(corpus, 320, ["<pad>", "<extra_0>", "<|im_start|>", "<|im_end|>"])
    tokenizer.add_tokens(["ки"])  # Math-Shepherd's step tag is an ordinary vocabulary token
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, pad_token="<pad>")
    sizes = dict(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                 initializer_range=0.2, pad_token_id=fast.pad_token_id)  # fmt: skip
    torch.manual_seed(0)
    dirs = {"classifier": tmp_path_factory.mktemp("prm_classifier"), "lm": tmp_path_factory.mktemp("prm_lm")}
    Qwen2ForTokenClassification(Qwen2Config(num_labels=2, **sizes)).save_pretrained(dirs["classifier"])
    LlamaForCausalLM(LlamaConfig(**sizes)).save_pretrained(dirs["lm"])
    for directory in dirs.values():
        fast.save_pretrained(directory)
    return {name: str(directory) for name, directory in dirs.items()}


def model_dir(prm_dirs, prm_format):
    return prm_dirs["lm" if prm_formats.FORMATS[prm_format].head == "lm_pair" else "classifier"]


def config(prm_dirs, prm_format="qwen", **options):
    return math_prm.MathPRMConfig(prm_format=prm_format, prm_model=model_dir(prm_dirs, prm_format), **options)


def options(prm_dirs, prm_format="qwen", **extra):
    return {"prm_format": prm_format, "prm_model": model_dir(prm_dirs, prm_format), **extra}


def assert_spans_close(got, expected):
    assert [span[:2] for span in got] == [span[:2] for span in expected]
    assert [span[2] for span in got] == pytest.approx([span[2] for span in expected], abs=1e-5)


def reference_probabilities(directory, fmt, ids, prompt_length):
    """P(correct) computed straight from the model's logits, the steps found by their tag token id."""
    from transformers import AutoModelForCausalLM, AutoModelForTokenClassification, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(directory)
    tag_id = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(fmt.step_tag)[-1])
    positions = [index for index, token in enumerate(ids) if token == tag_id and index >= prompt_length]
    head = AutoModelForCausalLM if fmt.head == "lm_pair" else AutoModelForTokenClassification
    with torch.no_grad():
        logits = head.from_pretrained(directory)(torch.tensor([ids])).logits[0, positions].double()
    if fmt.head == "lm_pair":
        plus, minus = tokenizer.convert_tokens_to_ids(["+", "-"])
        return (logits[:, plus].exp() / (logits[:, plus].exp() + logits[:, minus].exp())).tolist()
    return (logits[:, 1].exp() / logits.exp().sum(dim=-1)).tolist()


# ---------------------------------------------------------------- steps, answers, value shaping


def test_step_texts_drop_separators_and_ranges_tile_the_response():
    ranges = split_steps(RESPONSE)
    assert math_prm.step_texts(RESPONSE, ranges, "\n\n") == STEPS
    assert ranges[0][0] == 0 and ranges[-1][1] == len(RESPONSE)
    assert all(left[1] == right[0] for left, right in zip(ranges, ranges[1:], strict=False))
    text = "a;;b;;;;c"
    assert math_prm.step_texts(text, split_steps(text, ";;"), ";;") == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("text", "answer"),
    [
        ("so \\boxed{\\frac{1}{2}}.", "\\frac{1}{2}"),
        ("first \\boxed{3}, then \\boxed{4} done", "4"),
        ("\\boxed{5} and an unclosed \\boxed{6", "5"),
        ("x = 3, so y = -1,250.5 in total.", "-1,250.5"),
        ("no answer here", None),
    ],
)
def test_find_final_answer(text, answer):
    found = math_prm.find_final_answer(text)
    assert (text[found[0] : found[1]] if found else None) == answer


def test_check_answer_correct_incorrect_unparseable():
    def verdict(ground_truth, answer):
        return math_prm.check_answer(ground_truth, answer)[:3]  # (correct, parsed, refused)

    assert verdict("0.5", "\\frac{1}{2}") == (True, True, False)
    assert verdict("\\frac{1}{2}", "\\dfrac12") == (True, True, False)
    assert verdict("1000", "1,000") == (True, True, False)
    assert verdict("5", "4") == (False, True, False)
    assert verdict("5", "\\frac{") == (False, False, False)
    assert verdict("5", None) == (False, False, False)
    assert verdict("5", "1" * (answer_check.MAX_ANSWER_CHARS + 1)) == (False, False, True)
    for answer in ("5", None):
        with pytest.raises(ValueError, match="ground truth .* cannot be checked: math-verify cannot parse it"):
            math_prm.check_answer("\\frac{", answer)


def test_value_maps_and_aggregations():
    assert prm_values.to_values([0.0, 0.25, 1.0], symmetric=True) == [-1.0, -0.5, 1.0]
    assert prm_values.to_values([0.0, 0.25, 1.0], symmetric=False) == [0.0, 0.25, 1.0]
    values = [0.5, -0.2, 0.8, 0.1]
    assert prm_values.aggregate(values, "step", 0.1) == values
    assert prm_values.aggregate(values, "min", 0.1) == [-0.2, -0.2, 0.1, 0.1]
    weights = [math.exp(-v / 0.3) for v in values]
    suffix = [sum(w * v for w, v in zip(weights[k:], values[k:], strict=True)) / sum(weights) for k in range(4)]
    assert prm_values.aggregate(values, "softmin", 0.3) == pytest.approx(suffix)
    assert prm_values.aggregate(values, "softmin", 1e-3)[0] == pytest.approx(min(values), abs=1e-6)
    assert prm_values.aggregate(values, "softmin", 1e6)[0] == pytest.approx(sum(values) / 4, abs=1e-5)
    assert prm_values.aggregate([], "softmin", 0.1) == []
    assert prm_values.mix_outcome([0.5, -0.25], outcome=1.0, weight=0.25) == [0.625, 0.0625]
    assert prm_values.mix_outcome([0.5, -0.2], outcome=-1.0, weight=1.0) == [-1.0, -1.0]
    assert [prm_values.clip_value(v, 0.3) for v in (-2, -0.1, 0.3, 5.0)] == [-0.3, -0.1, 0.3, 0.3]
    assert prm_values.clip_value(7, None) == 7.0 and isinstance(prm_values.clip_value(7, None), float)


# ---------------------------------------------------------------- the three formats, local backend


@pytest.mark.parametrize("prm_format", prm_formats.FORMAT_NAMES)
def test_encode_steps_layout(prm_dirs, prm_format):
    scorer = config(prm_dirs, prm_format).scorer()
    fmt, tokenizer = scorer.fmt, scorer.tokenizer
    ids, positions = prm_formats.encode_steps(tokenizer, fmt, QUESTION, STEPS)
    prompt = fmt.prompt_template.replace("{question}", QUESTION)
    body = fmt.joiner.join(step + fmt.step_tag for step in STEPS)
    assert tokenizer.decode(ids) == prompt + body
    tag_last = tokenizer.encode(fmt.step_tag, add_special_tokens=False)[-1]
    assert len(positions) == len(STEPS) and all(ids[position] == tag_last for position in positions)
    assert positions[-1] == len(ids) - 1
    short_ids, short_positions = prm_formats.encode_steps(tokenizer, fmt, QUESTION, STEPS, max_tokens=positions[1] + 1)
    assert short_positions == positions[:2] and short_ids == ids[: positions[1] + 1]


@pytest.mark.parametrize("prm_format", prm_formats.FORMAT_NAMES)
def test_local_probabilities_match_the_models_logits(prm_dirs, prm_format):
    scorer = config(prm_dirs, prm_format).scorer()
    ids, _ = prm_formats.encode_steps(scorer.tokenizer, scorer.fmt, QUESTION, STEPS)
    prompt_length = len(scorer.tokenizer.encode(scorer.fmt.prompt_template.replace("{question}", QUESTION)))
    expected = reference_probabilities(model_dir(prm_dirs, prm_format), scorer.fmt, ids, prompt_length)
    got = scorer.probabilities(QUESTION, STEPS)
    assert len(got) == len(STEPS) == len(expected)
    assert got == pytest.approx(expected, abs=1e-5)
    assert max(got) - min(got) > 1e-3  # the tiny model tells the steps apart, so positions matter


def test_local_batch_with_padding_equals_single_scoring(prm_dirs):
    scorer = config(prm_dirs, "math_shepherd").scorer()
    items = [prm_formats.encode_steps(scorer.tokenizer, scorer.fmt, QUESTION, STEPS[:count]) for count in (3, 1, 2)]
    batched = scorer.backend.probabilities([ids for ids, _ in items], [positions for _, positions in items])
    for (ids, positions), row in zip(items, batched, strict=True):
        assert row == pytest.approx(scorer.backend.probabilities([ids], [positions])[0], abs=1e-5)


def test_scorer_is_cached_per_settings(prm_dirs):
    assert config(prm_dirs).scorer() is config(prm_dirs, outcome_weight=0.1).scorer()
    assert config(prm_dirs).scorer() is not config(prm_dirs, prm_batch_size=3).scorer()


def test_micro_batcher_gathers_concurrent_calls_and_spreads_errors():
    sizes = []

    def double(items):
        sizes.append(len(items))
        time.sleep(0.05)
        return [2 * item for item in items]

    batcher = micro_batcher.MicroBatcher(double, max_batch=4)
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(batcher, range(16))) == [2 * item for item in range(16)]
    assert max(sizes) > 1 and all(size <= 4 for size in sizes) and sum(sizes) == 16

    def broken(items):
        raise RuntimeError("model crashed")

    failing = micro_batcher.MicroBatcher(broken, max_batch=4)
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(failing, item) for item in range(4)]
        for future in futures:
            with pytest.raises(RuntimeError, match="model crashed"):
                future.result()


# ---------------------------------------------------------------- served backend (vLLM's HTTP API)


@contextlib.contextmanager
def served(prm_dirs, prm_format, **kwargs):
    """A :class:`fake_vllm.FakeVLLM` of the format's tiny model, pooled as vLLM pools it (STEP on the step tag
    for Qwen2.5-Math-PRM, ALL for a token classifier)."""
    from transformers import AutoModelForTokenClassification, AutoTokenizer

    directory = model_dir(prm_dirs, prm_format)
    fmt = prm_formats.FORMATS[prm_format]
    pooling = "STEP" if prm_format == "qwen" else "ALL"
    model = AutoModelForTokenClassification.from_pretrained(directory)
    server = fake_vllm.FakeVLLM(model, AutoTokenizer.from_pretrained(directory), pooling, fmt.step_tag, **kwargs)
    with fake_vllm.running(server) as running:
        yield running


def endpoint_config(prm_dirs, prm_format, url, **extra):
    return math_prm.MathPRMConfig(
        prm_format=prm_format,
        prm_backend="endpoint",
        prm_tokenizer=model_dir(prm_dirs, prm_format),
        prm_endpoint=url,
        **{"prm_timeout_s": 5.0, "prm_retries": 1, "prm_backoff_s": 0.0, **extra},
    )


def posts(server):
    return [(path, body) for method, path, body in server.requests if method == "POST"]


@pytest.mark.parametrize("prm_format", ["qwen", "pure"])
def test_endpoint_matches_local(prm_dirs, prm_format):
    local = config(prm_dirs, prm_format).scorer().probabilities(QUESTION, STEPS)
    with served(prm_dirs, prm_format) as (server, url):
        scorer = endpoint_config(prm_dirs, prm_format, url, prm_endpoint_model="tiny").scorer()
        assert scorer.probabilities(QUESTION, STEPS) == pytest.approx(local, abs=1e-5)
    assert server.requests[0][:2] == ("GET", "/v1/models")  # the start-up check comes first
    [(path, body)] = posts(server)
    assert path == "/pooling" and body["model"] == "tiny" and body["task"] == "token_classify"


def test_a_literal_step_tag_in_the_text_adds_a_row_that_is_skipped(prm_dirs):
    steps = ["Step 1: <extra_0> is only text here.", *STEPS[1:]]
    local = config(prm_dirs).scorer().probabilities(QUESTION + " <extra_0>", steps)
    with served(prm_dirs, "qwen") as (server, url):
        scorer = endpoint_config(prm_dirs, "qwen", url).scorer()
        assert scorer.probabilities(QUESTION + " <extra_0>", steps) == pytest.approx(local, abs=1e-5)


def test_inputs_are_cut_to_the_servers_context_and_a_long_one_sinks_no_batch(prm_dirs):
    from transformers import AutoTokenizer

    long_steps = [f"Step {k}: " + "1/4 + 1/4 = 2/4 " * 12 for k in range(8)]
    tokenizer = AutoTokenizer.from_pretrained(model_dir(prm_dirs, "qwen"))
    ids, _ = prm_formats.encode_steps(tokenizer, prm_formats.FORMATS["qwen"], QUESTION, long_steps, None)
    context = 300  # below the tiny model's 512 positions, so the local backend cuts at the same place
    assert len(ids) > context
    local = config(prm_dirs, prm_max_tokens=context).scorer()
    expected_long = local.probabilities(QUESTION, long_steps)
    expected_short = local.probabilities(QUESTION, STEPS)
    assert 0 < len(expected_long) < len(long_steps)  # the cut drops steps, as the local backend does
    with served(prm_dirs, "qwen", max_model_len=context) as (server, url):
        scorer = endpoint_config(prm_dirs, "qwen", url).scorer()  # no prm_max_tokens: learned from /v1/models
        assert scorer.max_tokens == context
        with ThreadPoolExecutor(2) as pool:
            long, short = pool.map(lambda steps: scorer.probabilities(QUESTION, steps), [long_steps, STEPS])
    assert long == pytest.approx(expected_long, abs=1e-5) and short == pytest.approx(expected_short, abs=1e-5)
    assert all(len(ids) <= context for _, body in posts(server) for ids in body["input"])
    result = math_prm.compute_score(
        "m",
        "\n\n".join(long_steps) + "\n\n\\boxed{1}",
        "1",
        {"question": QUESTION},
        **{**options(prm_dirs, prm_max_tokens=context)},
    )
    assert result["truncated"] == 1.0


def test_a_refused_batch_is_retried_one_input_at_a_time(prm_dirs, monkeypatch):
    backend = prm_endpoint.EndpointPRM(prm_formats.FORMATS["pure"], "http://unused", None, 1.0, 0, 0.0)
    sent = []

    def post(url, body, *args):
        sent.append(len(body["input"]))
        if len(body["input"]) > 1 or body["input"][0] == [9, 9, 9]:
            raise prm_http.PRMRequestRejected(f"PRM endpoint {url} rejected the request: HTTP 400 too long", 400)
        return {"data": [{"index": 0, "data": [[0.2, 0.8]] * len(body["input"][0])}]}

    monkeypatch.setattr(prm_endpoint, "post_json", post)
    assert backend.probabilities([[1, 2], [3, 4, 5]], [[1], [2]]) == [[0.8], [0.8]]
    assert sent == [2, 1, 1]
    with pytest.raises(prm_http.PRMRequestRejected, match="HTTP 400"):
        backend.probabilities([[1, 2], [9, 9, 9]], [[1], [2]])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"prm_endpoint_model": "Qwen/Qwen2.5-Math-PRM-7B"}, r"serves \['tiny'\], not 'Qwen/Qwen2.5-Math-PRM-7B'"),
    ],
)
def test_the_start_up_check_names_the_url_and_the_served_models(prm_dirs, extra, message):
    with served(prm_dirs, "qwen") as (server, url):
        with pytest.raises(prm_http.PRMEndpointError, match=rf"PRM endpoint {url} {message}"):
            endpoint_config(prm_dirs, "qwen", url, **extra).scorer()
        assert posts(server) == []  # nothing scored against the wrong model


@pytest.mark.parametrize(
    ("prm_format", "api", "message"),
    [
        ("qwen", "classify", "token classification on /pooling only; /classify exists only for sequence classifiers"),
        ("pure", "classify", "/classify exists only for sequence classifiers"),
        (
            "math_shepherd",
            "pooling",
            r"vLLM cannot serve the 'math_shepherd' PRM format's \+/- logits.*prm_backend=local",
        ),
    ],
)
def test_routes_vllm_does_not_have_are_refused_at_configuration(prm_format, api, message):
    with pytest.raises(ValueError, match=message):
        math_prm.MathPRMConfig(
            prm_format=prm_format, prm_backend="endpoint", prm_endpoint="http://h:8000", prm_endpoint_api=api
        )


def test_the_fake_answers_like_vllm(prm_dirs):
    with served(prm_dirs, "qwen", max_model_len=8) as (server, url):
        classify = prm_http.PRMRequestRejected
        with pytest.raises(classify, match=r'HTTP 404 \{"detail": "Not Found"\}'):
            prm_http.post_json(f"{url}/classify", {"input": [[1, 2]]}, 5.0, 0, 0.0)
        with pytest.raises(classify, match=r"HTTP 404 .*The model `other` does not exist.*NotFoundError"):
            prm_http.post_json(f"{url}/pooling", {"model": "other", "input": [[1, 2]]}, 5.0, 0, 0.0)
        with pytest.raises(classify, match=r"HTTP 400 .*Unsupported task: 'embed'.*\"param\": \"task\""):
            prm_http.post_json(f"{url}/pooling", {"input": [[1, 2]], "task": "embed"}, 5.0, 0, 0.0)
        with pytest.raises(classify, match=r"HTTP 400 .*maximum context length is 8 tokens.*input_tokens"):
            prm_http.post_json(f"{url}/pooling", {"input": [[1, 2], list(range(9))]}, 5.0, 0, 0.0)
        models = prm_http.get_json(f"{url}/v1/models", 5.0, 0, 0.0)
        assert models["data"][0]["id"] == "tiny" and models["data"][0]["max_model_len"] == 8


def test_endpoint_down_is_retried_then_named():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    backend = prm_endpoint.EndpointPRM(prm_formats.FORMATS["qwen"], f"http://127.0.0.1:{port}", None, 1.0, 2, 0.01)
    started = time.monotonic()
    with pytest.raises(prm_http.PRMEndpointError, match=rf"http://127\.0\.0\.1:{port}/pooling failed 3 times"):
        backend.probabilities([[1, 2, 3]], [[2]])
    assert time.monotonic() - started < 5


def test_slow_endpoint_times_out_within_bounds(prm_dirs):
    with served(prm_dirs, "qwen", delay_s=1.0) as (server, url):
        started = time.monotonic()
        with pytest.raises(prm_http.PRMEndpointError, match=rf"{url}/v1/models failed 2 times .*(timed out|deadline)"):
            endpoint_config(prm_dirs, "qwen", url, prm_timeout_s=0.2, prm_retries=1).scorer()
        assert time.monotonic() - started < 1.5
        assert len(server.requests) == 2


def test_endpoint_5xx_is_retried_bad_rows_are_refused(prm_dirs):
    local = config(prm_dirs).scorer().probabilities(QUESTION, STEPS)
    with served(prm_dirs, "qwen", behaviour="fail_once") as (server, url):
        assert endpoint_config(prm_dirs, "qwen", url).scorer().probabilities(QUESTION, STEPS) == pytest.approx(local)
        assert len(posts(server)) == 2
    with (
        served(prm_dirs, "qwen", behaviour="bad_rows") as (server, url),
        pytest.raises(prm_http.PRMEndpointError, match="not a probability distribution"),
    ):
        endpoint_config(prm_dirs, "qwen", url).scorer().probabilities(QUESTION, STEPS)


# ---------------------------------------------------------------- compute_score


def expected_spans(prm_dirs, prm_format, correct, weight=0.5, symmetric=True, aggregation="step"):
    probabilities = config(prm_dirs, prm_format).scorer().probabilities(QUESTION, STEPS)
    values = prm_values.aggregate([2 * p - 1 if symmetric else p for p in probabilities], aggregation, 0.1)
    outcome = 1.0 if correct else (-1.0 if symmetric else 0.0)
    ranges = split_steps(RESPONSE)
    answer_start = RESPONSE.index("\\boxed{") + len("\\boxed{")
    answer_end = RESPONSE.rindex("}")
    spans = [
        (start, end, (1 - weight) * value + weight * outcome)
        for (start, end), value in zip(ranges, values, strict=True)
    ]
    last_start, last_end, last_value = spans.pop()
    spans += [(last_start, answer_start, last_value), (answer_start, answer_end, outcome)]
    spans += [(answer_end, last_end, last_value)]
    return outcome, spans


@pytest.mark.parametrize("prm_format", prm_formats.FORMAT_NAMES)
@pytest.mark.parametrize(("ground_truth", "correct"), [("0.5", True), ("\\frac{1}{3}", False)])
def test_compute_score_spans_steps_and_answer(prm_dirs, prm_format, ground_truth, correct):
    result = math_prm.compute_score(
        "math", RESPONSE, ground_truth, {"question": QUESTION}, **options(prm_dirs, prm_format)
    )
    outcome, spans = expected_spans(prm_dirs, prm_format, correct)
    assert result["score"] == outcome and result["acc"] == float(correct)
    assert_spans_close(result["spans"], spans)
    parsed = parse_reward_result(result, len(RESPONSE))
    assert parsed.extra["steps"] == parsed.extra["steps_scored"] == 3 and parsed.extra["answer_parsed"] == 1


def test_stability_options(prm_dirs):
    def score(**extra):
        return math_prm.compute_score("math", RESPONSE, "0.5", {"question": QUESTION}, **options(prm_dirs, **extra))

    assert {span[2] for span in score(outcome_weight=1.0)["spans"]} == {1.0}
    _, spans = expected_spans(prm_dirs, "qwen", True, weight=0.0, symmetric=False, aggregation="min")
    result = score(outcome_weight=0.0, symmetric=False, aggregation="min")
    assert [span[2] for span in result["spans"]] == pytest.approx([span[2] for span in spans], abs=1e-6)
    wrong = math_prm.compute_score("m", RESPONSE, "7", None, **options(prm_dirs, symmetric=False))
    assert wrong["score"] == 0.0 and all(0.0 <= span[2] <= 1.0 for span in wrong["spans"])
    clipped = score(clip=0.25)
    assert clipped["score"] == 0.25 and all(abs(span[2]) <= 0.25 for span in clipped["spans"])
    softmin = score(aggregation="softmin", softmin_temperature=1e-4, outcome_weight=0.0)
    step_min = score(aggregation="min", outcome_weight=0.0)
    assert softmin["spans"][0][2] == pytest.approx(step_min["spans"][0][2], abs=1e-4)


def test_question_reaches_the_prm(prm_dirs):
    with_question = math_prm.compute_score("m", RESPONSE, "0.5", {"question": QUESTION}, **options(prm_dirs))
    other_key = math_prm.compute_score(
        "m", RESPONSE, "0.5", {"problem": QUESTION}, **options(prm_dirs, question_key="problem")
    )
    without = math_prm.compute_score("m", RESPONSE, "0.5", {}, **options(prm_dirs))
    assert with_question["spans"] == other_key["spans"] and with_question["spans"] != without["spans"]


def test_concurrent_calls_are_scored_in_one_batch_and_equal_sequential_calls(prm_dirs, monkeypatch):
    responses = [RESPONSE, "x = 2\n\nso \\boxed{2}", "1 + 1 = 3", RESPONSE.replace("1/2", "1/3"), "no\n\nidea"] * 2
    sequential = [math_prm.compute_score("m", text, "0.5", None, **options(prm_dirs)) for text in responses]
    scorer = config(prm_dirs).scorer()
    threads, batches, score = 5, [], scorer.backend.probabilities

    def first_batch_waits_for_the_other_threads(ids, positions):
        """The first batch runs once every other thread's call is queued behind it: the calls overlap."""
        deadline = time.monotonic() + 60
        while not batches and len(scorer._batcher._waiting) < threads - 1:
            assert time.monotonic() < deadline, "the other calls never reached the PRM while one was scoring"
            time.sleep(0.001)
        batches.append(len(ids))
        return score(ids, positions)

    monkeypatch.setattr(scorer.backend, "probabilities", first_batch_waits_for_the_other_threads)
    with ThreadPoolExecutor(threads) as pool:
        concurrent = list(
            pool.map(lambda t: math_prm.compute_score("m", t, "0.5", None, **options(prm_dirs)), responses)
        )
    # the calls that waited go in one batch (with the first thread's next call, if it queued before that batch ran)
    assert batches[0] == 1 and threads - 1 <= batches[1] <= threads and sum(batches) == len(responses)
    for one, other in zip(sequential, concurrent, strict=True):
        assert one["score"] == other["score"]
        assert_spans_close(one["spans"], other["spans"])


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("text", ["", "   \n\n \t "])
def test_empty_and_whitespace_responses(prm_dirs, text):
    result = math_prm.compute_score("m", text, "0.5", None, **options(prm_dirs))
    assert result["score"] == -1.0 and result["empty_response"] == 1.0 and result["steps_scored"] == 0
    assert result["spans"] == ([(0, len(text), -1.0)] if text else [])
    parse_reward_result(result, len(text))
    keys = set(math_prm.compute_score("m", RESPONSE, "0.5", None, **options(prm_dirs)))
    assert set(result) == keys  # verl gathers the extra keys per batch: every result has the same ones


def test_gigantic_response_is_capped_and_says_so(prm_dirs):
    text = "So \\boxed{2}.\n\n" + "Step: 1 + 1 = 2.\n\n" * 5000 + "So \\boxed{3}"
    result = math_prm.compute_score("m", text, "2", None, **options(prm_dirs, max_response_chars=300))
    assert result["truncated"] == 1.0 and result["acc"] == 1.0 and result["score"] == 1.0
    assert result["steps"] == result["steps_scored"] == len(split_steps(text[:300]))
    assert result["spans"][-1][1] == 300 and (10, 11, 1.0) in result["spans"]  # the answer in the prefix
    parse_reward_result(result, len(text))
    unseen = math_prm.compute_score("m", text[15:], "3", None, **options(prm_dirs, max_response_chars=300))
    assert unseen["acc"] == 0.0 and unseen["score"] == -1.0  # the boxed 3 past the prefix is not read
    assert max(end for _, end, _ in unseen["spans"]) <= 300
    scorer = config(prm_dirs).scorer()
    _, positions = prm_formats.encode_steps(scorer.tokenizer, scorer.fmt, "", STEPS)
    cap = options(prm_dirs, prm_max_tokens=positions[1] + 1)
    by_tokens = math_prm.compute_score("m", RESPONSE, "0.5", None, **cap)
    assert by_tokens["truncated"] == 1.0 and by_tokens["steps_scored"] == 2 and by_tokens["steps"] == 3
    answer = (RESPONSE.index("\\boxed{") + len("\\boxed{"), RESPONSE.rindex("}"), 1.0)
    assert by_tokens["spans"][-1] == answer  # of the unscored step 3 only the answer has a span
    assert by_tokens["spans"][-2][1] == split_steps(RESPONSE)[1][1]


def test_missing_ground_truth(prm_dirs):
    for missing in (None, "", "  "):
        with pytest.raises(ValueError, match="ground_truth is missing"):
            math_prm.compute_score("m", RESPONSE, missing, None, **options(prm_dirs))
    with pytest.raises(ValueError, match=r"data_source 'aime'\)"):  # as written, not np.str_('aime')
        math_prm.compute_score(np.str_("aime"), RESPONSE, None, None, **options(prm_dirs))
    result = math_prm.compute_score(
        "m", RESPONSE, None, {"question": QUESTION}, **options(prm_dirs, missing_ground_truth="process_only")
    )
    _, spans = expected_spans(prm_dirs, "qwen", True, weight=0.0)
    step_values = [value for (_, _, value) in spans[:2]]
    assert [span[2] for span in result["spans"][:2]] == pytest.approx(step_values, abs=1e-6)
    assert result["score"] == pytest.approx(min(span[2] for span in result["spans"])) and result["acc"] == 0


def test_bad_argument_types():
    with pytest.raises(ValueError, match="solution_str must be a string"):
        math_prm.compute_score("m", None, "1")
    with pytest.raises(ValueError, match="ground_truth must be a string or a number"):
        math_prm.compute_score("m", "1", ["1"])


# ---------------------------------------------------------------- verl's own loader


@pytest.mark.slow
def test_loads_and_runs_through_verls_custom_reward_loader(prm_dirs, tmp_path):
    """A fresh interpreter outside the repository, as a verl reward worker: verl's get_custom_reward_fn
    loads the file by path and merges reward_kwargs into the call."""
    script = f"""
import json
from omegaconf import OmegaConf
from verl.trainer.ppo.reward import get_custom_reward_fn
config = OmegaConf.create({{"reward": {{"custom_reward_function": {{
    "path": {MATH_PRM_PATH!r}, "name": "compute_score",
    "reward_kwargs": {{"prm_model": {prm_dirs["classifier"]!r}, "prm_format": "pure", "outcome_weight": 0.25}}}}}}}})
fn = get_custom_reward_fn(config)
print(json.dumps(fn(data_source="math", solution_str={RESPONSE!r}, ground_truth="1/2", extra_info={{}})))
"""
    run = subprocess.run(
        [sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    expected = math_prm.compute_score("math", RESPONSE, "1/2", {}, **options(prm_dirs, "pure", outcome_weight=0.25))
    assert result["score"] == 1.0 and result["acc"] == 1.0
    assert_spans_close([tuple(span) for span in result["spans"]], expected["spans"])
