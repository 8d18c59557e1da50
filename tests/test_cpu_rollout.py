"""The ``hf_cpu`` rollout: batched decoding equals one-at-a-time decoding, log-probs equal the model's own
forward pass, verl's max-token rules, stops, sampling filters, batching of concurrent requests against a
reference schedule (rows leave as they finish, padding is cut), failures, weight sync, the Ray glue."""

import asyncio
from dataclasses import asdict
from types import SimpleNamespace

import pytest
import torch
from conftest import verl_config
from cpu_assets import save_tiny_model, tiny_qwen2, tiny_tokenizer
from transformers import Qwen2Config, Qwen2ForCausalLM
from verl.workers.rollout.replica import RolloutReplica

from bot_grpo_verl.cpu.batching import RequestBatcher
from bot_grpo_verl.cpu.decoding import (
    DecodeStats,
    Request,
    decode,
    filter_top_k_top_p,
    generate_batch,
    keep_rows,
    prefill,
)
from bot_grpo_verl.cpu.rollout import MAX_CONCURRENT_REQUESTS, HFRolloutReplica, HFRolloutServer, HFServerAdapter
from bot_grpo_verl.cpu.sampling_params import SamplingParams, parse_sampling_params, resolve_max_tokens


@pytest.fixture(scope="module")
def tokenizer():
    return tiny_tokenizer()


@pytest.fixture(scope="module")
def model(tokenizer):
    return tiny_qwen2(tokenizer, seed=1)


@pytest.fixture(scope="module")
def prompts(tokenizer):
    texts = ["add 1 and 2", "write a short answer with steps one two three", "ten", "add the numbers four five six"]
    chats = [[{"role": "user", "content": text}] for text in texts]
    return [tokenizer.apply_chat_template(chat, add_generation_prompt=True)["input_ids"] for chat in chats]


def generate(model, tokenizer, prompts, params, generator=None):
    return generate_batch(model, prompts, params, [tokenizer.eos_token_id], tokenizer.pad_token_id, generator)


def forward_log_probs(model, prompt, completion, temperature):
    """log_softmax(logits / T) of each completion token, from one forward pass over prompt + completion."""
    ids = torch.tensor([list(prompt) + completion])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1 : -1].float()
    scaled = logits / (temperature if temperature > 0 else 1.0)
    return torch.log_softmax(scaled, dim=-1).gather(1, torch.tensor(completion)[:, None]).squeeze(1)


def test_prompts_have_different_lengths(prompts):
    assert len({len(p) for p in prompts}) == len(prompts)  # so left padding is exercised


def test_batched_greedy_decoding_equals_one_prompt_at_a_time(model, tokenizer, prompts):
    params = [SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True) for n in (5, 12, 1, 9)]
    batched = generate(model, tokenizer, prompts, params)
    for prompt, param, completion in zip(prompts, params, batched, strict=True):
        alone = generate(model, tokenizer, [prompt], [param])[0]
        assert completion.token_ids == alone.token_ids
        assert len(completion.token_ids) == param.max_tokens and completion.finish_reason == "length"
        torch.testing.assert_close(torch.tensor(completion.log_probs), torch.tensor(alone.log_probs), atol=1e-5, rtol=0)


@pytest.mark.parametrize("temperature", [0.0, 0.7, 1.3])
def test_log_probs_equal_the_models_forward_pass(model, tokenizer, prompts, temperature):
    params = [SamplingParams(max_tokens=16, temperature=temperature, ignore_eos=True)] * len(prompts)
    completions = generate(model, tokenizer, prompts, params, torch.Generator().manual_seed(3))
    for prompt, completion in zip(prompts, completions, strict=True):
        expected = forward_log_probs(model, prompt, completion.token_ids, temperature)
        torch.testing.assert_close(torch.tensor(completion.log_probs), expected, atol=1e-4, rtol=0)


def test_a_stop_token_ends_the_completion_and_is_kept(model, tokenizer, prompts):
    free_run = generate(model, tokenizer, prompts[:1], [SamplingParams(max_tokens=8, temperature=0, ignore_eos=True)])
    stop = free_run[0].token_ids[3]
    first = free_run[0].token_ids.index(stop)
    params = SamplingParams(max_tokens=8, temperature=0, ignore_eos=True, stop_token_ids=(stop,))
    stopped = generate(model, tokenizer, prompts[:1], [params])[0]
    assert stopped.token_ids == free_run[0].token_ids[: first + 1] and stopped.finish_reason == "stop"


def test_eos_stops_unless_ignored(tokenizer, prompts):
    model = tiny_qwen2(tokenizer, seed=1)
    with torch.no_grad():  # make EOS the most likely token everywhere
        model.lm_head.weight[tokenizer.eos_token_id] += 50 * model.model.norm.weight.sign()
    stopped, ignored = generate(
        model,
        tokenizer,
        prompts[:2],
        [SamplingParams(max_tokens=6, temperature=0), SamplingParams(max_tokens=6, temperature=0, ignore_eos=True)],
    )
    assert stopped.token_ids == [tokenizer.eos_token_id] and stopped.finish_reason == "stop"
    assert ignored.token_ids == [tokenizer.eos_token_id] * 6 and ignored.finish_reason == "length"


def test_top_k_one_and_a_tiny_top_p_are_greedy(model, tokenizer, prompts):
    greedy = generate(model, tokenizer, prompts, [SamplingParams(max_tokens=10, temperature=0, ignore_eos=True)] * 4)
    for params in (
        SamplingParams(max_tokens=10, top_k=1, ignore_eos=True),
        SamplingParams(max_tokens=10, top_p=1e-6, ignore_eos=True),
    ):
        sampled = generate(model, tokenizer, prompts, [params] * 4, torch.Generator().manual_seed(0))
        assert [c.token_ids for c in sampled] == [c.token_ids for c in greedy]


def test_top_k_top_p_filter_matches_a_row_by_row_reference():
    logits = torch.randn(5, 11, generator=torch.Generator().manual_seed(0))
    top_k = torch.tensor([0, 3, 1, 11, 4])
    top_p = torch.tensor([0.5, 1.0, 0.9, 0.3, 0.8])
    filtered = filter_top_k_top_p(logits, top_k, top_p)
    for row in range(5):
        order = logits[row].argsort(descending=True).tolist()
        kept = order[: top_k[row]] if top_k[row] > 0 else order
        probs = torch.softmax(logits[row, kept], dim=0).tolist()
        nucleus, mass = [], 0.0
        for token, prob in zip(kept, probs, strict=True):
            nucleus.append(token)
            mass += prob
            if mass >= top_p[row]:
                break
        assert sorted(torch.isfinite(filtered[row]).nonzero().flatten().tolist()) == sorted(nucleus)


@pytest.mark.parametrize(
    ("prompt_len", "sampling", "expected"),
    [
        (10, {}, 32),  # response_length
        (40, {}, 24),  # prompt_length + response_length - prompt_len
        (10, {"max_tokens": 5}, 5),
        (10, {"max_new_tokens": 7}, 7),
        (10, {"max_tokens": 500}, 118),  # clamped to the room left in max_model_len
        (10, {"max_tokens": 0}, 1),
    ],
)
def test_max_tokens_follow_verls_vllm_server_rules(prompt_len, sampling, expected):
    assert resolve_max_tokens(prompt_len, sampling, max_model_len=128, prompt_length=32, response_length=32) == expected


def test_a_prompt_without_room_is_an_error():
    with pytest.raises(ValueError, match="no room to generate"):
        resolve_max_tokens(128, {}, max_model_len=128, prompt_length=32, response_length=32)


def test_unsupported_sampling_params_are_errors():
    with pytest.raises(ValueError, match="unsupported sampling params.*'seed'"):
        parse_sampling_params({"seed": 1}, 4, ignore_eos=False)
    with pytest.raises(ValueError, match="repetition_penalty"):
        parse_sampling_params({"repetition_penalty": 1.1}, 4, ignore_eos=False)
    params = parse_sampling_params({"temperature": 0.5, "top_k": -1, "logprobs": True}, 4, ignore_eos=True)
    assert (params.temperature, params.logprobs, params.ignore_eos, params.max_tokens) == (0.5, True, True, 4)


def assert_same_completion(completion, expected):
    assert (completion.token_ids, completion.finish_reason) == (expected.token_ids, expected.finish_reason)
    torch.testing.assert_close(torch.tensor(completion.log_probs), torch.tensor(expected.log_probs), atol=1e-5, rtol=0)


def greedy(max_tokens):
    return SamplingParams(max_tokens=max_tokens, temperature=0, ignore_eos=True)


def reference_schedule(arrivals, lengths, max_rows):
    """The batching schedule by hand: when no row is in flight, the requests that have arrived (request i
    at step ``arrivals[i]``), at most ``max_rows`` in order, start a batch; request i leaves after
    ``lengths[i]`` tokens. Returns ``(stats as a dict, the step at which each request finishes)``."""
    remaining, waiting, flight, finish = list(lengths), list(range(len(lengths))), [], {}
    stats = {"batches": 0, "steps": 0, "row_steps": 0, "peak_rows": 0}
    while waiting or flight:
        if not flight:
            flight = [i for i in waiting if arrivals[i] <= stats["steps"]][:max_rows]
            waiting = [i for i in waiting if i not in flight]
            stats["batches"] += 1
        stats["steps"] += 1
        stats["row_steps"] += len(flight)
        stats["peak_rows"] = max(stats["peak_rows"], len(flight))
        for i in flight:
            remaining[i] -= 1
            if remaining[i] == 0:
                finish[i] = stats["steps"]
        flight = [i for i in flight if remaining[i]]
    return stats, [finish[i] for i in range(len(lengths))]


@pytest.mark.parametrize(
    ("arrivals", "lengths", "max_rows"),
    [
        ([0, 0, 0, 0], [5, 12, 1, 9], 4),  # one batch
        ([0, 0, 0, 0, 0, 0], [4, 2, 7, 3, 5, 1], 2),  # more requests than rows: batches of 2
        ([0, 1, 1, 3], [3, 2, 6, 5], 4),  # arrivals during a batch start the next; the longest prompt leaves
        # first, so its left padding is cut from the cache
    ],
)
def test_batches_follow_a_reference_schedule_and_decode_as_alone(
    model, tokenizer, prompts, arrivals, lengths, max_rows
):
    requests = [Request(prompts[i % len(prompts)], greedy(length), i) for i, length in enumerate(lengths)]
    stats, taken, delivered = DecodeStats(), set(), {}

    def admit(rows):
        ready = [r for r in requests if arrivals[r.owner] <= stats.steps and r.owner not in taken][:rows]
        taken.update(r.owner for r in ready)
        return ready

    decode(
        model,
        admit,
        lambda owner, completion: delivered.setdefault(owner, (stats.steps, completion)),
        eos_token_ids=[tokenizer.eos_token_id],
        pad_token_id=tokenizer.pad_token_id,
        max_rows=max_rows,
        stats=stats,
    )
    expected_stats, finish = reference_schedule(arrivals, lengths, max_rows)
    assert asdict(stats) == expected_stats
    assert [delivered[i][0] for i in range(len(requests))] == finish  # each handed back when it finishes
    for request in requests:
        alone = generate(model, tokenizer, [request.prompt_ids], [request.params])[0]
        assert_same_completion(delivered[request.owner][1], alone)


def test_dropping_rows_cuts_the_padding_no_row_needs(model, tokenizer, prompts):
    long, short = max(prompts, key=len), min(prompts, key=len)
    batch, _ = prefill(model, [Request(long, greedy(4)), Request(short, greedy(4))], [tokenizer.eos_token_id], 0)
    assert batch.attention_mask.shape == (2, len(long))
    kept = keep_rows(batch, torch.tensor([1]))
    assert kept.attention_mask.tolist() == [[1] * len(short)]
    assert all(layer.keys.shape[2] == len(short) for layer in kept.cache.layers)
    assert kept.owners == [None] and int(kept.next_positions[0]) == len(short)


def test_a_sliding_window_model_decodes_in_batches_as_alone(tokenizer, prompts):
    """Sliding-window layers keep their own window of positions: rows leave, the padding stays."""
    windowed = {"use_sliding_window": True, "sliding_window": 3, "max_window_layers": 0, "layer_types": None}
    config = Qwen2Config(**{**tiny_qwen2(tokenizer).config.to_dict(), **windowed})
    assert set(config.layer_types) == {"sliding_attention"}
    torch.manual_seed(4)
    model = Qwen2ForCausalLM(config).eval()
    params = [greedy(n) for n in (2, 7, 4, 9)]
    batched = generate(model, tokenizer, prompts, params)
    for prompt, param, completion in zip(prompts, params, batched, strict=True):
        assert_same_completion(completion, generate(model, tokenizer, [prompt], [param])[0])


def test_concurrent_requests_are_decoded_in_one_batch_and_each_returns_when_its_row_finishes(model, tokenizer, prompts):
    batcher = RequestBatcher(model, [tokenizer.eos_token_id], tokenizer.pad_token_id)
    params = [greedy(n) for n in (3, 6, 9, 2)] * 2
    finished = []

    async def request(prompt, param):
        completion = await batcher.generate(prompt, param)
        finished.append(param.max_tokens)
        return completion

    async def run():
        return await asyncio.gather(*(request(p, q) for p, q in zip(prompts * 2, params, strict=True)))

    completions = asyncio.run(run())
    assert asdict(batcher.stats) == {"batches": 1, "steps": 9, "row_steps": 2 * (3 + 6 + 9 + 2), "peak_rows": 8}
    assert finished == sorted(finished)  # each caller gets its completion when its row finishes
    for prompt, param, completion in zip(prompts * 2, params, completions, strict=True):
        assert_same_completion(completion, generate(model, tokenizer, [prompt], [param])[0])


def test_a_failed_loop_fails_the_requests_in_flight_and_the_next_loop_serves(tokenizer, prompts, monkeypatch):
    model = tiny_qwen2(tokenizer, seed=1)
    batcher = RequestBatcher(model, [tokenizer.eos_token_id], tokenizer.pad_token_id)
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda *args, **kwargs: (_ for _ in ()).throw(RuntimeError("broken")))

    async def run(count):
        return await asyncio.gather(*(batcher.generate(p, greedy(3)) for p in prompts[:count]), return_exceptions=True)

    assert [str(e) for e in asyncio.run(run(3))] == ["broken"] * 3
    monkeypatch.setattr(model, "forward", forward)
    (completion,) = asyncio.run(run(1))
    assert_same_completion(completion, generate(model, tokenizer, prompts[:1], [greedy(3)])[0])


def test_an_empty_prompt_is_refused_before_it_joins_a_batch(model, tokenizer):
    batcher = RequestBatcher(model, [tokenizer.eos_token_id], tokenizer.pad_token_id)
    with pytest.raises(ValueError, match="empty prompt"):
        asyncio.run(batcher.generate([], greedy(3)))


def test_load_weights_copies_the_actor_and_rejects_unknown_names(tokenizer, prompts):
    actor, rollout = tiny_qwen2(tokenizer, seed=2), tiny_qwen2(tokenizer, seed=3)
    batcher = RequestBatcher(rollout, [tokenizer.eos_token_id], tokenizer.pad_token_id)
    loaded = asyncio.run(batcher.load_weights(actor.state_dict().items()))
    assert loaded == len(actor.state_dict())
    params = [SamplingParams(max_tokens=6, temperature=0, ignore_eos=True)]
    assert generate(rollout, tokenizer, prompts[:1], params) == generate(actor, tokenizer, prompts[:1], params)
    with pytest.raises(KeyError, match="no weight named 'value_head.weight'"):
        asyncio.run(batcher.load_weights([("value_head.weight", torch.zeros(1))]))


class FakeServer:
    """Records what the adapter sends, with the ``.method.remote(...)`` call shape of a Ray actor handle."""

    def __init__(self):
        self.buckets, self.steps = [], []

        class Method:
            def __init__(self, sink):
                self.sink = sink

            def remote(self, value):
                self.sink.append(value)
                return asyncio.sleep(0)

        self.update_weights, self.set_global_steps = Method(self.buckets), Method(self.steps)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("model"), seed=1)


def cpu_config(*overrides):
    return verl_config("+preset=cpu", *overrides).actor_rollout_ref


@pytest.mark.parametrize(("rank", "sends"), [(0, True), (1, False), (2, True)])
def test_the_adapter_sends_buckets_from_each_replica_leader_only(monkeypatch, model_path, rank, sends):
    monkeypatch.setenv("RANK", str(rank))
    config = cpu_config(
        f"actor_rollout_ref.model.path={model_path}",
        "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
        "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=1",
    )
    adapter = HFServerAdapter(config=config.rollout, model_config=config.model, device_mesh=None)
    assert (adapter.replica_rank, adapter.rollout_rank) == (rank // 2, rank % 2)
    adapter._server = FakeServer()
    consumed = []

    def weights():
        for i in range(3):
            consumed.append(i)
            yield f"w{i}", torch.full((300_000,), float(i))  # 1.2 MB each: one tensor per 1 MiB bucket

    asyncio.run(adapter.update_weights(weights(), global_steps=7))
    assert consumed == [0, 1, 2]  # every rank walks the generator (FSDP gathers collectively)
    sent = adapter._server.buckets
    assert [[name for name, _ in bucket] for bucket in sent] == ([["w0"], ["w1"], ["w2"]] if sends else [])
    assert adapter._server.steps == ([7] if sends else [])
    if sends:
        assert all(float(tensor[0]) == i for i, ((_, tensor),) in enumerate(sent))


def test_the_server_answers_verls_generate_call(model_path, prompts):
    config = cpu_config(f"actor_rollout_ref.model.path={model_path}", "data.max_response_length=8")
    server = HFRolloutServer(config.rollout, config.model, replica_rank=0)
    request = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}

    async def run():
        await server.set_global_steps(3)
        return await asyncio.gather(
            *(server.generate(p, dict(request), request_id=str(i)) for i, p in enumerate(prompts))
        )

    outputs = asyncio.run(run())
    assert server.decode_stats()["batches"] == 1 and server.decode_stats()["peak_rows"] == len(prompts)
    for prompt, output in zip(prompts, outputs, strict=True):
        assert 1 <= len(output.token_ids) <= 8 and output.stop_reason == "completed"
        assert output.extra_fields["global_steps"] == 3
        expected = forward_log_probs(server.batcher.model, prompt, output.token_ids, 1.0)
        torch.testing.assert_close(torch.tensor(output.log_probs), expected, atol=1e-4, rtol=0)


def test_the_replica_lets_every_request_reach_the_server_queue():
    """verl caps a server actor at max(1000, max_num_seqs + 16) concurrent calls; the requests beyond it would
    wait in Ray and come back as small late batches, so the replica lifts the cap (the server queues them)."""
    replica = object.__new__(HFRolloutReplica)
    replica.config = SimpleNamespace(max_num_seqs=256)
    assert replica.max_concurrency == MAX_CONCURRENT_REQUESTS > RolloutReplica.max_concurrency.fget(replica)
    assert MAX_CONCURRENT_REQUESTS >= 1 << 20  # a million samples per validation
