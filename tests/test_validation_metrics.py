"""The CPU mode's vectorised ``bootstrap_metric`` gives verl's floats bit for bit, consumes verl's random
stream identically, leaves everything else to verl's own loop, is installed by the CPU mode only, and
fails loudly when verl's function or its caller changed."""

import functools
import inspect
import uuid

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from verl.trainer.ppo import metric_utils

import bot_grpo_verl.cpu as cpu_mode
from bot_grpo_verl.verl_compat import UnsupportedVerl
from bot_grpo_verl.verl_compat.validation_metrics import (
    vectorise_validation_bootstrap,
    vectorised_bootstrap_metric,
)

VERL_BOOTSTRAP_METRIC = inspect.unwrap(metric_utils.bootstrap_metric)
VECTORISED = vectorised_bootstrap_metric(VERL_BOOTSTRAP_METRIC)
REDUCTION_LISTS = [[np.max, np.min], [np.min], [np.max], [np.min, np.max, np.max], []]


def bits(value) -> bytes:
    """The float64 bytes of ``value``: equal bits, not only equal values (-0.0 != 0.0, NaN == NaN)."""
    return np.float64(value).tobytes()


def bootstrap_with_random_state(bootstrap_metric, *args):
    """(result as float64 bytes, the global random state's key and position after the call)."""
    result = bootstrap_metric(*args)
    _, key, position, *_ = np.random.get_state()
    return [tuple(map(bits, pair)) for pair in result], key.tobytes(), position


def assert_same_as_verl(data, subset_size, reduce_fns, n_bootstrap, seed):
    args = (data, subset_size, reduce_fns, n_bootstrap, seed)
    assert bootstrap_with_random_state(VECTORISED, *args) == bootstrap_with_random_state(VERL_BOOTSTRAP_METRIC, *args)


def spied(verl_function):
    """(``vectorised_bootstrap_metric`` over ``verl_function``, the list of calls it passed on to it)."""
    calls = []

    @functools.wraps(verl_function)
    def spy(*args):
        calls.append(args)
        return verl_function(*args)

    return vectorised_bootstrap_metric(spy), calls


numbers = st.one_of(
    st.lists(st.floats(allow_nan=False, allow_infinity=True), min_size=1, max_size=12),
    st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=12),
    st.lists(st.integers(0, 2) | st.booleans() | st.floats(-3, 3, width=32), min_size=1, max_size=12),
)


@settings(max_examples=150, deadline=None)
@given(
    data=numbers,
    subset_size=st.integers(1, 9),
    reduce_fns=st.sampled_from(REDUCTION_LISTS),
    n_bootstrap=st.integers(1, 60),
    seed=st.integers(0, 2**32 - 1),
)
def test_max_and_min_of_numbers_are_verls_floats_bit_for_bit(data, subset_size, reduce_fns, n_bootstrap, seed):
    assert_same_as_verl(data, subset_size, reduce_fns, n_bootstrap, seed)


@pytest.mark.parametrize("seed", [0, 42, 2**31])
@pytest.mark.parametrize(
    "data",
    [[0.5], [3], [1.0, 0.0, 1.0], list(np.random.default_rng(1).normal(size=16)), list(range(8)), [True, False]],
    ids=["one_float", "one_int", "floats", "numpy_floats", "ints", "bools"],
)
def test_verls_default_of_1000_resamples_gives_verls_floats(data, seed):
    for subset_size in (1, 2, 4, 8):
        assert_same_as_verl(data, subset_size, [np.max, np.min], 1000, seed)


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(st.floats(allow_infinity=True) | st.integers(-5, 5), min_size=1, max_size=8),
    subset_size=st.integers(1, 6),
    seed=st.integers(0, 2**32 - 1),
)
@example(data=[-0.0, 1.0], subset_size=2, seed=0)
@example(data=[0, -0.0, -1], subset_size=3, seed=1)
@example(data=[1.0, float("nan")], subset_size=2, seed=2)
@example(data=[float("nan"), 1], subset_size=1, seed=3)
def test_nan_and_negative_zero_go_to_verls_loop_and_match(data, subset_size, seed):
    bootstrap_metric, calls = spied(VERL_BOOTSTRAP_METRIC)
    values = np.asarray(data, dtype=np.float64)
    verls_order_matters = bool(np.isnan(values).any() or np.signbit(values[values == 0]).any())
    args = (data, subset_size, [np.max, np.min], 40, seed)
    assert bootstrap_with_random_state(bootstrap_metric, *args) == bootstrap_with_random_state(
        VERL_BOOTSTRAP_METRIC, *args
    )
    assert bool(calls) == verls_order_matters


@pytest.mark.parametrize(
    ("data", "reduce_fns"),
    [
        ([1.0, 2.0, 3.0], [lambda sample: float(np.max(sample))]),
        ([1.0, 2.0, 3.0], [np.max, np.mean]),
        ([1.0, 2.0, 3.0], [np.amax]),  # another function than verl's np.max
        ([{"val": 1.0, "pred": "a"}, {"val": 0.0, "pred": "b"}], [metric_utils.calc_maj_val]),  # maj@N's data
        (["1", "2"], [np.max]),  # strings compare as text in verl's loop
        ([1.0, None], [np.max]),
        ([np.array(1.0), np.array(2.0)], [np.max]),
    ],
    ids=["lambda", "mean", "amax", "votes", "strings", "none", "arrays"],
)
def test_anything_else_goes_to_verls_loop(data, reduce_fns):
    bootstrap_metric, calls = spied(VERL_BOOTSTRAP_METRIC)
    args = (data, 2, reduce_fns, 20, 7)
    try:
        expected = VERL_BOOTSTRAP_METRIC(*args)
    except TypeError:  # calc_maj_val needs its vote keys; the call still has to reach verl's loop
        with pytest.raises(TypeError):
            bootstrap_metric(*args)
    else:
        assert bootstrap_metric(*args) == expected
    assert calls == [args]


def test_a_lambda_is_called_once_per_resample_by_verls_loop():
    samples = []
    reduce_fn = lambda sample: samples.append(sample) or float(np.max(sample))  # noqa: E731
    VECTORISED([1.0, 2.0, 3.0], 2, [reduce_fn], 25, 3)
    assert len(samples) == 25 and all(sample.dtype == object and sample.shape == (2,) for sample in samples)


def validation_samples(sizes, seed):
    """verl's ``process_validation_metrics`` arguments for prompts with the given sample counts: float, int
    and bool reward keys, ``acc`` with some samples missing, a string key and ``pred`` (maj@N)."""
    rng = np.random.default_rng(seed)
    prompt_uids = [str(uuid.UUID(int=int(rng.integers(2**62)))) for _ in sizes]
    uids = [uid for uid, size in zip(prompt_uids, sizes, strict=True) for _ in range(size)]
    count = len(uids)
    infos = {
        "reward": rng.normal(size=count).round(2).tolist(),
        "steps": rng.integers(0, 5, count).tolist(),
        "solved": (rng.random(count) < 0.5).tolist(),
        "acc": [float(x) if x < 2 else None for x in rng.integers(0, 3, count)],
        "verdict": rng.choice(["right", "wrong"], count).tolist(),
        "pred": rng.choice(["1", "2", "3"], count).tolist(),
    }
    counts = {("arith", uid): size for uid, size in zip(prompt_uids, sizes, strict=True)}
    return ["arith"] * count, uids, infos, counts


def flat_bits(metrics):
    """{(data source, variable, metric name): float64 bytes} of verl's nested metrics."""
    return {
        (source, variable, name): bits(value)
        for source, variables in metrics.items()
        for variable, values in variables.items()
        for name, value in values.items()
    }


@pytest.mark.parametrize(("sizes", "seed"), [([1, 2, 3, 5, 8], 0), ([8] * 4, 1), ([1], 2), ([4, 4, 1, 6], 3)])
def test_process_validation_metrics_end_to_end_equals_verls(monkeypatch, sizes, seed):
    sources, uids, infos, counts = validation_samples(sizes, seed)
    monkeypatch.setattr(metric_utils, "bootstrap_metric", VECTORISED)
    validate = functools.partial(metric_utils.process_validation_metrics, seed=seed, expected_acc_counts=counts)
    ours = validate(sources, uids, infos)
    monkeypatch.setattr(metric_utils, "bootstrap_metric", VERL_BOOTSTRAP_METRIC)
    verls = validate(sources, uids, infos)
    assert flat_bits(ours) == flat_bits(verls)
    names = {name for _, _, name in flat_bits(verls)}
    assert {"best@2/mean", "worst@2/std", "maj@2/mean"} <= names or max(sizes) == 1


# --- applied in the CPU mode only, through the plugin's own activation --------------------------------


def activate_with(monkeypatch, env_value: str) -> bool:
    """Run the CPU mode's activation afresh with ``BOT_GRPO_CPU=env_value`` and verl's own function in place."""
    monkeypatch.setattr(cpu_mode, "_active", False)
    monkeypatch.setenv(cpu_mode.ENV_VAR, env_value)
    monkeypatch.setattr(metric_utils, "bootstrap_metric", VERL_BOOTSTRAP_METRIC)
    return cpu_mode.activate()


@pytest.mark.skipif(not cpu_mode.is_active(), reason="the test process runs without the CPU mode")
def test_the_cpu_mode_installs_it(monkeypatch):
    assert metric_utils.bootstrap_metric.__bot_grpo_adapter__  # by the plugin, on import verl
    assert activate_with(monkeypatch, "1") is True
    installed = metric_utils.bootstrap_metric
    assert installed.__bot_grpo_adapter__ and installed.__wrapped__ is VERL_BOOTSTRAP_METRIC
    vectorise_validation_bootstrap()  # idempotent
    assert metric_utils.bootstrap_metric is installed


def test_without_the_cpu_mode_verls_function_stays(monkeypatch):
    assert activate_with(monkeypatch, "0") is False
    assert metric_utils.bootstrap_metric is VERL_BOOTSTRAP_METRIC


# --- the guard ------------------------------------------------------------------------------------------


def renamed_parameters(data, size, reduce_fns, n_bootstrap=1000, seed=42):
    return VERL_BOOTSTRAP_METRIC(data, size, reduce_fns, n_bootstrap, seed)


def generator_stream(data, subset_size, reduce_fns, n_bootstrap=1000, seed=42):
    indices = np.random.default_rng(seed).choice(len(data), size=(n_bootstrap, subset_size))
    return [(float(np.mean(fn(np.asarray(data)[indices], axis=1))), 0.0) for fn in reduce_fns]


def caller_bound_early(data_sources, sample_uids, infos_dict, seed=42, expected_acc_counts=None, _fn=None):
    return _fn(data_sources, 2, [np.max], seed=seed)


@pytest.mark.parametrize(
    ("attribute", "replacement", "named"),
    [
        ("bootstrap_metric", renamed_parameters, r"bootstrap_metric changed \(it takes"),
        ("bootstrap_metric", generator_stream, r"bootstrap_metric changed \(it draws"),
        ("bootstrap_metric", None, r"bootstrap_metric changed \(it is a function"),
        ("process_validation_metrics", caller_bound_early, "process_validation_metrics changed"),
    ],
    ids=["signature", "random_stream", "removed", "caller"],
)
def test_it_fails_loudly_when_verl_changed(monkeypatch, attribute, replacement, named):
    monkeypatch.setattr(metric_utils, attribute, replacement)
    with pytest.raises(UnsupportedVerl, match=named):
        vectorise_validation_bootstrap()
