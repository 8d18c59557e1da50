"""What a reward function or a policy can hand the token-reward path, adversarially: a table of return
values with their expected error or result, hypothesis fuzzing of the contract (values tagged good or
bad, checked against the tags) and of the alignment (random unicode and invalid UTF-8 byte runs,
against incremental decoding), and time bounds on degenerate inputs as ratios to normal input of the
same size."""

import time
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from reference import reference_token_values
from tokenizer_fixtures import qwen3_or_skip

import bot_grpo_verl.reward.alignment as alignment
from benchmarks.local_tokenizers import TOKENIZERS, byte_token_ids
from bot_grpo_verl.reward.alignment import incremental_char_ranges, token_char_ranges, token_values_from_spans
from bot_grpo_verl.reward.manager import TokenRewardConfig, dense_token_rewards
from bot_grpo_verl.reward.token_rewards import parse_reward_result

qwen3_tokenizer = pytest.fixture(qwen3_or_skip, scope="module", name="qwen3_tokenizer")

# ------------------------------------------------------------------------------------------ the contract

ACCEPTED = [  # (returned value, token count, expected (score, spans, token_rewards, extra))
    (0.5, None, (0.5, None, None, {})),
    (np.float32(0.25), None, (0.25, None, None, {})),
    (np.int64(1), None, (1.0, None, None, {})),
    (Fraction(1, 2), None, (0.5, None, None, {})),
    ({"score": np.float64(0.5)}, None, (0.5, None, None, {})),
    ({"score": 1, "spans": [(np.int64(0), np.int32(2), np.float32(0.5))]}, None, (1.0, ((0, 2, 0.5),), None, {})),
    ({"score": 1, "spans": [(np.uint8(0), np.uint64(3), np.float16(0.5))]}, None, (1.0, ((0, 3, 0.5),), None, {})),
    ({"score": 1, "spans": None}, None, (1.0, None, None, {})),
    ({"score": 1, "spans": []}, None, (1.0, (), None, {})),
    ({"score": 1, "spans": [(0, 0, 1.0), (10, 10, -1)]}, None, (1.0, ((0, 0, 1.0), (10, 10, -1.0)), None, {})),
    ({"score": 1, "spans": ((0, 5, 1.0), [2, 3, -1.0])}, None, (1.0, ((0, 5, 1.0), (2, 3, -1.0)), None, {})),
    ({"score": 1, "spans": iter([(0, 1, 2)])}, None, (1.0, ((0, 1, 2.0),), None, {})),
    ({"score": 1, "token_rewards": None}, None, (1.0, None, None, {})),
    ({"score": 1, "token_rewards": [1, 2.5, np.float32(3)]}, 3, (1.0, None, [1.0, 2.5, 3.0], {})),
    ({"score": 1, "token_rewards": np.arange(3, dtype=np.float32)}, 3, (1.0, None, [0.0, 1.0, 2.0], {})),
    ({"score": 1, "token_rewards": np.arange(3, dtype=np.uint8)}, 3, (1.0, None, [0.0, 1.0, 2.0], {})),
    ({"score": 1, "token_rewards": torch.tensor([0.5, 1.0, 0.0])}, 3, (1.0, None, [0.5, 1.0, 0.0], {})),
    ({"score": 1, "token_rewards": []}, 0, (1.0, None, [], {})),
    ({"score": 1, "compiled": True, "flag": np.False_}, None, (1.0, None, None, {"compiled": 1.0, "flag": 0.0})),
    ({"score": 1, "n": np.int64(3), "acc": 0.0}, None, (1.0, None, None, {"n": 3.0, "acc": 0.0})),
]


@pytest.mark.parametrize(("result", "tokens", "expected"), ACCEPTED)
def test_accepted_results(result, tokens, expected):
    parsed = parse_reward_result(result, 10, tokens)
    score, spans, token_rewards, extra = expected
    assert parsed.score == score and type(parsed.score) is float
    assert parsed.spans == spans
    assert all(type(number) is int for span in parsed.spans or () for number in span[:2])
    if token_rewards is None:
        assert parsed.token_rewards is None
    else:
        assert parsed.token_rewards.dtype == np.float64
        np.testing.assert_array_equal(parsed.token_rewards, token_rewards)
    assert parsed.extra == extra and all(type(value) is float for value in parsed.extra.values())


REFUSED = [  # (returned value, token count, the error it must give)
    ("0.5", None, r"must return a number or a dict with 'score', got str '0.5'"),
    (True, None, "must return a number or a dict with 'score', got bool"),
    (np.bool_(True), None, "must return a number or a dict with 'score', got bool"),
    (None, None, "must return a number or a dict with 'score', got NoneType"),
    (np.array(0.5), None, "must return a number or a dict with 'score', got ndarray"),
    (np.array(0.5, dtype=object), None, "must return a number or a dict with 'score', got ndarray"),
    (torch.tensor(0.5), None, "must return a number or a dict with 'score', got Tensor"),
    ([0.5], None, "must return a number or a dict with 'score', got list"),
    ({"spans": []}, None, "the returned dict has no 'score' key"),
    ({"score": "0.5"}, None, "score must be a number .*got str '0.5'"),
    ({"score": True}, None, "score must be a number .*got bool"),
    ({"score": None}, None, "score must be a number .*got NoneType"),
    ({"score": float("nan")}, None, "score is not finite: nan"),
    ({"score": -np.inf}, None, "score is not finite: -inf"),
    ({"score": 10**400}, None, "score is too large for a float: 1000"),
    ({"score": 1e39}, None, r"score = 1e\+39 is beyond float32's range"),
    ({"score": 1, "spans": [(0, 2, -4e38)]}, None, r"span 0 value = -4e\+38 is beyond float32's range"),
    ({"score": 1, "token_rewards": [1.0, 1e300, 1.0]}, 3, r"token_rewards\[1\] = 1e\+300 is beyond float32's range"),
    ({"score": 1, "spans": [(0, 2, "0.5")]}, None, "span 0 value must be a number .*got str '0.5'"),
    ({"score": 1, "spans": [(0, 2, True)]}, None, "span 0 value must be a number .*got bool"),
    ({"score": 1, "spans": [(0, 2, 1.0), (0, 2, float("nan"))]}, None, "span 1 value is not finite: nan"),
    ({"score": 1, "spans": [(0, 2, np.float32("inf"))]}, None, "span 0 value is not finite: inf"),
    ({"score": 1, "spans": [(True, 2, 1.0)]}, None, "span 0 char_start must be an integer .*got bool"),
    ({"score": 1, "spans": [(0, np.True_, 1.0)]}, None, "span 0 char_end must be an integer .*got bool"),
    ({"score": 1, "spans": [(0.0, 2, 1.0)]}, None, "span 0 char_start must be an integer .*got float"),
    ({"score": 1, "spans": [("0", 2, 1.0)]}, None, "span 0 char_start must be an integer .*got str"),
    ({"score": 1, "spans": [(0, np.float64(2), 1.0)]}, None, "span 0 char_end must be an integer .*got float64"),
    ({"score": 1, "spans": [(3, 2, 1.0)]}, None, r"span 0 \(3, 2, 1.0\) is out of range or reversed"),
    ({"score": 1, "spans": [(-1, 2, 1.0)]}, None, "span 0 .* out of range or reversed: need 0 <= start"),
    (
        {"score": 1, "spans": [(0, 11, 1.0)]},
        None,
        r"span 0 .* out of range or reversed: need .* <= 10 \(character offsets",
    ),
    ({"score": 1, "spans": [(0, 2)]}, None, r"span 0 must be \(char_start, char_end, value\), got tuple"),
    ({"score": 1, "spans": [np.array([0, 2, 1])]}, None, r"span 0 must be \(char_start, char_end, value\)"),
    ({"score": 1, "spans": ["0,2"]}, None, r"span 0 must be \(char_start, char_end, value\), got str"),
    ({"score": 1, "spans": "0,2,1"}, None, "'spans' must be a list of .* triples, got str"),
    ({"score": 1, "spans": {"a": 1}}, None, "'spans' must be a list of .* triples, got dict"),
    ({"score": 1, "spans": 3}, None, "'spans' must be a list of .* triples, got int"),
    ({"score": 1, "spans": [(0, 2, 1.0)], "token_rewards": [1.0]}, None, r"at most one of .*'spans', 'token_rewards'"),
    ({"score": 1, "token_rewards": ["0.5", 1.0, 1.0]}, 3, r"token_rewards\[0\] must be a number .*got str"),
    ({"score": 1, "token_rewards": [1.0, True, 1.0]}, 3, r"token_rewards\[1\] must be a number .*got bool"),
    ({"score": 1, "token_rewards": [[1.0], [2.0], [3.0]]}, 3, r"token_rewards\[0\] must be a number .*got list"),
    ({"score": 1, "token_rewards": [10**400, 1, 1]}, 3, "integer too large for a float"),
    ({"score": 1, "token_rewards": np.array([True, False, True])}, 3, "1-D integer or float array.*dtype bool"),
    ({"score": 1, "token_rewards": np.array(["1", "2", "3"])}, 3, "1-D integer or float array.*dtype <U1"),
    ({"score": 1, "token_rewards": np.ones((3, 1))}, 3, r"1-D integer or float array, got ndarray of shape \(3, 1\)"),
    ({"score": 1, "token_rewards": "abc"}, 3, "1-D integer or float array, got str"),
    ({"score": 1, "token_rewards": (x for x in [1.0])}, 1, "1-D integer or float array, got generator"),
    ({"score": 1, "token_rewards": [1.0, float("nan"), 1.0]}, 3, r"token_rewards\[1\] is not finite: nan"),
    ({"score": 1, "token_rewards": np.array([1.0, 1.0, -np.inf])}, 3, r"token_rewards\[2\] is not finite: -inf"),
    ({"score": 1, "token_rewards": [1.0, 2.0]}, 3, "'token_rewards' has 2 values for 3 response tokens"),
    ({"score": 1, "token_rewards": [1.0]}, 0, "'token_rewards' has 1 values for 0 response tokens"),
    ({"score": 1, "span_coverage": 0.5}, None, r"keys \['span_coverage'\] are reserved"),
    ({"score": 1, "token_reward_mean": 0.5, "span_coverage": 1}, None, r"\['token_reward_mean', 'span_coverage'\]"),
    ({"score": 1, "note": "text"}, None, "extra key 'note' must be a number or a bool .*got str"),
    ({"score": 1, "note": None}, None, "extra key 'note' must be a number or a bool .*got NoneType"),
    ({"score": 1, "details": [1, 2]}, None, "extra key 'details' must be a number or a bool .*got list"),
    ({"score": 1, "loss": float("nan")}, None, "extra key 'loss' is not finite: nan"),
    ({"score": 1, "loss": np.float32("-inf")}, None, "extra key 'loss' is not finite: -inf"),
]


@pytest.mark.parametrize(("result", "tokens", "message"), REFUSED)
def test_refused_results_name_the_problem(result, tokens, message):
    with pytest.raises(ValueError, match=message):
        parse_reward_result(result, 10, tokens)


EDGE_RESPONSES = [  # (response text, reward function's result, expected token rewards, logs)
    ("", {"score": 1.0, "token_rewards": []}, [], {"token_reward_mean": 1.0, "span_coverage": 0.0}),
    ("", {"score": 1.0, "spans": [(0, 0, 5.0)]}, [], {"token_reward_mean": 1.0, "span_coverage": 0.0}),
    ("", 0.5, [], {"token_reward_mean": 0.5, "span_coverage": 0.0}),
    ("<eos>", {"score": 2.0, "spans": [(0, 0, 5.0)]}, [2.0], {"token_reward_mean": 2.0, "span_coverage": 0.0}),
    ("<eos>", {"score": 2.0, "token_rewards": [-1]}, [-1.0], {"token_reward_mean": -1.0, "span_coverage": 1.0}),
]


@pytest.mark.parametrize(("response", "result", "expected", "logs"), EDGE_RESPONSES)
def test_empty_responses_have_defined_rewards(response, result, expected, logs):
    tokenizer = TOKENIZERS["byte_level_bpe"]()
    ids = [tokenizer.eos_token_id] if response == "<eos>" else []
    rewards, info = dense_token_rewards(result, tokenizer, ids, TokenRewardConfig())
    np.testing.assert_array_equal(rewards, expected)
    assert {key: info[key] for key in logs} == logs


@pytest.mark.parametrize(
    ("response", "result", "message"),
    [
        ("empty", {"score": 1.0, "spans": [(0, 1, 5.0)]}, r"span 0 .* out of range or reversed: need .* <= 0"),
        ("empty", {"score": 1.0, "token_rewards": [1.0]}, "'token_rewards' has 1 values for 0 response tokens"),
        ("eos", {"score": 1.0, "token_rewards": []}, "'token_rewards' has 0 values for 1 response tokens"),
        ("text", {"score": 1.0, "token_rewards": [0.0] * 3}, r"'token_rewards' has 3 values for \d+ response tokens"),
    ],
)
def test_token_rewards_must_match_the_response(response, result, message):
    tokenizer = TOKENIZERS["byte_level_bpe"]()
    ids = {"empty": [], "eos": [tokenizer.eos_token_id], "text": tokenizer.encode("Hello world, 数学!")}[response]
    with pytest.raises(ValueError, match=message):
        dense_token_rewards(result, tokenizer, ids, TokenRewardConfig())


# Every value below is tagged good or bad; a result must be accepted exactly when all its values are good.
FLOAT32_MAX = float(np.finfo(np.float32).max)
GOOD_NUMBERS = st.one_of(
    st.floats(-FLOAT32_MAX, FLOAT32_MAX),
    st.integers(-(10**6), 10**6),
    st.floats(-1e6, 1e6).map(np.float32),
    st.integers(-(10**6), 10**6).map(np.int64),
)
BAD_NUMBERS = st.one_of(
    st.booleans(),
    st.floats(min_value=FLOAT32_MAX, exclude_min=True, allow_infinity=False),  # beyond what rm_scores can hold
    st.floats(allow_nan=False).map(str),
    st.sampled_from([float("nan"), float("inf"), -np.inf, np.float32("nan"), None, np.bool_(False)]),
    st.floats(-1, 1).map(np.array),
    st.floats(-1, 1).map(lambda value: [value]),
)


def tagged(good, bad):
    return st.one_of(good.map(lambda value: (value, True)), bad.map(lambda value: (value, False)))


@st.composite
def tagged_spans(draw, text_length):
    start, end = sorted(draw(st.lists(st.integers(0, text_length), min_size=2, max_size=2)))
    bound_kind = draw(st.sampled_from(["int", "numpy", "bool", "float", "reversed", "outside"]))
    bounds = {
        "int": (start, end),
        "numpy": (np.int64(start), np.int32(end)),
        "bool": (start, True),
        "float": (float(start), end),
        "reversed": (end + 1, end),
        "outside": (start, text_length + 1),
    }[bound_kind]
    value, good_value = draw(tagged(GOOD_NUMBERS, BAD_NUMBERS))
    return (*bounds, value), good_value and bound_kind in ("int", "numpy")


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_result_is_accepted_exactly_when_every_value_is_good(data):
    text_length, tokens = 12, 4
    score, good = data.draw(tagged(GOOD_NUMBERS, BAD_NUMBERS))
    result = {"score": score}
    kind = data.draw(st.sampled_from(["spans", "token_rewards", "neither"]))
    if kind == "spans":
        drawn = data.draw(st.lists(tagged_spans(text_length), max_size=4))
        result["spans"] = [span for span, _ in drawn]
        good &= all(ok for _, ok in drawn)
    elif kind == "token_rewards":
        drawn = data.draw(st.lists(tagged(GOOD_NUMBERS, BAD_NUMBERS), min_size=tokens - 1, max_size=tokens + 1))
        result["token_rewards"] = [value for value, _ in drawn]
        good &= all(ok for _, ok in drawn) and len(drawn) == tokens
    for key, (value, ok) in data.draw(
        st.dictionaries(st.sampled_from(["a", "b"]), tagged(GOOD_NUMBERS, BAD_NUMBERS))
    ).items():
        result[key] = value
        good &= ok or type(value) in (bool, np.bool_)  # bools are fine as logged values
    if good:
        assert_parsed_exactly(parse_reward_result(result, text_length, tokens), result, kind)
    else:
        with pytest.raises(ValueError):
            parse_reward_result(result, text_length, tokens)


def assert_parsed_exactly(parsed, result: dict, kind: str) -> None:
    """``parsed`` holds ``result``'s values as Python floats and ints, nothing dropped or added."""
    assert parsed.score == float(result["score"])
    if kind == "spans":
        assert parsed.spans == tuple((int(a), int(b), float(v)) for a, b, v in result["spans"])
    if kind == "token_rewards":
        np.testing.assert_array_equal(parsed.token_rewards, np.array([float(v) for v in result["token_rewards"]]))
    assert parsed.extra == {key: float(result[key]) for key in ("a", "b") if key in result}


# ------------------------------------------------------------------------------------------ the alignment

FRAGMENTS = [
    "a",
    " ",
    "  ",
    "\n",
    "\r\n",
    "\u2028",
    "\t",
    "e\u0301",  # combining acute accent
    "\u0301",
    "👩\u200d👩\u200d👧",  # ZWJ family
    "🧑🏽\u200d💻",
    "שלום",  # right to left
    "\u202eabc",  # right-to-left override
    "مرحبا",
    "数学",
    "\ufffd",  # a literal replacement character
    "<div>",
    "Step 1:",
]
INTERESTING_BYTES = [0x20, 0x41, 0x80, 0x82, 0x9F, 0xA0, 0xBD, 0xBF, 0xC0, 0xC2, 0xE0, 0xE2, 0xED, 0xEF, 0xF0, 0xF4]
BYTE_RUNS = st.one_of(
    st.lists(st.sampled_from(INTERESTING_BYTES) | st.integers(0, 255), min_size=1, max_size=6).map(bytes),
    st.sampled_from(["数".encode(), "\ufffd".encode(), "🧪".encode()[:3], b" \x80", b"A\x80", b"\xe6\x95"]),
)


@st.composite
def responses(draw, tokenizer, with_bytes=True, special=("<|im_end|>", "<|endoftext|>")):
    """Token ids mixing encoded unicode text, invalid UTF-8 byte runs, special tokens and unknown ids."""
    kinds = ["text", "bytes", "special", "unknown"] if with_bytes else ["text", "special"]
    ids = []
    for kind in draw(st.lists(st.sampled_from(kinds), max_size=8)):
        if kind == "text":
            text = "".join(draw(st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=3), min_size=1, max_size=5)))
            ids += tokenizer.encode(text, add_special_tokens=False)
        elif kind == "bytes":
            ids += byte_token_ids(tokenizer, draw(BYTE_RUNS))
        elif kind == "special":
            ids.append(tokenizer.convert_tokens_to_ids(draw(st.sampled_from(special))))
        else:
            ids.append(len(tokenizer) + draw(st.integers(0, 3)))  # dropped by the decoder
    return ids


def assert_tiled(ids, special, text, ranges):
    """Ranges as incremental decoding makes them: special tokens empty; the others, in order, either share
    the previous token's characters or start where they end, from 0 to the end of the text."""
    assert np.all(ranges[special, 0] == ranges[special, 1])
    owned = ranges[~special]
    if len(owned):
        assert owned[0, 0] == 0 and owned[-1, 1] == len(text)
        same = np.all(owned[1:] == owned[:-1], axis=1)
        assert np.all(same | (owned[1:, 0] == owned[:-1, 1]))
    assert np.all((ranges[:, 0] >= 0) & (ranges[:, 0] <= ranges[:, 1]) & (ranges[:, 1] <= len(text)))


def check_against_incremental_decoding(tokenizer, ids):
    with pytest.MonkeyPatch.context() as patch:  # the one-pass path must not fall back to the reference
        patch.setattr(alignment, "incremental_char_ranges", lambda *_: pytest.fail("fell back to the reference"))
        text, ranges = token_char_ranges(tokenizer, ids)
    assert text == tokenizer.decode(ids, skip_special_tokens=True)
    assert_tiled(ids, np.isin(ids, tokenizer.all_special_ids), text, ranges)
    try:
        expected_text, expected = incremental_char_ranges(tokenizer, ids)
    except ValueError as error:  # only a SentencePiece byte run that gave characters, then broke
        assert "<0x80>" in tokenizer.get_vocab() and "rewrites earlier text" in str(error)
        return
    assert text == expected_text
    np.testing.assert_array_equal(ranges, expected)


@pytest.mark.parametrize("family", sorted(TOKENIZERS))
@settings(max_examples=250, deadline=None)
@given(st.data())
def test_one_pass_alignment_equals_incremental_decoding_on_any_ids(family, data):
    tokenizer = TOKENIZERS[family]()
    check_against_incremental_decoding(tokenizer, data.draw(responses(tokenizer)))


@pytest.mark.slow  # 60 examples of Qwen3's tokenizer: ~15-50 s
@settings(max_examples=60, deadline=None)
@given(st.data())
def test_qwen3_alignment_equals_incremental_decoding_on_any_ids(qwen3_tokenizer, data):
    check_against_incremental_decoding(qwen3_tokenizer, data.draw(responses(qwen3_tokenizer)))


@pytest.mark.parametrize(
    ("pieces", "text", "ranges"),
    [
        # A run that decodes 'A' then breaks: the decoder shows all of it as U+FFFD, one block for its tokens.
        ([b"A\x80", "x"], "\ufffd\ufffdx", [(0, 3), (0, 3), (0, 3)]),
        ([b"\xe6\x95\xb0\x80", "x"], "\ufffd" * 4 + "x", [(0, 5)] * 5),
        ([b"\xe6\x95\xb0", "x", b"\x80\x80"], "数x\ufffd\ufffd", [(0, 1)] * 3 + [(1, 2), (2, 4), (2, 4)]),
        # A run opening the text with a space byte: that byte decodes alone first, to nothing (stripped).
        ([b" \x80", "x"], "\ufffd\ufffdx", [(0, 0), (0, 3), (0, 3)]),
    ],
)
def test_a_broken_sentencepiece_byte_run_is_one_block(pieces, text, ranges):
    """Pieces are byte runs (``<0xNN>`` tokens) or token names."""
    tokenizer = TOKENIZERS["sentencepiece_style"]()
    ids = []
    for piece in pieces:
        ids += (
            byte_token_ids(tokenizer, piece) if isinstance(piece, bytes) else [tokenizer.convert_tokens_to_ids(piece)]
        )
    assert token_char_ranges(tokenizer, ids)[0] == text
    np.testing.assert_array_equal(token_char_ranges(tokenizer, ids)[1], ranges)


@pytest.mark.parametrize("family", sorted(TOKENIZERS))
@settings(max_examples=120, deadline=None)
@given(st.data())
def test_span_values_equal_the_prefix_decoding_reference(family, data):
    tokenizer = TOKENIZERS[family]()
    # The prefix reference knows no special tokens (EOS) amid ids that end inside a character, nor a never
    # completed end of the text: neither is generated for it.
    ids = data.draw(responses(tokenizer, with_bytes=family == "byte_level_bpe", special=["<|im_end|>"]))
    text, ranges = token_char_ranges(tokenizer, ids)
    assume(not text.endswith("\ufffd"))
    bounds = st.integers(0, len(text))
    spans = [
        (*sorted((data.draw(bounds), data.draw(bounds))), float(number))
        for number in range(data.draw(st.integers(0, 6)))
    ]
    expected = reference_token_values(tokenizer, ids, spans, default=-1.0)
    np.testing.assert_array_equal(token_values_from_spans(ranges, spans, -1.0, len(text)), expected)


# ------------------------------------------------------------------------------------------ time bounds


def time_ratio(degenerate, normal, rounds=11) -> float:
    """Time of ``degenerate()`` over time of ``normal()``, each its fastest of alternating rounds (other
    processes on a shared machine only ever add time)."""
    times = {degenerate: [], normal: []}
    for _ in range(rounds):
        for function in times:
            start = time.perf_counter()
            function()
            times[function].append(time.perf_counter() - start)
    return min(times[degenerate]) / min(times[normal])


SIZE = 4000


def normal_ids(tokenizer, size=SIZE):
    text = "Step 1: const x = <div>{count}</div>; naïve 数学 🚀 ok.\n\n" * size
    return tokenizer.encode(text, add_special_tokens=False)[:size]


DEGENERATE = {  # byte runs of SIZE tokens that never or rarely complete a character
    "lone continuation bytes": b"\x80" * SIZE,
    "truncated 4-byte starts": b"\xf0\x9f\x98" * (SIZE // 3),
    "valid then broken": b"A\x80" * (SIZE // 2),
    "lead bytes only": b"\xe6" * SIZE,
}


@pytest.mark.parametrize("family", sorted(TOKENIZERS))
@pytest.mark.parametrize("degenerate", sorted(DEGENERATE))
def test_degenerate_byte_runs_align_in_linear_time(family, degenerate):
    """Incremental decoding takes ~100x longer on 8k lone continuation bytes than on text (quadratic);
    the one-pass alignment stays within a small factor of text of the same length."""
    tokenizer = TOKENIZERS[family]()
    bad, good = byte_token_ids(tokenizer, DEGENERATE[degenerate]), normal_ids(tokenizer)
    token_char_ranges(tokenizer, good)  # the tokenizer's table, built once
    assert time_ratio(lambda: token_char_ranges(tokenizer, bad), lambda: token_char_ranges(tokenizer, good)) < 5


def test_qwen3_degenerate_byte_runs_align_in_linear_time(qwen3_tokenizer):
    tokenizer = qwen3_tokenizer
    bad, good = tokenizer.convert_tokens_to_ids(["Ģ"]) * SIZE, normal_ids(tokenizer)
    token_char_ranges(tokenizer, good)
    assert time_ratio(lambda: token_char_ranges(tokenizer, bad), lambda: token_char_ranges(tokenizer, good)) < 5


def test_nested_spans_cost_linear_time():
    """Spans that each cover the rest of the text (a scope per opening brace, say) against as many spans
    that overlap only their neighbours: later spans win, so writing every character of every span would
    cost spans x characters."""
    tokenizer = TOKENIZERS["byte_level_bpe"]()
    text, ranges = token_char_ranges(tokenizer, normal_ids(tokenizer))
    count = len(text) // 4
    nested = [(number, len(text) - number, float(number)) for number in range(count)]
    neighbours = [(4 * number, min(4 * number + 5, len(text)), float(number)) for number in range(count)]
    ratio = time_ratio(
        lambda: token_values_from_spans(ranges, nested, 0.0, len(text)),
        lambda: token_values_from_spans(ranges, neighbours, 0.0, len(text)),
    )
    assert ratio < 5
