r"""Checking a final math answer against a ground truth with math-verify, in bounded time from any thread.

math-verify (sympy) evaluates what it parses: ``9^{9^{9}}`` is a big-integer power that holds the GIL for
hours, ``(10^{6})!`` takes seconds, braces nested 16 deep take math-verify tens of seconds, and its own
timeouts (``signal.alarm``) work in the main thread only, while verl calls reward functions from executor
threads. :func:`check_answer` therefore bounds every check three ways:

=====================================  ============================================================
limit                                  what is refused
=====================================  ============================================================
:data:`MAX_ANSWER_CHARS` (1000)        an answer (or ground truth) longer than this many characters
:data:`MAX_NESTING` (8)                brackets ``{ ( [`` nested deeper than this (math-verify's
                                       parse and comparison grow steeply with depth)
:data:`MAX_DIGITS` (1000)              an expression that would evaluate an exact number of more than
                                       about this many decimal digits: powers (``9^{9^{9}}``,
                                       ``10^{10^{10}}``), factorials (``(10^{6})!``, ``10!!!``),
                                       binomials; estimated on the parsed, unevaluated expression
``timeout_s`` (default                 anything else that runs longer (``\prod_{i=1}^{10^{7}} i``):
:data:`TIMEOUT_S`, 5 s)                the worker process doing the check is killed
=====================================  ============================================================

The first two are checked in the calling process (linear in the text); parsing, the digit estimate and
the comparison run in a pool of worker processes (at most :data:`WORKERS`, started on first use and
reused, so a check costs one pipe round trip more than math-verify itself). A refused answer is a
defined result, never a hang: :class:`Verdict` ``(correct=False, parsed=False, refused=True, reason)``.
A ground truth that is refused, unparseable, or that a worker cannot parse within ``timeout_s`` raises
``ValueError`` (a data set error, not a model's answer); :func:`ground_truth_text` says which ground
truths count as missing (None, NaN, pandas' NA, blank, ``"nan"``).

A worker killed on timeout is replaced on the next check (about half a second to import math-verify). A
worker also gets a CPU-time limit of ``timeout_s + 1`` s per check from the kernel (``RLIMIT_CPU``), so
one whose parent died mid-check cannot spin on: an idle worker exits when its parent's pipe closes.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import math
import numbers
import os
import selectors
import subprocess
import sys
import threading
import time
from decimal import Decimal
from typing import NamedTuple

MAX_ANSWER_CHARS = 1000
MAX_NESTING = 8
MAX_DIGITS = 1000
TIMEOUT_S = 5.0
MAX_TIMEOUT_S = 600.0
WORKERS = max(1, min(4, os.cpu_count() or 1))
# Waiting for a new worker to import math-verify is not part of a check's timeout.
STARTUP_TIMEOUT_S = 120.0

OPENING, CLOSING = "{([", "})]"
# What a missing value becomes when a data frame column is cast to str (compared lower-cased).
MISSING_MARKERS = ("nan", "none", "null", "<na>")
# sympy functions of integers whose value has about n log10(n) digits for an argument n.
GROWING_FUNCTIONS = ("factorial", "factorial2", "subfactorial", "binomial", "RisingFactorial", "FallingFactorial")


class Verdict(NamedTuple):
    """The result of :func:`check_answer`.

    Attributes:
        correct: math-verify accepts the answer for the ground truth.
        parsed: math-verify could parse the answer (False for a refused one).
        refused: the answer exceeded a limit or ``timeout_s`` (see the module docstring); it scores as wrong.
        reason: why it was refused or not parsed ("" when parsed and not refused).
    """

    correct: bool
    parsed: bool
    refused: bool = False
    reason: str = ""


def ground_truth_text(value, kind: type = numbers.Real) -> str | None:
    """``value`` as the text :func:`check_answer` reads, or None when it is a missing value.

    Missing: None, a NaN (Python, numpy), pandas' ``NA``/``NaT``, a blank string, or one of
    :data:`MISSING_MARKERS` (a missing value after ``astype(str)``; math-verify would read ``"nan"`` as
    ``a*n*n``). A float is written positionally (``1e+20`` would read as ``1 e + 20`` with Euler's e).

    Args:
        value: a string or a number of ``kind`` (``numbers.Real``, or ``numbers.Integral`` for integers
            only); numpy scalars are numbers.

    Raises:
        ValueError: for any other type (bool, list, ...) or an infinite number.
    """
    pandas = sys.modules.get("pandas")
    if value is None or (pandas is not None and (value is pandas.NA or value is pandas.NaT)):
        return None
    if isinstance(value, str):
        text = value.strip()
        return text if text and text.lower() not in MISSING_MARKERS else None
    if isinstance(value, numbers.Real) and value != value:  # NaN, whatever the number type asked for
        return None
    if isinstance(value, bool) or not isinstance(value, kind):
        kinds = "an integer" if kind is numbers.Integral else "a number"
        raise ValueError(f"ground_truth must be a string or {kinds}, got {type(value).__name__} {value!r:.80}")
    if isinstance(value, numbers.Rational):
        return str(value)
    if math.isinf(value):
        raise ValueError(f"ground_truth must be finite, got {value!r}")
    return format(Decimal(str(value)), "f")


def text_limit_problem(text: str) -> str:
    """Why ``text`` exceeds :data:`MAX_ANSWER_CHARS` or :data:`MAX_NESTING`, or "" when it does not.

    One pass over the text; an unbalanced closing bracket is ignored (depth never goes below 0).
    """
    if len(text) > MAX_ANSWER_CHARS:
        return f"longer than {MAX_ANSWER_CHARS} characters ({len(text)})"
    depth = deepest = 0
    for char in text:
        if char in OPENING:
            depth += 1
            deepest = max(deepest, depth)
        elif char in CLOSING:
            depth = max(0, depth - 1)
    if deepest > MAX_NESTING:
        return f"brackets nested {deepest} deep (more than {MAX_NESTING})"
    return ""


def check_answer(ground_truth: str, answer: str | None, timeout_s: float = TIMEOUT_S) -> Verdict:
    """Whether math-verify accepts ``answer`` for ``ground_truth``, within the limits of this module.

    Both are LaTeX or plain expressions, wrapped in ``$...$`` unless they contain a ``$``. The ground
    truth is always parsed, also when ``answer`` is None (no answer found: ``Verdict(False, False, False,
    "no answer")``), so a bad ground truth raises whatever the response.

    Args:
        ground_truth: the reference answer.
        answer: the model's final answer, or None.
        timeout_s: wall-clock bound of the check in a worker process (> 0).

    Raises:
        ValueError: the ground truth exceeds a limit, math-verify cannot parse it, or parsing it took longer
            than ``timeout_s``.
    """
    refusal = text_limit_problem(answer) if answer is not None else ""
    problem = text_limit_problem(ground_truth)
    if not problem:
        request = {"gold": ground_truth, "answer": None if refusal else answer, "timeout_s": timeout_s}
        replies, failure = _POOL.ask(request, replies=1 if request["answer"] is None else 2, timeout_s=timeout_s)
        problem = failure if not replies else replies[0].get("reason", "")
    if problem:
        raise ValueError(f"the ground truth {ground_truth[:80]!r} cannot be checked: {problem}")
    if answer is None:
        return Verdict(False, False, False, "no answer")
    if refusal or failure:
        return Verdict(False, False, True, f"the answer is {refusal}" if refusal else failure)
    status, reason = replies[1]["status"], replies[1].get("reason", "")
    return Verdict(status == "correct", status in ("correct", "wrong"), status == "refused", reason)


class _Worker:
    """One worker process running :func:`serve`, talked to through its stdin and stdout pipes."""

    def __init__(self):
        self.process = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # a Ctrl-C of the trainer's terminal is not the worker's
        )
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.process.stdout, selectors.EVENT_READ)
        self.buffer = b""
        try:
            ready = self.read(time.monotonic() + STARTUP_TIMEOUT_S)
        except (EOFError, ValueError):  # exited, or wrote something else
            ready = None
        if ready != {"ready": True}:
            self.close()
            raise RuntimeError(
                f"the answer-check worker ({sys.executable} {__file__}) did not start within {STARTUP_TIMEOUT_S} s; "
                "its error is in this process's stderr (is math-verify installed?)"
            )

    def read(self, deadline: float) -> dict | None:
        """The next reply line, or None when ``deadline`` passes first; ``EOFError`` if the process ended."""
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not self.selector.select(remaining):
                return None
            chunk = os.read(self.process.stdout.fileno(), 65536)
            if not chunk:
                raise EOFError(f"the answer-check worker exited with code {self.process.wait()}")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return json.loads(line)

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self.selector.close()
        for pipe in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):  # a request the process never read
                pipe.close()


class WorkerPool:
    """Up to ``size`` worker processes shared by the threads of this process; thread safe.

    A thread takes an idle worker (or starts one while fewer than ``size`` exist, or waits), sends one
    request and reads its replies until the deadline; a worker that misses it or dies is killed and not
    reused. After a fork the child process starts its own workers (the parent's pipes are not shared).
    """

    def __init__(self, size: int):
        self._size = size
        self._condition = threading.Condition()
        self._idle: list[_Worker] = []
        self._count = 0
        self._pid = os.getpid()

    def ask(self, request: dict, replies: int, timeout_s: float) -> tuple[list[dict], str]:
        """Send ``request`` and read up to ``replies`` replies within ``timeout_s``.

        Returns:
            ``(replies read, failure)``: ``failure`` is "" when all came, else why not (timeout, exit).
        """
        worker = self._take()
        received: list[dict] = []
        try:
            worker.process.stdin.write(json.dumps(request).encode() + b"\n")
            worker.process.stdin.flush()
            deadline = time.monotonic() + timeout_s
            while len(received) < replies:
                reply = worker.read(deadline)
                if reply is None:
                    return received, f"the check took longer than {timeout_s} s (worker killed)"
                received.append(reply)
            return received, ""
        except (OSError, EOFError, ValueError) as error:  # broken pipe, worker exited, garbled reply
            return received, f"the answer-check worker failed: {error}"
        finally:
            self._give_back(worker, healthy=len(received) == replies)

    def close(self) -> None:
        """Stop the idle workers (those in use stop when their pipes close with this process)."""
        with self._condition:
            for worker in self._idle:
                worker.close()
            self._count -= len(self._idle)
            self._idle.clear()

    def _take(self) -> _Worker:
        with self._condition:
            if os.getpid() != self._pid:
                self._idle, self._count, self._pid = [], 0, os.getpid()
            while not self._idle and self._count >= self._size:
                self._condition.wait()
            while self._idle:
                worker = self._idle.pop()
                if worker.process.poll() is None:
                    return worker
                worker.close()  # ended while idle (killed from outside): not this check's failure
                self._count -= 1
            self._count += 1
        try:
            return _Worker()
        except BaseException:
            self._give_back(None, healthy=False)
            raise

    def _give_back(self, worker: _Worker | None, healthy: bool) -> None:
        if worker is not None and not healthy:
            worker.close()
        with self._condition:
            if healthy:
                self._idle.append(worker)
            else:
                self._count -= 1
            self._condition.notify()


_POOL = WorkerPool(WORKERS)
atexit.register(_POOL.close)


# ---------------------------------------------------------------- the worker process


def largest_exact_digits(expression) -> float:
    """Upper bound of the decimal digits of the largest exact number sympy computes evaluating ``expression``.

    ``expression`` is math-verify's parse (a sympy expression, unevaluated, or a matrix of them); each
    subexpression made of integers and rationals only gets a bound of ``log10 |value|``: an integer its
    own (the larger of numerator and denominator), a sum or product the sum of its terms' plus
    ``log10(terms)``, a power ``b^e`` ``|e| log10 |b|`` (0 for ``|b| <= 1``), a factorial-like function of ``n``
    (:data:`GROWING_FUNCTIONS`) ``n log10 n``, any other function its largest argument's. Symbols, floats
    and constants make a subexpression inexact (floats are computed in fixed precision).
    """
    import sympy

    largest = 0.0

    def digits(node) -> float | None:
        nonlocal largest
        children = list(node) if isinstance(node, sympy.MatrixBase) else getattr(node, "args", ())
        child_digits = [digits(child) for child in children]
        if isinstance(node, sympy.Rational):
            value = max(abs(node.p), node.q)
            result = math.log10(value) if value > 1 else 0.0
        elif isinstance(node, sympy.MatrixBase) or not isinstance(node, sympy.Basic) or None in child_digits:
            return None
        elif isinstance(node, sympy.Pow):
            base, exponent = child_digits
            result = 0.0 if base == 0.0 else _power_of_ten(exponent) * base
        elif isinstance(node, sympy.Add | sympy.Mul):
            result = sum(child_digits) + math.log10(len(child_digits))
        elif isinstance(node, sympy.Function) and child_digits:
            result = max(child_digits)
            if type(node).__name__ in GROWING_FUNCTIONS:
                result = _power_of_ten(result) * max(result, 1.0)
        else:
            return None
        largest = max(largest, result)
        return result

    digits(expression)
    return largest


def _power_of_ten(exponent: float) -> float:
    return math.inf if exponent > 300 else 10.0**exponent


def _parse(text: str):
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    return parse(
        text if "$" in text else f"${text}$",
        extraction_config=[LatexExtractionConfig(), ExprExtractionConfig()],
        fallback_mode="no_fallback",
        parsing_timeout=None,
    )


def _parsed_status(text: str) -> tuple[list, dict]:
    """``(math-verify's parse, reply)``: the reply's status is ``ok``, ``unparseable`` or ``refused``."""
    try:
        parsed = _parse(text)
        digits = max((largest_exact_digits(item) for item in parsed), default=0.0)
    except RecursionError:
        return [], {"status": "refused", "reason": "an expression nested too deeply to analyse"}
    except Exception as error:  # math-verify raises little of its own; anything else means unparseable
        return [], {"status": "unparseable", "reason": f"{type(error).__name__}: {error}"[:200]}
    if not parsed:
        return [], {"status": "unparseable", "reason": "math-verify cannot parse it"}
    if digits > MAX_DIGITS:
        return [], {"status": "refused", "reason": f"a number of more than {MAX_DIGITS} digits (about {digits:.3g})"}
    return parsed, {"status": "ok"}


def _limit_cpu(timeout_s: float) -> None:
    """The kernel ends this process once it has used ``timeout_s + 1`` more CPU seconds (SIGXCPU)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    used = usage.ru_utime + usage.ru_stime
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    soft = math.ceil(used + timeout_s) + 1
    resource.setrlimit(resource.RLIMIT_CPU, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


def serve() -> None:
    """The worker process's loop: one JSON request per stdin line, one JSON reply line per parsed text.

    A request ``{"gold", "answer", "timeout_s"}`` gets the ground truth's reply (``status`` ``ok``,
    ``unparseable`` or ``refused``, with a ``reason`` unless ``ok``) and, when ``answer`` is not None, the
    answer's (``correct``, ``wrong``, ``unparseable`` or ``refused``; ``skipped`` after a bad ground truth).
    Python's ``sys.stdout`` goes to stderr, so nothing printed by a library can garble a reply.
    """
    import logging
    import resource

    logging.disable(logging.WARNING)  # math-verify warns on every call that its own timeout is off
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core file when the CPU limit ends the process
    from math_verify import verify

    _parse("1")  # import and warm up math-verify's parser before saying ready
    output = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())

    def reply(message: dict) -> None:
        output.write(json.dumps(message).encode() + b"\n")
        output.flush()

    reply({"ready": True})
    for line in sys.stdin.buffer:
        request = json.loads(line)
        _limit_cpu(request["timeout_s"])
        gold, gold_reply = _parsed_status(request["gold"])
        reply(gold_reply)
        if request["answer"] is None:
            continue
        predicted, answer_reply = _parsed_status(request["answer"]) if gold else ([], {"status": "skipped"})
        if answer_reply["status"] == "ok":
            try:
                correct = verify(gold, predicted, timeout_seconds=None)
            except Exception:  # a comparison sympy cannot make: the answer is not shown equal
                correct = False
            answer_reply = {"status": "correct" if correct else "wrong"}
        reply(answer_reply)


if __name__ == "__main__":
    serve()
