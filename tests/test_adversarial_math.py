r"""Adversarial inputs to the math rewards and the PRM endpoint client: each case is an input and the clear
error (type and message fragment) or the defined result it must get.

Covered: answers that explode when evaluated (power towers, factorials, huge literals, deep nesting) checked
from threads; degenerate texts for the answer scan (``\boxed{`` runs, unbalanced braces); ground truths
that are missing (NaN, pandas' NA, ``"nan"``), unparseable or unusable; option values of every wrong kind
(inf, nan, bool, str, negative, None, too large) at configuration time; PRM endpoints that drop, trickle,
speak another protocol or answer garbage, served by real sockets on 127.0.0.1. Time bounds are ratios
(degenerate against normal input of the same size, and doubling the size) or relative to a configured
deadline.
"""

import contextlib
import json
import math
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd
import pytest

from bot_grpo_verl.reward.token_rewards import parse_reward_result, split_steps
from bot_grpo_verl.rewards import answer_check, arithmetic_steps, math_prm, prm_endpoint, prm_formats, prm_http

TOWER = "9^{9^{9}}"
# (correct, parsed, refused) of a Verdict
CORRECT, WRONG = (True, True, False), (False, True, False)
UNPARSED, REFUSED = (False, False, False), (False, False, True)
MISSING = [None, float("nan"), np.nan, np.float32("nan"), pd.NA, "", "   ", "nan", "None", "<NA>"]


def missing_id(value) -> str:
    return f"missing-{type(value).__name__}-{value!r}"


def in_thread(function, *args, **kwargs):
    """``function(*args, **kwargs)`` run in another thread, as verl's reward executor calls rewards."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(function, *args, **kwargs).result(timeout=120)


# ---------------------------------------------------------------- answer checking (class 1)

ANSWERS = [
    pytest.param("3", TOWER, REFUSED, "more than 1000 digits", id="power-tower"),
    pytest.param("3", "10^{10^{10}}", REFUSED, "more than 1000 digits", id="power-of-power-of-ten"),
    pytest.param("3", "2^" * 300 + "1", REFUSED, "digits", id="unbraced-power-chain"),
    pytest.param("3", "x^{" + TOWER + "}", REFUSED, "digits", id="tower-in-a-symbolic-exponent"),
    pytest.param("3", "\\frac{" + TOWER + "}{3}", REFUSED, "digits", id="tower-in-a-fraction"),
    pytest.param("3", TOWER + "\\cdot 0", REFUSED, "digits", id="tower-times-zero"),
    pytest.param("3", "0^{" + TOWER + "}", REFUSED, "digits", id="zero-to-a-tower"),
    pytest.param("3", "10^{-10^{10}}", REFUSED, "digits", id="negative-huge-exponent"),
    pytest.param("3", "\\begin{pmatrix} " + TOWER + " \\end{pmatrix}", REFUSED, "digits", id="tower-in-a-matrix"),
    pytest.param("3", "(10^{6})!", REFUSED, "digits", id="factorial-of-a-million"),
    pytest.param("3", "10!!!", REFUSED, "digits", id="iterated-factorial"),
    pytest.param("3", "10^{1001}", REFUSED, "digits", id="literal-power-over-the-digit-limit"),
    pytest.param("3", "1" * 1001, REFUSED, "longer than 1000 characters", id="huge-literal"),
    pytest.param("3", "{" * 9 + "3" + "}" * 9, REFUSED, "nested 9 deep", id="nested-braces"),
    pytest.param("3", "(" * 9 + "3" + ")" * 9, REFUSED, "nested 9 deep", id="nested-parentheses"),
    pytest.param("3", "\\frac{" * 9 + "3" + "}{1}" * 9, REFUSED, "nested 9 deep", id="nested-fractions"),
    pytest.param("3", "\\left(" * 9 + "3" + "\\right)" * 9, REFUSED, "nested 9 deep", id="nested-left-right"),
    pytest.param("3", "{" * 8 + "3" + "}" * 8, CORRECT, "", id="braces-at-the-nesting-limit"),
    pytest.param("3", "\\frac{" * 8 + "3" + "}{1}" * 8, CORRECT, "", id="fractions-at-the-nesting-limit"),
    pytest.param("1", "1^{10^{10}}", CORRECT, "", id="one-to-a-huge-power"),
    pytest.param("1024", "2^{10}", CORRECT, "", id="small-power"),
    pytest.param("3628800", "10!", CORRECT, "", id="small-factorial"),
    pytest.param("120", "\\binom{10}{3}", CORRECT, "", id="small-binomial"),
    pytest.param("3", "10^{1000}", WRONG, "", id="power-at-the-digit-limit"),
    pytest.param("e^{x^{2}}", "e^{x^2}", CORRECT, "", id="symbolic-tower-is-no-number"),
    pytest.param("3", "\\sum_{i=1}^{10^{9}} i", WRONG, "", id="huge-symbolic-sum"),
    pytest.param("\\frac{1}{2}", "\\frac{\\frac{1}{1}}{2}", CORRECT, "", id="nested-frac"),
    pytest.param("3", "\\sqrt{\\sqrt{\\sqrt{6561}}}", CORRECT, "", id="nested-roots"),
    pytest.param("3", "３", UNPARSED, "cannot parse", id="fullwidth-digit"),
    pytest.param("3", "٣", UNPARSED, "cannot parse", id="arabic-indic-digit"),
    pytest.param("3", "", UNPARSED, "cannot parse", id="empty-answer"),
    pytest.param("3", " \t\n", UNPARSED, "cannot parse", id="whitespace-answer"),
    pytest.param("3", None, UNPARSED, "no answer", id="no-answer"),
    pytest.param("3", "{3", UNPARSED, "cannot parse", id="unbalanced-open-brace"),
    pytest.param("3", "\x00", UNPARSED, "cannot parse", id="nul-character"),
    pytest.param("3", "\ud800", UNPARSED, "cannot parse", id="lone-surrogate"),
    pytest.param("3", "-" * 500 + "3", UNPARSED, "cannot parse", id="500-minus-signs"),
    pytest.param("0.5", "\\frac{1}{2}", CORRECT, "", id="fraction-for-a-decimal"),
    pytest.param("3", "3 \\text{ apples}", CORRECT, "", id="units-text"),
    pytest.param("\\{3, 4\\}", "\\{4, 3\\}", CORRECT, "", id="sets"),
]


@pytest.mark.parametrize(("ground_truth", "answer", "expected", "reason"), ANSWERS)
def test_answer_checks_from_a_thread(ground_truth, answer, expected, reason):
    """The limits decide these (a generous timeout, so a loaded machine cannot turn a result into a refusal)."""
    verdict = in_thread(answer_check.check_answer, ground_truth, answer, timeout_s=60.0)
    assert verdict[:3] == expected and reason in verdict.reason


SLOW_ANSWERS = [
    pytest.param("\\binom{10^{7}}{5000000}", id="binomial-evaluated-while-parsing"),
    pytest.param("\\prod_{i=1}^{10^{7}} i", id="huge-product"),
]


@pytest.mark.parametrize("answer", SLOW_ANSWERS)
def test_an_answer_past_the_timeout_is_refused_and_the_worker_replaced(answer):
    """What the limits miss, the timeout stops: the worker is killed and the next check gets a new one."""
    verdict = in_thread(answer_check.check_answer, "3", answer, timeout_s=1.0)
    assert verdict[:3] == REFUSED and "longer than 1.0 s" in verdict.reason
    assert in_thread(answer_check.check_answer, "3", "3")[:3] == CORRECT


def test_an_exploding_answer_checked_in_a_thread_returns():
    """In a fresh interpreter, as a verl reward worker: ``9^{9^{9}}`` checked from a thread used to freeze it
    (a big-integer power holding the GIL; math-verify's signal timeout is off outside the main thread)."""
    script = (
        "import threading; from bot_grpo_verl.rewards import math_prm\n"
        "out = []\n"
        f"thread = threading.Thread(target=lambda: out.append(math_prm.check_answer('3', {TOWER!r})))\n"
        "thread.start(); thread.join(); print(tuple(out[0][:3]))"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == str(REFUSED)


BAD_GROUND_TRUTHS = [
    pytest.param("\\frac{", "3", "math-verify cannot parse it", id="unparseable"),
    pytest.param("\\frac{", None, "math-verify cannot parse it", id="unparseable-without-an-answer"),
    pytest.param("\\frac{", "1" * 1001, "math-verify cannot parse it", id="unparseable-with-a-refused-answer"),
    pytest.param(TOWER, "3", "more than 1000 digits", id="power-tower"),
    pytest.param("1" * 1001, "3", "longer than 1000 characters", id="huge-literal"),
    pytest.param("{" * 9 + "3" + "}" * 9, None, "nested 9 deep", id="nested-braces"),
]


@pytest.mark.parametrize(("ground_truth", "answer", "message"), BAD_GROUND_TRUTHS)
def test_a_bad_ground_truth_raises_whatever_the_answer(ground_truth, answer, message):
    with pytest.raises(ValueError, match=f"the ground truth .* cannot be checked: .*{message}"):
        in_thread(answer_check.check_answer, ground_truth, answer)


# ---------------------------------------------------------------- the answer scan (class 2)

FINAL_ANSWERS = [
    pytest.param("\\boxed{" * 8000, None, id="boxed-run"),
    pytest.param("\\boxed{3}" + "\\boxed{" * 8000, "3", id="answer-then-boxed-run"),
    pytest.param("{" * 5000 + "\\boxed{4}", "4", id="unclosed-braces-before"),
    pytest.param("\\boxed{4}" + "}" * 5000, "4", id="stray-closers-after"),
    pytest.param("}}}}\\boxed{7}", "7", id="stray-closers-before"),
    pytest.param("\\boxed{1} then \\boxed{2}", "2", id="multiple-boxed"),
    pytest.param("\\boxed{a \\boxed{b}}", "b", id="nested-boxed"),
    pytest.param("\\boxed{5} and an unclosed \\boxed{6", "5", id="unbalanced-last-box"),
    pytest.param("\\boxed{\\frac{\\frac{1}{2}}{3}}", "\\frac{\\frac{1}{2}}{3}", id="nested-frac-boxed"),
    pytest.param("\\boxed{}", "", id="empty-box"),
    pytest.param("x = 3, so 1,000", "1,000", id="number-fallback"),
    pytest.param("the answer is ٣", "٣", id="unicode-digit-fallback"),
    pytest.param("", None, id="empty"),
    pytest.param("no digits at all", None, id="no-number"),
]


@pytest.mark.parametrize(("text", "answer"), FINAL_ANSWERS)
def test_find_final_answer_on_degenerate_text(text, answer):
    found = math_prm.find_final_answer(text)
    assert (text[found[0] : found[1]] if found else None) == answer


def cpu_times(function, *texts, repeats=7) -> list[float]:
    """Per text, the least CPU time of ``function(text)`` over ``repeats`` interleaved rounds (this thread's
    CPU time: other processes on a shared machine do not count)."""
    times = [[] for _ in texts]
    for _ in range(repeats):
        for text, spent in zip(texts, times, strict=True):
            started = time.thread_time()
            function(text)
            spent.append(time.thread_time() - started)
    return [min(spent) for spent in times]


def assert_linear(function, degenerate, normal, size):
    """``degenerate(n)`` and ``normal(n)`` build texts of ``n`` characters: the degenerate one costs at most a
    constant factor more than the normal one, and four times the size at most about four times as much (a
    quadratic scan: 16 times; the bound of 8 leaves room for millisecond timing noise)."""
    small, large, same_size = degenerate(size), degenerate(4 * size), normal(size)
    assert len(small) == len(same_size) == size
    small_time, large_time, normal_time = cpu_times(function, small, large, same_size)
    assert small_time < 10 * normal_time
    assert large_time < 8 * small_time


def repeated(unit: str):
    return lambda size: (unit * (size // len(unit) + 1))[:size]


@pytest.mark.parametrize(
    "degenerate",
    [repeated("\\boxed{"), repeated("{"), repeated("}"), repeated("1,")],
    ids=["boxed", "open", "close", "commas"],
)
def test_the_answer_scan_is_linear(degenerate):
    assert_linear(math_prm.find_final_answer, degenerate, repeated("Then \\frac{1}{2} + x^{2} = 3. "), 20000)


def test_step_texts_are_linear_in_separator_runs():
    """One step followed by a huge separator run against ordinary steps, each with its separator."""

    def step_texts(text):
        return math_prm.step_texts(text, split_steps(text), "\n\n")

    assert_linear(step_texts, lambda size: "a" + "\n\n" * ((size - 1) // 2), repeated("One step.\n\n"), 40001)


# ---------------------------------------------------------------- math_prm.compute_score (classes 1, 2, 8)


class ConstantPRM:
    """A PRM stand-in: every step has P(correct) = 0.75 (the PRMs themselves are tested in test_math_prm.py)."""

    def probabilities(self, question, steps):
        return [0.75] * len(steps)


@pytest.fixture
def constant_prm(monkeypatch):
    monkeypatch.setattr(math_prm.MathPRMConfig, "scorer", lambda self: ConstantPRM())


MATH_RESULTS = [
    pytest.param("so \\boxed{" + TOWER + "}", "3", {}, dict(score=-1.0, answer_parsed=0.0, answer_refused=1.0),
                 id="tower-answer-scores-wrong-and-is-counted"),
    pytest.param("\\boxed{" + "{" * 9 + "3" + "}" * 9 + "}", "3", {}, dict(score=-1.0, answer_refused=1.0),
                 id="nested-answer-refused"),
    pytest.param("\\boxed{" * 8000, "3", {}, dict(score=-1.0, answer_found=0.0, answer_refused=0.0),
                 id="boxed-run"),
    pytest.param("\\boxed{1} then \\boxed{2}", "2", {}, dict(score=1.0, acc=1.0), id="last-of-multiple-boxed"),
    pytest.param("\\boxed{2} and \\boxed{3", "2", {}, dict(score=1.0, acc=1.0), id="unbalanced-last-box"),
    pytest.param("x" * 100 + " \\boxed{2}", "2", {"max_response_chars": 50},
                 dict(score=-1.0, answer_found=0.0, truncated=1.0), id="answer-past-the-scored-prefix"),
    pytest.param("so \\boxed{٣}", "3", {}, dict(score=-1.0, answer_found=1.0, answer_parsed=0.0),
                 id="unicode-digit-answer"),
    pytest.param("so \\boxed{}", "3", {}, dict(score=-1.0, answer_found=1.0, answer_parsed=0.0), id="empty-box"),
    pytest.param(" \n\n\t", "3", {}, dict(score=-1.0, empty_response=1.0, answer_found=0.0),
                 id="whitespace-response"),
    pytest.param("answer: 2", np.int64(2), {}, dict(score=1.0, acc=1.0), id="numpy-int-ground-truth"),
    pytest.param("so \\boxed{\\frac12}", np.float32(0.5), {}, dict(score=1.0), id="numpy-float-ground-truth"),
    pytest.param("so \\boxed{10^{20}}", 1e20, {}, dict(score=1.0), id="float-ground-truth-written-positionally"),
    pytest.param("a\n\nb", float("nan"), {"missing_ground_truth": "process_only"}, dict(score=0.5, acc=0.0),
                 id="nan-ground-truth-process-only"),
    pytest.param("a\n\nb", "nan", {"missing_ground_truth": "process_only"}, dict(score=0.5, acc=0.0),
                 id="nan-string-ground-truth-process-only"),
]  # fmt: skip


@pytest.mark.parametrize(("response", "ground_truth", "options", "expected"), MATH_RESULTS)
def test_math_prm_results(constant_prm, response, ground_truth, options, expected):
    result = in_thread(math_prm.compute_score, "math", response, ground_truth, None, **options)
    assert {key: result[key] for key in expected} == expected
    parse_reward_result(result, len(response))


MATH_ERRORS = [
    *[
        pytest.param("so \\boxed{2}", missing, "ground_truth is missing", id=missing_id(missing))
        for missing in MISSING
    ],
    pytest.param("no answer here", "\\frac{", "math-verify cannot parse it", id="unparseable-ground-truth-no-answer"),
    pytest.param("", "\\frac{", "math-verify cannot parse it", id="unparseable-ground-truth-empty-response"),
    pytest.param("so \\boxed{2}", TOWER, "more than 1000 digits", id="tower-ground-truth"),
    pytest.param("so \\boxed{2}", True, "must be a string or a number", id="bool-ground-truth"),
    pytest.param("so \\boxed{2}", [2], "must be a string or a number", id="list-ground-truth"),
    pytest.param("so \\boxed{2}", float("inf"), "must be finite", id="infinite-ground-truth"),
    pytest.param(None, "2", "solution_str must be a string", id="none-response"),
    pytest.param(b"\\boxed{2}", "2", "solution_str must be a string", id="bytes-response"),
]  # fmt: skip


@pytest.mark.parametrize(("response", "ground_truth", "message"), MATH_ERRORS)
def test_math_prm_errors(constant_prm, response, ground_truth, message):
    with pytest.raises(ValueError, match=message):
        in_thread(math_prm.compute_score, "math", response, ground_truth, None)


# ---------------------------------------------------------------- arithmetic_steps.compute_score

ARITHMETIC_RESULTS = [
    pytest.param("1 + 1 = 2\n\n\\boxed{" + TOWER + "}", "3", dict(score=0.0, answer_refused=1.0, steps_correct=1.0),
                 id="tower-answer"),
    pytest.param("\\boxed{" * 5000, "3", dict(score=0.0, answer_found=0.0), id="boxed-run"),
    pytest.param("1 + 1 = 2\n\n\\boxed{2}", np.int64(2), dict(score=1.0, answer_refused=0.0), id="numpy-int"),
    pytest.param("١ + ١ = ٢\n\n\\boxed{2}", "2", dict(score=1.0, steps_correct=1.0), id="unicode-digit-step"),
    pytest.param("9" * 31 + " + 1 = 1" + "0" * 31 + "\n\n\\boxed{2}", "2", dict(steps_correct=0.0),
                 id="step-over-30-digits"),
]  # fmt: skip


@pytest.mark.parametrize(("response", "ground_truth", "expected"), ARITHMETIC_RESULTS)
def test_arithmetic_results(response, ground_truth, expected):
    result = in_thread(arithmetic_steps.compute_score, "arithmetic", response, ground_truth, None)
    assert {key: result[key] for key in expected} == expected


ARITHMETIC_ERRORS = [
    *[pytest.param(missing, "ground_truth is missing", id=missing_id(missing)) for missing in MISSING],
    pytest.param(2.0, "must be a string or an integer", id="float"),
    pytest.param(True, "must be a string or an integer", id="bool"),
    pytest.param("\\frac{", "math-verify cannot parse it", id="unparseable"),
    pytest.param(TOWER, "more than 1000 digits", id="power-tower"),
]  # fmt: skip


@pytest.mark.parametrize(("ground_truth", "message"), ARITHMETIC_ERRORS)
def test_arithmetic_ground_truth_errors(ground_truth, message):
    with pytest.raises(ValueError, match=message):
        in_thread(arithmetic_steps.compute_score, "arithmetic", "no box here", ground_truth, None)


# ---------------------------------------------------------------- options at configuration time (class 5)


def bad_options(values_by_name: dict) -> list:
    """One case ``({name: value}, name)`` per option name and bad value."""
    return [
        pytest.param({name: value}, name, id=f"{name}={value!r}")
        for name, values in values_by_name.items()
        for value in values
    ]


MATH_PRM_BAD_OPTIONS = bad_options(
    {
        "prm_timeout_s": [math.inf, math.nan, True, "5", -1.0, 0, None, 1e300, 3601],
        "prm_retries": [1.5, -1, True, 11, None, "2", 10**30],
        "prm_backoff_s": [math.inf, -0.1, 61, True],
        "prm_batch_size": [0, True, "4", 2.5],
        "prm_max_tokens": [0, math.inf, -5],
        "prm_endpoint": ["localhost:8000", "ftp://host", "http://", 123],
        "prm_step_tag": ["", 5],
        "prm_trust_remote_code": ["false", 1, None],
        "step_separator": ["", None, 5],
        "softmin_temperature": [0, math.inf, math.nan],
        "outcome_weight": [math.nan, 1.5, -0.1, True],
        "clip": [0, math.inf, math.nan, -1.0],
        "max_response_chars": [0, 1.5, True, None],
        "answer_timeout_s": [0, math.inf, 601, True, "5"],
        "symmetric": ["false", 1, None],
        "missing_ground_truth": ["skip", None],
        "aggregation": ["mean", None],
        "question_key": [None, 1],
        "prm_format": ["orm", None],
    }
)


@pytest.mark.parametrize(("options", "name"), MATH_PRM_BAD_OPTIONS)
def test_math_prm_options_are_refused_when_the_config_is_built(options, name):
    with pytest.raises(ValueError, match=name):
        math_prm.MathPRMConfig(**options)
    with pytest.raises(ValueError, match=name):  # the same through verl's reward_kwargs
        math_prm.compute_score("math", "so \\boxed{2}", "2", None, **options)


ARITHMETIC_BAD_OPTIONS = bad_options(
    {
        "noise": [math.inf, math.nan, True, -1.0, "0.5", None, 1e7],
        "scale": [0, math.inf, 1e300, True, -2.0, "2"],
        "step_value": [math.nan, 0, -1, 1e7],
        "clip": [math.inf, 0, math.nan, 1e7],
        "step_separator": ["", None],
        "answer_timeout_s": [0, math.nan, 601],
    }
)


@pytest.mark.parametrize(("options", "name"), ARITHMETIC_BAD_OPTIONS)
def test_arithmetic_options_are_refused_when_the_config_is_built(options, name):
    with pytest.raises(ValueError, match=name):
        arithmetic_steps.ArithmeticStepsConfig(**options)


@pytest.mark.parametrize(
    ("score", "options", "message"),
    [
        (math_prm.compute_score, {"prm_formatt": "qwen"}, "unknown math_prm option"),
        (math_prm.compute_score, {"prm_backend": "endpoint", "prm_tokenizer": "x"}, "needs prm_endpoint"),
        (arithmetic_steps.compute_score, {"temperature": 1.0}, "unknown arithmetic_steps option"),
    ],
)
def test_unknown_and_inconsistent_options_are_named(score, options, message):
    with pytest.raises(ValueError, match=message):
        score("math", "so \\boxed{2}", "2", None, **options)


def test_the_largest_valid_options_give_finite_values():
    config = arithmetic_steps.ArithmeticStepsConfig(step_value=1e6, scale=1e6, noise=1e6)
    assert all(math.isfinite(value) for value in config.step_values([True, False] * 50, "text"))
    math_prm.MathPRMConfig(prm_timeout_s=3600, prm_retries=10, prm_backoff_s=60, answer_timeout_s=600)


# ---------------------------------------------------------------- the PRM endpoint transport (class 7)


class RawServer:
    """A TCP server on 127.0.0.1: reads each HTTP request, then ``respond(connection, server)`` writes raw bytes."""

    def __init__(self, respond):
        self.respond = respond
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.requests = 0
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped.is_set():
            with contextlib.suppress(TimeoutError):
                connection, _ = self.listener.accept()
                threading.Thread(target=self._handle, args=(connection,), daemon=True).start()

    def _handle(self, connection):
        with connection, contextlib.suppress(OSError):
            data = b""
            while b"\r\n\r\n" not in data or len(data) < self._request_length(data):
                chunk = connection.recv(65536)
                if not chunk:
                    return
                data += chunk
            self.requests += 1
            self.respond(connection, self)

    @staticmethod
    def _request_length(data: bytes) -> int:
        head = data.partition(b"\r\n\r\n")[0]
        lengths = [line[15:] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
        return len(head) + 4 + int(lengths[0])

    def close(self):
        self.stopped.set()
        self.thread.join(timeout=5)
        self.listener.close()


def http_answer(status: int, body: bytes, extra_headers: str = "") -> bytes:
    head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\nConnection: close\r\n{extra_headers}\r\n"
    return head.encode() + body


def sends(data: bytes):
    return lambda connection, server: connection.sendall(data)


def trickles(data: bytes, delay_s: float = 0.05):
    def respond(connection, server):
        for byte in data:
            if server.stopped.is_set():
                return
            connection.sendall(bytes([byte]))
            time.sleep(delay_s)

    return respond


def json_answer(payload) -> bytes:
    return http_answer(200, json.dumps(payload).encode())


GOOD_PAYLOAD = {"data": [{"index": 0, "data": [[0.2, 0.8]]}]}
GOOD = json_answer(GOOD_PAYLOAD)
TRICKLED = http_answer(200, b" " * 400 + json.dumps(GOOD_PAYLOAD).encode())  # valid, but takes 20 s to arrive

ENDPOINT_FAILURES = [
    # (respond, attempts made with prm_retries=1, message fragment)
    pytest.param(sends(GOOD[: GOOD.index(b"\r\n\r\n") + 10]), 2, "without sending complete message body",
                 id="dropped-mid-body"),
    pytest.param(sends(b"SSH-2.0-OpenSSH_9.6\r\n"), 2, "RemoteProtocolError", id="not-http"),
    pytest.param(sends(b""), 2, "Server disconnected without sending a response",
                 id="closed-without-answer"),
    pytest.param(trickles(TRICKLED), 2, "deadline of 0.5 s", id="trickled-body"),
    pytest.param(trickles(b"HTTP/1.1 200 OK\r\n" + b"X-Slow: y\r\n" * 40), 2, "deadline of 0.5 s",
                 id="trickled-headers"),
    pytest.param(sends(http_answer(200, b"<html>not json</html>")), 2, "not JSON", id="html-body"),
    pytest.param(sends(http_answer(200, b"[" * 100000)), 2, "not JSON (RecursionError)", id="deeply-nested-json"),
    pytest.param(sends(http_answer(503, b"overloaded")), 2, "HTTP 503 overloaded", id="http-503"),
    pytest.param(sends(http_answer(429, b"slow down")), 2, "HTTP 429", id="http-429"),
    pytest.param(sends(http_answer(404, b"no such route")), 1, "rejected the request: HTTP 404", id="http-404"),
    pytest.param(sends(http_answer(301, b"", "Location: http://elsewhere/\r\n")), 1, "redirects to http://elsewhere/",
                 id="redirect"),
    pytest.param(sends(json_answer({"result": []})), 1, "without a 'data' list", id="no-data-list"),
    pytest.param(sends(json_answer({"data": [1, 2]})), 1, "list of objects", id="data-not-objects"),
    pytest.param(sends(json_answer({"data": [{"index": 5, "data": [[0.2, 0.8]]}]})), 1, "indices", id="bad-indices"),
    pytest.param(sends(json_answer({"data": [{"index": 0, "data": [[True, False]]}]})), 1,
                 "not a probability distribution", id="bool-probabilities"),
    pytest.param(sends(json_answer({"data": [{"index": 0, "data": [[0.5, "0.5"]]}]})), 1,
                 "not a probability distribution", id="string-probability"),
    pytest.param(sends(json_answer([1, 2, 3])), 1, "without a 'data' list", id="json-list"),
]  # fmt: skip


def endpoint(url: str, retries: int = 1) -> prm_endpoint.EndpointPRM:
    return prm_endpoint.EndpointPRM(prm_formats.FORMATS["qwen"], url, None, 0.5, retries, 0.0)


@pytest.mark.parametrize(("respond", "attempts", "message"), ENDPOINT_FAILURES)
def test_endpoint_failures_are_named_prm_endpoint_errors(respond, attempts, message):
    server = RawServer(respond)
    try:
        started = time.monotonic()
        with pytest.raises(
            prm_http.PRMEndpointError, match=rf"PRM endpoint {server.url}/pooling .*{re.escape(message)}"
        ):
            in_thread(endpoint(server.url).probabilities, [[1, 2, 3]], [[2]])
        elapsed = time.monotonic() - started
    finally:
        server.close()
    assert server.requests == attempts
    assert elapsed < 0.25 * 20.0  # far below what a trickling server needs (20 s); each attempt ends at 0.5 s


def test_a_good_answer_passes_the_transport():
    server = RawServer(sends(GOOD))
    try:
        assert in_thread(endpoint(server.url).probabilities, [[1, 2, 3]], [[2]]) == [[0.8]]
    finally:
        server.close()


def test_an_endless_answer_is_refused_at_the_size_cap(monkeypatch):
    monkeypatch.setattr(prm_http, "MAX_ANSWER_BYTES", 1000)
    server = RawServer(sends(http_answer(200, b" " * 5000)))
    try:
        with pytest.raises(prm_http.PRMEndpointError, match="answered more than 1000 bytes"):
            endpoint(server.url).probabilities([[1, 2, 3]], [[2]])
    finally:
        server.close()
    assert server.requests == 1


def test_a_worker_left_alone_on_a_runaway_check_is_ended_by_the_kernel():
    """A worker whose parent no longer reads it (e.g. died mid-check) does not spin on: its CPU-time limit of
    about ``timeout_s + 1`` s ends it (SIGXCPU)."""
    worker = answer_check._Worker()
    try:
        request = {"gold": "3", "answer": "\\prod_{i=1}^{10^{7}} i", "timeout_s": 1.0}
        worker.process.stdin.write(json.dumps(request).encode() + b"\n")
        worker.process.stdin.flush()
        assert worker.process.wait(timeout=60) == -signal.SIGXCPU
    finally:
        worker.close()
