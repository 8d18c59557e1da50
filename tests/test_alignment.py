"""Character spans to generated tokens: the one-pass alignment against incremental decoding (the
reference) and a quadratic prefix-decoding reference, for two tokenizer families and Qwen3's real one."""

import copy
import functools
import re
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import reference_char_ends, reference_token_values
from tokenizer_fixtures import counting_decodes, qwen3_or_skip
from tokenizers import decoders

import bot_grpo_verl.reward.alignment as alignment
from benchmarks.local_tokenizers import TOKENIZERS, byte_token_ids
from bot_grpo_verl.reward.alignment import (
    byte_decoder,
    decodes_as_its_backend,
    incremental_char_ranges,
    token_char_ranges,
    token_values_from_spans,
)
from bot_grpo_verl.reward.token_rewards import line_spans, parse_reward_result, split_steps, step_spans

qwen3_tokenizer = pytest.fixture(qwen3_or_skip, scope="module", name="qwen3_tokenizer")

TEXTS = [
    "Hello world!\n\nconst x = <div>ok</div>;",
    "naïve 🧪 漢字 end",  # characters unseen in training: split into byte pieces
    "a ≠ b and 数学 🚀",
    "Step 1: add 12 and 30.\n\nStep 2: divide.\n\nThe answer is \\boxed{21}.",
    "   leading spaces and trailing   ",
]


@pytest.fixture(params=sorted(TOKENIZERS))
def tokenizer(request):
    return TOKENIZERS[request.param]()


@pytest.fixture
def no_reference(monkeypatch):
    """Make the one-pass alignment fail loudly if it falls back to the reference (tests call the reference
    by the name imported here, which the patch leaves alone)."""

    def forbidden(tokenizer, token_ids):
        raise AssertionError("token_char_ranges fell back to incremental decoding")

    monkeypatch.setattr(alignment, "incremental_char_ranges", forbidden)


def assert_same_as_reference(tokenizer, ids):
    expected_text, expected = incremental_char_ranges(tokenizer, ids)
    text, ranges = token_char_ranges(tokenizer, ids)
    assert text == expected_text
    np.testing.assert_array_equal(ranges, expected)
    return text, ranges


def encode(tokenizer, text, eos=True):
    ids = tokenizer.encode(text, add_special_tokens=False)
    return ids + [tokenizer.eos_token_id] if eos else ids


@pytest.mark.parametrize("text", TEXTS)
def test_ranges_match_prefix_decoding(tokenizer, text):
    ids = encode(tokenizer, text)
    decoded, ranges = token_char_ranges(tokenizer, ids)
    assert decoded == tokenizer.decode(ids, skip_special_tokens=True)
    for k, end in enumerate(reference_char_ends(tokenizer, ids)):
        if end is not None:
            assert ranges[k, 1] == end, (k, tokenizer.convert_ids_to_tokens(ids[k]))
    assert ranges[-1, 0] == ranges[-1, 1] == len(decoded)  # EOS: no characters
    assert np.all(np.diff(ranges[:, 1]) >= 0) and np.all(ranges[:, 0] <= ranges[:, 1])


@pytest.mark.parametrize("text", TEXTS)
def test_one_pass_alignment_equals_incremental_decoding(tokenizer, text):
    ids = encode(tokenizer, text)
    special = [tokenizer.convert_tokens_to_ids("<|im_end|>"), tokenizer.eos_token_id]
    for sequence in (ids, ids[:-2], special + ids[:3] + special + ids[3:], ids + [len(tokenizer) + 7] + ids):
        assert_same_as_reference(tokenizer, sequence)


def assert_text_is_the_decode_without_decoding(tokenizer, ids):
    expected = tokenizer.decode(ids, skip_special_tokens=True)
    decodes = tokenizer.backend_tokenizer.decodes
    assert token_char_ranges(tokenizer, ids)[0] == expected
    assert tokenizer.backend_tokenizer.decodes == decodes  # the byte table's text is the decode itself


def test_one_pass_alignment_needs_no_decode(tokenizer, no_reference):
    tokenizer = counting_decodes(tokenizer)
    assert decodes_as_its_backend(tokenizer)
    assert_text_is_the_decode_without_decoding(tokenizer, encode(tokenizer, TEXTS[1]))


def random_ids(tokenizer, data, past_vocabulary=4):
    """Ids drawn from the whole vocabulary (special and added tokens included), byte pieces and ids past it."""
    size = len(tokenizer)
    anywhere = st.integers(0, size - 1 + past_vocabulary)
    added = st.sampled_from(sorted(tokenizer.backend_tokenizer.get_added_tokens_decoder()))
    byte_runs = st.binary(max_size=6).map(lambda run: byte_token_ids(tokenizer, run))
    pieces = st.lists(anywhere.map(lambda k: [k]) | added.map(lambda k: [k]) | byte_runs, max_size=40)
    return [k for piece in data.draw(pieces) for k in piece]


@functools.cache
def with_added_tokens(family):
    """A fixture tokenizer counting its decodes, with added tokens that are not special, some of them made of
    the decoder's alphabet (``Ġ``, ``▁``: the decoder maps those too)."""
    tokenizer = counting_decodes(TOKENIZERS[family]())
    tokenizer.add_tokens(["<tool>", "\u2581x", " y", "\u0120foo", "\u00e9!", "数"])
    return tokenizer


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_byte_tables_text_is_the_decode_on_any_ids(data):
    tokenizer = with_added_tokens(data.draw(st.sampled_from(sorted(TOKENIZERS))))
    assert_text_is_the_decode_without_decoding(tokenizer, random_ids(tokenizer, data))


@functools.cache
def counting_qwen3(tokenizer):
    return counting_decodes(tokenizer)


@pytest.mark.slow  # 100 examples of Qwen3's tokenizer: ~20-80 s
@settings(max_examples=100, deadline=None)
@given(st.data())
def test_qwen3_byte_tables_text_is_the_decode_on_any_ids(qwen3_tokenizer, data):
    """Qwen3's added tokens (``<think>``, ``<tool_call>``, ...) are not special: they stay in the text."""
    tokenizer = counting_qwen3(qwen3_tokenizer)
    assert_text_is_the_decode_without_decoding(tokenizer, random_ids(tokenizer, data))


def overridden(name):
    """A change that overrides the tokenizer's method ``name`` on the instance (doing the same)."""

    def override(tokenizer):
        method = getattr(type(tokenizer), name)
        setattr(tokenizer, name, lambda *args, **kwargs: method(tokenizer, *args, **kwargs))

    return override


@pytest.mark.parametrize(
    "change",
    [
        lambda tokenizer: setattr(tokenizer, "clean_up_tokenization_spaces", True),
        overridden("decode"),
        overridden("_decode"),
    ],
    ids=["clean-up of spaces", "decode overridden", "_decode overridden"],
)
def test_a_decode_that_may_differ_from_the_backends_is_called_to_check(tokenizer, change, no_reference):
    tokenizer = counting_decodes(tokenizer)
    change(tokenizer)
    assert not decodes_as_its_backend(tokenizer)
    ids = encode(tokenizer, TEXTS[1])
    assert token_char_ranges(tokenizer, ids)[0] == tokenizer.decode(ids, skip_special_tokens=True)
    assert tokenizer.backend_tokenizer.decodes == 2  # one to check the table's text (and the one above)


def test_a_replaced_decoder_rebuilds_the_table():
    tokenizer = copy.deepcopy(TOKENIZERS["byte_level_bpe"]())
    assert byte_decoder(tokenizer) is not None
    tokenizer.backend_tokenizer.decoder = decoders.WordPiece()
    assert byte_decoder(tokenizer) is None
    assert_same_as_reference(tokenizer, encode(tokenizer, TEXTS[0]))


def test_qwen3_alignment_equals_incremental_decoding(qwen3_tokenizer, no_reference):
    tokenizer = qwen3_tokenizer
    text = (
        '<think>\nLet x = 12 + 30.\n</think>\n\nconst t = <h1 className="t">{x}</h1>; // ≠ 数学 🧑‍💻 '
        "שלום עולם e\u0301\u2028end\r\n\ufffd ok"
    )
    ids = tokenizer.encode(text * 3, add_special_tokens=False) + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    byte_tokens = tokenizer.convert_tokens_to_ids(["Ģ", "ð", "Ł", "ĺ", "æ", "ķ"])  # 0x80 F0 ... lone bytes
    for sequence in (ids, byte_tokens * 20 + ids[:50], ids[:40] + byte_tokens[1:3] + ids[40:], ids + byte_tokens):
        assert_same_as_reference(tokenizer, sequence)


def test_an_unmodelled_decoder_takes_the_reference():
    tokenizer = copy.deepcopy(TOKENIZERS["byte_level_bpe"]())
    tokenizer.backend_tokenizer.decoder = decoders.WordPiece()
    assert byte_decoder(tokenizer) is None
    assert_same_as_reference(tokenizer, encode(tokenizer, TEXTS[0]))


def test_a_decode_the_table_does_not_reproduce_takes_the_reference():
    """transformers' clean_up_tokenization rewrites ' .' (forced here for a BPE model): the decode no longer
    matches the tokens' bytes, so the one-pass alignment hands over to the reference, which refuses."""
    tokenizer = copy.deepcopy(TOKENIZERS["byte_level_bpe"]())
    tokenizer.clean_up_tokenization_spaces = True
    tokenizer.clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output = True
    ids = encode(tokenizer, "a . b , c")
    assert tokenizer.decode(ids, skip_special_tokens=True) == "a. b, c"
    with pytest.raises(ValueError, match="rewrites earlier text"):
        token_char_ranges(tokenizer, ids)
    assert_same_as_reference(tokenizer, encode(tokenizer, "a b c"))  # nothing to clean up: the same result


def test_tokens_added_after_the_table_was_built_are_decoded(no_reference):
    tokenizer = copy.deepcopy(TOKENIZERS["sentencepiece_style"]())
    byte_decoder(tokenizer)
    tokenizer.add_tokens(["<tool>"])
    text, _ = assert_same_as_reference(tokenizer, encode(tokenizer, "ok <tool> 数 done"))
    assert "<tool>" in text


def test_a_character_split_across_tokens_is_shared_by_them(tokenizer):
    text = "x 🧪 y"
    ids = encode(tokenizer, text, eos=False)
    decoded, ranges = token_char_ranges(tokenizer, ids)
    emoji = decoded.index("🧪")
    holders = [k for k in range(len(ids)) if ranges[k, 0] <= emoji < ranges[k, 1]]
    assert len(holders) >= 2  # the emoji's UTF-8 bytes come from several tokens
    assert all(ranges[k, 1] == emoji + 1 for k in holders)


def test_special_tokens_in_the_middle_get_no_characters(tokenizer):
    ids = encode(tokenizer, "one", eos=False) + [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    ids += encode(tokenizer, " two", eos=True)
    decoded, ranges = token_char_ranges(tokenizer, ids)
    assert decoded == tokenizer.decode(ids, skip_special_tokens=True)
    special = ids.index(tokenizer.convert_tokens_to_ids("<|im_end|>"))
    assert ranges[special, 0] == ranges[special, 1]


def test_a_response_cut_inside_a_character_keeps_its_bytes():
    tokenizer = TOKENIZERS["byte_level_bpe"]()
    ids = encode(tokenizer, "ok 🧪", eos=False)[:-1]  # drop the emoji's last byte token
    decoded, ranges = token_char_ranges(tokenizer, ids)
    assert decoded.endswith("\ufffd") and ranges[-1, 1] == len(decoded)


@pytest.mark.parametrize("text", TEXTS)
def test_span_values_follow_the_majority_rule(tokenizer, text):
    ids = encode(tokenizer, text)
    decoded, ranges = token_char_ranges(tokenizer, ids)
    # spans with boundaries inside tokens, one overlap, and gaps
    n = len(decoded)
    spans = [(0, n // 3, 1.0), (n // 4, n // 2 + 1, -2.0), (2 * n // 3, n, 0.5)]
    expected = reference_token_values(tokenizer, ids, spans, default=7.0)
    np.testing.assert_allclose(token_values_from_spans(ranges, spans, 7.0, n), expected)


def test_a_span_boundary_inside_a_token_gives_the_token_to_the_larger_share():
    tokenizer = TOKENIZERS["byte_level_bpe"]()
    ids = tokenizer.encode("Hello", add_special_tokens=False)  # H | e | ll | o
    decoded, ranges = token_char_ranges(tokenizer, ids)
    assert [decoded[a:b] for a, b in ranges] == ["H", "e", "ll", "o"]
    values = token_values_from_spans(ranges, [(0, 3, 1.0), (3, 5, -1.0)], 0.0, len(decoded))
    np.testing.assert_array_equal(values, [1.0, 1.0, -1.0, -1.0])  # 'll' splits 1:1, the later span wins
    values = token_values_from_spans(ranges, [(0, 2, 1.0)], 9.0, len(decoded))
    np.testing.assert_array_equal(values, [1.0, 1.0, 9.0, 9.0])


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab c\n数🧪ïé<>{}")), min_size=1, max_size=40), st.data())
def test_spans_tiling_the_text_give_every_token_with_characters_a_span_value(text, data):
    tokenizer = TOKENIZERS[data.draw(st.sampled_from(sorted(TOKENIZERS)))]()
    ids = encode(tokenizer, text)
    decoded, ranges = token_char_ranges(tokenizer, ids)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(decoded)), max_size=5))) | {0, len(decoded)})
    spans = [(a, b, float(number + 1)) for number, (a, b) in enumerate(zip(cuts, cuts[1:], strict=False))]
    values = token_values_from_spans(ranges, spans, -100.0, len(decoded))
    has_characters = ranges[:, 1] > ranges[:, 0]
    assert np.all(values[has_characters] > 0) and np.all(values[~has_characters] == -100.0)
    assert len(values) == len(ids)  # one value per response token, none outside the response


# ---------------------------------------------------------------- the contract


def test_parse_accepts_floats_and_dicts_and_keeps_scalar_extras():
    assert parse_reward_result(0.5, 10).score == 0.5
    parsed = parse_reward_result({"score": 1, "spans": [(0, 2, -1.0)], "acc": True, "n": 3}, 10)
    assert parsed.spans == ((0, 2, -1.0),) and parsed.extra == {"acc": 1.0, "n": 3.0}
    assert parsed.uncovered is None
    assert parse_reward_result({"score": 1, "spans": [], "uncovered": 0}, 10).uncovered == 0.0


@pytest.mark.parametrize(
    ("result", "message"),
    [
        ({"spans": []}, "no 'score' key"),
        ({"score": float("nan")}, "score is not finite"),
        ({"score": 1.0, "spans": [(3, 2, 1.0)]}, r"span 0 .* out of range or reversed"),
        ({"score": 1.0, "spans": [(0, 11, 1.0)]}, r"out of range .* <= 10"),
        ({"score": 1.0, "spans": [(0, 2)]}, r"span 0 must be \(char_start, char_end, value\)"),
        ({"score": 1.0, "spans": [(0, 2, float("inf"))]}, "span 0 value is not finite"),
        ({"score": 1.0, "token_rewards": [1.0, float("nan")]}, r"token_rewards\[1\] is not finite"),
        ({"score": 1.0, "spans": [], "token_rewards": []}, "at most one of"),
        ({"score": 1.0, "details": [1, 2]}, "extra key 'details' must be a number or a bool"),
        ("1.0", "must return a number or a dict"),
        ({"score": 1.0, "uncovered": 1.0}, "'uncovered' is the value of the tokens no span covers"),
        ({"score": 1.0, "token_rewards": [1.0], "uncovered": 1.0}, "return it beside 'spans'"),
        ({"score": 1.0, "spans": [], "uncovered": float("nan")}, "uncovered is not finite"),
        ({"score": 1.0, "spans": [], "uncovered": True}, "uncovered must be a number .* a bool is no reward"),
    ],
)
def test_parse_rejects_bad_results_with_a_clear_error(result, message):
    with pytest.raises(ValueError, match=message):
        parse_reward_result(result, 10)


def test_split_steps_tiles_the_text():
    text = "\n\nStep 1: a\n\nStep 2: b\n\n\n\n  \n\nAnswer: 3\n\n"
    ranges = split_steps(text)
    assert [text[a:b] for a, b in ranges] == ["\n\nStep 1: a\n\n", "Step 2: b\n\n\n\n", "  \n\nAnswer: 3\n\n"]
    assert ranges[0][0] == 0 and ranges[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert step_spans(text, [1, 2, 3]) == [(a, b, float(v)) for (a, b), v in zip(ranges, [1, 2, 3], strict=True)]
    with pytest.raises(ValueError, match="2 step values for 3 steps"):
        step_spans(text, [1, 2])


def quadratic_split_steps(text, separator):
    """split_steps as first written: every blank check re-strips the whole pending text."""
    ranges, start = [], 0
    for run in re.finditer(f"(?:{re.escape(separator)})+", text):
        if text[start : run.start()].strip():
            ranges.append((start, run.end()))
            start = run.end()
    if start < len(text):
        if text[start:].strip() or not ranges:
            ranges.append((start, len(text)))
        else:
            ranges[-1] = (ranges[-1][0], len(text))
    return ranges


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["a", " ", "\n", "\n\n", "#", "##", "\t"]), max_size=40),
    st.sampled_from(["\n\n", "#", " "]),
)
def test_split_steps_matches_its_first_definition(pieces, separator):
    text = "".join(pieces)
    assert split_steps(text, separator) == quadratic_split_steps(text, separator)


def test_split_steps_is_linear_on_blank_steps():
    def cpu_seconds(text):
        started = time.thread_time()
        split_steps(text)
        return time.thread_time() - started

    blank, normal = " \n\n" * 40000, "a\n\n" * 40000
    assert min(cpu_seconds(blank) for _ in range(3)) < 4 * min(cpu_seconds(normal) for _ in range(3)) + 0.01


def test_line_spans_cover_each_line_with_its_newline():
    assert line_spans("ab\ncd\ne", [1, 2, 3]) == [(0, 3, 1.0), (3, 6, 2.0), (6, 7, 3.0)]
    with pytest.raises(ValueError, match="1 line values for 2 lines"):
        line_spans("a\nb", [1])
