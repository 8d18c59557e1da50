"""Token rewards through verl's real V1 reward path: reward manager, agent-loop output, colocated
assembly, and the estimator at the end of the chain."""

import asyncio
import logging
import pickle
import re
import textwrap
from dataclasses import fields
from pathlib import Path

import cloudpickle
import numpy as np
import pytest
import torch
from conftest import verl_config
from reference import reference_bot_grpo, reference_token_values
from tensordict import TensorDict
from tokenizer_fixtures import counting_decodes
from verl import DataProto
from verl.experimental.agent_loop.agent_loop import AgentLoopMetrics, AgentLoopOutput
from verl.experimental.reward_loop.reward_loop import RewardLoopWorker
from verl.trainer.ppo.ray_trainer import compute_advantage
from verl.trainer.ppo.reward import load_reward_manager

from benchmarks.local_tokenizers import byte_level_bpe
from bot_grpo_verl.reward.manager import (
    REWARD_CONFIG_ERROR_KEY,
    REWARD_ERROR_KEY,
    BoTTokenRewardManager,
    TokenRewardConfig,
    TokenRewardScore,
    failed_sample,
)
from bot_grpo_verl.rewards.react_requirements import SPEC_KEY
from bot_grpo_verl.verl_compat import reward_extra_metrics

REWARD_FUNCTIONS = textwrap.dedent(
    """
    import asyncio

    def first_line_spans(solution_str):
        end = solution_str.find("\\n")
        end = len(solution_str) if end < 0 else end + 1
        return [(0, end, -1.0), (end, len(solution_str), 0.5)] if end < len(solution_str) else [(0, end, -1.0)]

    def spans(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        score = float(ground_truth in solution_str)
        return {"score": score, "spans": first_line_spans(solution_str), "chars": len(solution_str)}

    async def async_spans(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        await asyncio.sleep(0)
        return spans(data_source, solution_str, ground_truth, extra_info)

    def outcome(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        return 0.25

    def token_rewards(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        return {"score": 1.0, "token_rewards": [1.0]}

    def nan_span(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        return {"score": 1.0, "spans": [(0, 1, float("nan"))]}

    def reversed_span(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        return {"score": 1.0, "spans": [(3, 1, 1.0)]}

    def crashes(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        raise RuntimeError("compiler crashed")

    def numpy_scalars(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        import numpy as np

        return {"score": np.float32(0.5), "spans": [(np.int64(0), np.int64(len(solution_str)), np.float64(-1))]}

    def reserved_key(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        return {"score": 1.0, "span_coverage": 0.5}

    def string_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        return {"score": "0.5"}

    def looks_up(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        table = {}
        return {"score": table["my_lookup_table"]}

    def refuses_its_options(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
        from bot_grpo_verl.rewards.tool_arithmetic import ToolArithmeticConfig

        return float(ToolArithmeticConfig.from_kwargs({"scor": "answer"}).score == "answer")
    """
)

RESPONSES = [
    "const a = 1;\nexport default a;",
    "🚀 naïve line\nreturn <div>ok</div>;",
    "one line only",
    "x\n\nThe answer is 42",
]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("tokenizer")
    byte_level_bpe().save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def functions_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("reward") / "functions.py"
    path.write_text(REWARD_FUNCTIONS)
    return path


def reward_config(tokenizer_dir, functions_file, function="spans", *overrides):
    """verl's config with the bot_grpo preset, the tokenizer and the reward function ``function`` of the file."""
    return verl_config(
        "+preset=bot_grpo",
        f"actor_rollout_ref.model.path={tokenizer_dir}",
        f"reward.custom_reward_function.path={functions_file}",
        f"reward.custom_reward_function.name={function}",
        *overrides,
    )


def agent_loop_sample(tokenizer, response: str, uid="p0", ground_truth="42") -> DataProto:
    """One sample exactly as verl's agent loop ``_compute_score`` sends it to a reward loop worker."""
    prompt = torch.tensor(tokenizer.encode("Write code:", add_special_tokens=False))
    responses = torch.tensor(tokenizer.encode(response, add_special_tokens=False) + [tokenizer.eos_token_id])
    input_ids = torch.cat([prompt, responses])
    batch = TensorDict(
        {
            "prompts": prompt[None],
            "responses": responses[None],
            "attention_mask": torch.ones_like(input_ids)[None],
            "input_ids": input_ids[None],
            "position_ids": torch.arange(len(input_ids))[None],
        },
        batch_size=1,
    )
    non_tensor = {
        "data_source": np.array(["react_tsx"]),
        "reward_model": np.array([{"ground_truth": ground_truth, "style": "rule"}]),
        "extra_info": np.array([{"index": 0}]),
        "uid": np.array([uid]),
        "__num_turns__": np.array([2]),
        "tool_extra_fields": np.array([{}], dtype=object),
    }
    return DataProto(batch=batch, non_tensor_batch=non_tensor)


def run_in_worker_loop(make, call):
    """verl builds managers inside a Ray actor's event loop; build and call them in one loop here too."""

    async def main():
        return await call(make())

    return asyncio.run(main())


def expected_token_rewards(tokenizer, response, score, spans):
    ids = tokenizer.encode(response, add_special_tokens=False) + [tokenizer.eos_token_id]
    return reference_token_values(tokenizer, ids, spans, default=score)


def spans_of(text):
    end = text.find("\n")
    end = len(text) if end < 0 else end + 1
    return [(0, end, -1.0), (end, len(text), 0.5)] if end < len(text) else [(0, end, -1.0)]


@pytest.mark.parametrize("function", ["spans", "async_spans"])
def test_run_single_returns_dense_rewards_and_scalar_logs(tokenizer_dir, functions_file, function):
    config = reward_config(tokenizer_dir, functions_file, function)
    tokenizer = byte_level_bpe()
    response = RESPONSES[1]
    result = run_in_worker_loop(
        lambda: load_reward_manager(config, tokenizer),
        lambda manager: manager.run_single(agent_loop_sample(tokenizer, response)),
    )
    score = result["reward_score"]
    assert isinstance(score, TokenRewardScore) and float(score) == 0.0
    np.testing.assert_allclose(
        score.token_rewards, expected_token_rewards(tokenizer, response, 0.0, spans_of(response))
    )
    info = result["reward_extra_info"]
    assert info["chars"] == len(response) and info["score"] == 0.0
    assert info["span_coverage"] == pytest.approx(1 - 1 / len(score.token_rewards))  # all but EOS
    assert info["token_reward_mean"] == pytest.approx(np.mean(score.token_rewards))
    assert all(np.isscalar(value) for value in info.values())  # verl stacks them into arrays


def test_a_float_returning_function_gives_the_outcome_on_every_token(tokenizer_dir, functions_file):
    config = reward_config(tokenizer_dir, functions_file, "outcome")
    tokenizer = byte_level_bpe()
    result = run_in_worker_loop(
        lambda: load_reward_manager(config, tokenizer),
        lambda manager: manager.run_single(agent_loop_sample(tokenizer, RESPONSES[0])),
    )
    assert set(result["reward_score"].token_rewards) == {0.25}
    assert result["reward_extra_info"]["span_coverage"] == 0.0


def test_clip_range_and_outcome_weight_options(tokenizer_dir, functions_file):
    config = reward_config(
        tokenizer_dir,
        functions_file,
        "spans",
        "reward.bot_token.clip_range=[-0.5,0.4]",
        "reward.bot_token.outcome_weight=0.5",
    )
    tokenizer = byte_level_bpe()
    response = RESPONSES[3]
    result = run_in_worker_loop(
        lambda: load_reward_manager(config, tokenizer),
        lambda manager: manager.run_single(agent_loop_sample(tokenizer, response)),
    )
    raw = np.array(expected_token_rewards(tokenizer, response, 1.0, spans_of(response)))
    np.testing.assert_allclose(result["reward_score"].token_rewards, np.clip(0.5 * raw + 0.5 * 1.0, -0.5, 0.4))


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("token_rewards", r"'token_rewards' has 1 values for \d+ response tokens"),
        ("nan_span", "span 0 value is not finite"),
        ("reversed_span", "out of range or reversed"),
        ("crashes", "RuntimeError: compiler crashed"),
        ("reserved_key", r"keys \['span_coverage'\] are reserved"),
        ("string_score", "score must be a number .*got str '0.5'"),
    ],
)
def test_bad_results_name_the_sample(tokenizer_dir, functions_file, function, message):
    """The manager does not raise in the reward worker (verl would drop the sample's group and carry on): it
    reports the sample, NaN in place of its rewards, for the driver to stop the run or leave it out."""
    config = reward_config(tokenizer_dir, functions_file, function)
    tokenizer = byte_level_bpe()
    sample = agent_loop_sample(tokenizer, RESPONSES[0], uid="p7")
    result = run_in_worker_loop(lambda: load_reward_manager(config, tokenizer), lambda m: m.run_single(sample))
    named = rf"bot_token reward failed for sample uid=p7 data_source='react_tsx': .*{message}"
    assert re.match(named, result["reward_extra_info"][REWARD_ERROR_KEY])
    score = result["reward_score"]
    assert score.error == result["reward_extra_info"][REWARD_ERROR_KEY] and np.isnan(score)
    assert len(score.token_rewards) == sample.batch["responses"].shape[-1] and np.isnan(score.token_rewards).all()


def test_an_exception_of_the_reward_names_its_file_and_line_and_is_logged_once_with_its_traceback(
    tokenizer_dir, functions_file, caplog
):
    config = reward_config(tokenizer_dir, functions_file, "looks_up")
    tokenizer = byte_level_bpe()
    line = REWARD_FUNCTIONS.splitlines().index('    return {"score": table["my_lookup_table"]}') + 1
    with caplog.at_level(logging.ERROR, logger="bot_grpo_verl.reward.manager"):
        messages = [
            run_in_worker_loop(
                lambda: load_reward_manager(config, tokenizer),
                lambda m, uid=uid: m.run_single(agent_loop_sample(tokenizer, RESPONSES[0], uid=uid)),
            )["reward_extra_info"][REWARD_ERROR_KEY]
            for uid in ("p1", "p2")
        ]
    where = f'(raised at {functions_file}:{line} in looks_up: return {{"score": table["my_lookup_table"]}})'
    assert (
        messages[0]
        == f"bot_token reward failed for sample uid=p1 data_source='react_tsx': KeyError: 'my_lookup_table' {where}"
    )
    logged = [record.getMessage() for record in caplog.records if "my_lookup_table" in record.getMessage()]
    assert len(logged) == 1 and f'File "{functions_file}", line {line}, in looks_up' in logged[0]  # once per place


def test_a_reward_that_refuses_its_options_is_a_configuration_error_not_a_sample_failure(tokenizer_dir, functions_file):
    config = reward_config(tokenizer_dir, functions_file, "refuses_its_options")
    tokenizer = byte_level_bpe()
    sample = agent_loop_sample(tokenizer, RESPONSES[0], uid="p3")
    info = run_in_worker_loop(lambda: load_reward_manager(config, tokenizer), lambda m: m.run_single(sample))[
        "reward_extra_info"
    ]
    assert REWARD_ERROR_KEY not in info
    assert info[REWARD_CONFIG_ERROR_KEY].startswith(
        "the reward function refused its options (first seen with sample uid=p3 data_source='react_tsx'): unknown "
        "tool_arithmetic option(s) ['scor']; did you mean 'score'?"
    )


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("trainer.use_v1=false", "legacy trainer"),
        ("+async_training.staleness_threshold=1", "fully-async trainer"),
        ("+reward.bot_token.clip=[0,1]", r"unknown reward.bot_token option\(s\) \['clip'\]"),
        ("reward.bot_token.outcome_weight=2", r"outcome_weight must be in \[0, 1\]"),
    ],
)
def test_unsupported_trainers_and_bad_options_are_refused_at_start_up(tokenizer_dir, functions_file, override, message):
    config = reward_config(tokenizer_dir, functions_file, "spans", override)
    with pytest.raises((RuntimeError, ValueError), match=message):
        run_in_worker_loop(lambda: load_reward_manager(config, byte_level_bpe()), lambda manager: asyncio.sleep(0))


def test_token_reward_score_survives_pickling_as_ray_does():
    score, failed = TokenRewardScore(1.5, [0.1, -0.2]), TokenRewardScore(np.nan, [np.nan], error="broken")
    for module in (pickle, cloudpickle):
        restored = module.loads(module.dumps(score))
        assert isinstance(restored, TokenRewardScore) and restored == 1.5 and restored.error is None
        np.testing.assert_array_equal(restored.token_rewards, np.array([0.1, -0.2], dtype=np.float32))
        assert module.loads(module.dumps(failed)).error == "broken"


def test_token_reward_score_holds_the_rewards_as_rm_scores_does():
    """float32 (what rm_scores keeps), read-only, about 4 bytes a token in memory and pickled."""
    score = TokenRewardScore(1.0, np.linspace(-1, 1, 16384))
    assert score.token_rewards.dtype == np.float32 and not score.token_rewards.flags.writeable
    assert len(pickle.dumps(score)) < 4 * 16384 + 1024
    with pytest.raises(ValueError, match="read-only"):
        score.token_rewards[0] = 5.0


@pytest.mark.parametrize("manager", ["naive", "bot_token"])
def test_numpy_scalars_are_accepted_as_by_verls_own_managers(tokenizer_dir, functions_file, manager):
    config = reward_config(tokenizer_dir, functions_file, "numpy_scalars", f"reward.reward_manager.name={manager}")
    tokenizer = byte_level_bpe()
    result = run_in_worker_loop(
        lambda: load_reward_manager(config, tokenizer),
        lambda manager: manager.run_single(agent_loop_sample(tokenizer, RESPONSES[0])),
    )
    assert float(result["reward_score"]) == 0.5


@pytest.mark.parametrize(("clean_up_spaces", "decodes"), [(False, 0), (True, 1)])
def test_the_response_is_decoded_at_most_once(tokenizer_dir, functions_file, clean_up_spaces, decodes):
    """verl's naive manager decodes each response once; bot_token takes the text from its byte table where
    that is the decode, and decodes once to check it where the tokenizer may clean up spaces."""
    config = reward_config(tokenizer_dir, functions_file, "spans")
    tokenizer = counting_decodes(byte_level_bpe())
    tokenizer.clean_up_tokenization_spaces = clean_up_spaces
    result = run_in_worker_loop(
        lambda: load_reward_manager(config, tokenizer),
        lambda manager: manager.run_single(agent_loop_sample(tokenizer, RESPONSES[1])),
    )
    assert tokenizer.backend_tokenizer.decodes == decodes and len(result["reward_score"].token_rewards) > 1
    assert result["reward_extra_info"]["chars"] == len(RESPONSES[1])  # the solution_str the function saw


def test_an_empty_response_gets_no_token_rewards(tokenizer_dir, functions_file):
    """verl pads a response the policy ended at once: its attention mask over the response is all 0."""
    config = reward_config(tokenizer_dir, functions_file, "spans")
    tokenizer = byte_level_bpe()
    sample = agent_loop_sample(tokenizer, "x")
    sample.batch["attention_mask"][0, -2:] = 0
    result = run_in_worker_loop(lambda: load_reward_manager(config, tokenizer), lambda m: m.run_single(sample))
    assert len(result["reward_score"].token_rewards) == 0 and float(result["reward_score"]) == 0.0
    assert result["reward_extra_info"]["span_coverage"] == 0.0


def agent_loop_output(tokenizer, response, reward_score):
    ids = tokenizer.encode(response, add_special_tokens=False) + [tokenizer.eos_token_id]
    output = AgentLoopOutput(
        prompt_ids=[1, 2], response_ids=ids, response_mask=[1] * len(ids), metrics=AgentLoopMetrics()
    )
    output.reward_score = reward_score  # the agent loop assigns the worker's result like this
    return output


def test_as_dict_writes_dense_rm_scores_and_leaves_plain_scores_to_verl():
    tokenizer = byte_level_bpe()
    length = len(tokenizer.encode(RESPONSES[0], add_special_tokens=False)) + 1
    dense = agent_loop_output(tokenizer, RESPONSES[0], TokenRewardScore(1.0, np.linspace(-1, 1, length))).as_dict()
    torch.testing.assert_close(dense["rm_scores"], torch.linspace(-1, 1, length))
    plain = agent_loop_output(tokenizer, RESPONSES[0], 0.75).as_dict()
    expected = torch.zeros(length)
    expected[-1] = 0.75
    torch.testing.assert_close(plain["rm_scores"], expected)  # verl's own behaviour, unchanged
    assert "rm_scores" not in agent_loop_output(tokenizer, RESPONSES[0], None).as_dict()


def test_assemble_rm_scores_on_a_colocated_batch():
    """The batch V1's ``_compute_reward_colocate`` builds: prompts, right-padded responses, attention mask."""
    lengths = [3, 5, 1]
    responses = torch.zeros(3, 6, dtype=torch.long)
    attention = torch.cat([torch.ones(3, 4, dtype=torch.long), torch.zeros(3, 6, dtype=torch.long)], dim=1)
    for row, length in enumerate(lengths):
        attention[row, 4 : 4 + length] = 1
    data = DataProto(
        batch=TensorDict(
            {"prompts": torch.zeros(3, 4, dtype=torch.long), "responses": responses, "attention_mask": attention},
            batch_size=3,
        )
    )
    scores = [TokenRewardScore(1.0, np.arange(length) + 1.0) for length in lengths]
    rm_scores = BoTTokenRewardManager.assemble_rm_scores(data, scores)
    expected = torch.zeros(3, 6)
    for row, length in enumerate(lengths):
        expected[row, :length] = torch.arange(length) + 1.0
    torch.testing.assert_close(rm_scores, expected)
    with pytest.raises(ValueError, match="sample 1: expected 5 token rewards from the bot_token manager, got 3"):
        BoTTokenRewardManager.assemble_rm_scores(data, [scores[0], scores[0], scores[2]])
    failed = failed_sample("bot_token reward failed for sample uid=p3 data_source='x': ValueError: no", 5)
    with pytest.raises(RuntimeError, match=r"uid=p3 .*ValueError: no; fix the reward function"):
        BoTTokenRewardManager.assemble_rm_scores(data, [scores[0], failed["reward_score"], scores[2]])


def test_reward_worker_to_agent_loop_output_to_bot_grpo_advantages(tokenizer_dir, functions_file):
    """verl's RewardLoopWorker scores a group, AgentLoopOutput.as_dict builds rm_scores, and verl's
    compute_advantage with bot_grpo yields the advantages the spec predicts."""
    config = reward_config(tokenizer_dir, functions_file, "spans")
    tokenizer = byte_level_bpe()

    async def score_group(worker):
        return [await worker.compute_score(agent_loop_sample(tokenizer, response)) for response in RESPONSES]

    results = run_in_worker_loop(lambda: RewardLoopWorker(config), score_group)
    rows = [
        agent_loop_output(tokenizer, response, result["reward_score"]).as_dict()
        for response, result in zip(RESPONSES, results, strict=True)
    ]
    width = max(len(row["responses"]) for row in rows)
    rewards = torch.zeros(len(rows), width)
    mask = torch.zeros(len(rows), width, dtype=torch.long)
    for i, row in enumerate(rows):
        rewards[i, : len(row["rm_scores"])] = row["rm_scores"]
        mask[i, : len(row["response_mask"])] = row["response_mask"]
    index = np.array(["p0"] * len(rows), dtype=object)
    data = DataProto.from_dict(
        tensors={"token_level_rewards": rewards, "response_mask": mask}, non_tensors={"uid": index}
    )
    data = compute_advantage(data, adv_estimator=config.algorithm.adv_estimator, config=config.algorithm)

    expected_rewards = torch.zeros(len(rows), width, dtype=torch.float64)
    for i, response in enumerate(RESPONSES):
        values = expected_token_rewards(tokenizer, response, float("42" in response), spans_of(response))
        expected_rewards[i, : len(values)] = torch.tensor(values, dtype=torch.float64)
    expected = reference_bot_grpo(expected_rewards, mask, index)
    torch.testing.assert_close(data.batch["advantages"].double(), expected, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(data.batch["advantages"][0, :3], data.batch["advantages"][0, -3:])  # token level


def test_training_metrics_average_scalar_reward_extra_info():
    extra_fields = [
        {"reward_extra_info": {"score": 1.0, "span_coverage": 0.5, "compiled": True}},
        {"reward_extra_info": {"score": 0.0, "span_coverage": 1.0, "note": "text"}},
        {"other": 1},
        None,
    ]
    assert reward_extra_metrics(extra_fields) == {
        "reward_extra/score/mean": 0.5,
        "reward_extra/span_coverage/mean": 0.75,
        "reward_extra/compiled/mean": 1.0,
    }


def test_preset_selects_estimator_and_reward_manager_in_one_override(tokenizer_dir, functions_file):
    config = reward_config(tokenizer_dir, functions_file)
    assert config.algorithm.adv_estimator == "bot_grpo"
    assert config.reward.reward_manager.name == "bot_token"
    # every option listed, at null (its default), so that hydra takes it with or without '+'
    assert set(config.reward.bot_token) == {option.name for option in fields(TokenRewardConfig)}
    assert TokenRewardConfig.from_reward_config(config.reward) == TokenRewardConfig()


@pytest.mark.parametrize(
    ("how", "name", "share", "outcome"),
    [
        ("fraction", "ShopList", 0.6, 0.6),
        ("fraction_named", "ShopList", 0.6, 0.6),
        ("fraction_named", "Other", 0.2, 0.0),
    ],
)
def test_a_graded_react_spec_reaches_the_token_rewards_through_the_bot_token_manager(
    tokenizer_dir, how, name, share, outcome
):
    """``requirements_score=fraction`` (and ``fraction_named``) end to end: verl's reward loop, the bot_token
    manager, react_tsx with a row's spec. ShopList meets 3 of the spec's 5 requirements (its prop, <li>; but it
    renders an <ol>: no <ul>, and a stray element), so its outcome is 0.6: every token outside the two error spans
    on the stray tag gets 0.6, those get -1. Under another name it meets 1 (<li>), which ``fraction_named`` does
    not count: outcome 0."""
    reward_file = Path(__file__).resolve().parents[1] / "bot_grpo_verl" / "rewards" / "react_tsx.py"
    config = reward_config(
        tokenizer_dir,
        reward_file,
        "compute_score",
        f"+reward.custom_reward_function.reward_kwargs.requirements_score={how}",
    )
    tokenizer = byte_level_bpe()
    response = (
        f"```tsx\nexport function {name}({{ items }}: {{ items: string[] }}) {{\n"
        "  return <ol><li>{items.length}</li></ol>;\n}\n```\n"
    )
    sample = agent_loop_sample(tokenizer, response)
    sample.non_tensor_batch["extra_info"] = np.array(
        [
            {
                "index": 0,
                SPEC_KEY: {
                    "component": "ShopList",
                    "elements": ["ul", "li"],
                    "only_elements": True,
                    "props": ["items"],
                },
            }
        ]
    )
    result = run_in_worker_loop(
        lambda: load_reward_manager(config, tokenizer), lambda manager: manager.run_single(sample)
    )
    score = result["reward_score"]
    assert float(score) == pytest.approx(outcome)
    assert result["reward_extra_info"]["requirements_share"] == pytest.approx(share)
    stray = [(start, start + 2, -1.0) for start in (response.index("<ol>") + 1, response.index("</ol>") + 2)]
    np.testing.assert_allclose(score.token_rewards, expected_token_rewards(tokenizer, response, outcome, stray))
