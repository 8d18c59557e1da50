"""A seeded generator of the token-credit tasks: transform the prompt's own letters, every output letter checkable.

Each :class:`Transformation` asks for one of :data:`KINDS` applied to a list of letters from :data:`ALPHABET`,
written with single spaces::

    reverse: c a f b          ->  b f a c
    sort: c a f b             ->  a b c f
    replace a with d: c a f b ->  c d f b

The answer is the transformed list, letters separated by single spaces. The byte-level BPE tokenizer the demo
trains keeps every ``" x"`` one token (Qwen2's pre-tokenizer splits before a space), so a response is one token
per letter plus EOS, and the correctness of every token is known: letter ``i`` is right when it is the answer's
letter ``i`` (``bot_grpo_verl/rewards/token_credit.py``). Lists hold :data:`MIN_ITEMS` to :data:`MAX_ITEMS` letters,
drawn uniformly, so responses span 8 to 64 tokens (EOS included) across prompts.

In the free-length family (:data:`TOKEN_CREDIT_PREFIX`) any prefix of the answer with at least :data:`MIN_ITEMS`
letters is right, and the warm start's corpus writes prefixes of uniformly drawn lengths, so the lengths of one
prompt's responses vary too (up to 7 to 63 letters)::

    reverse, at least 7: c a f b d e h g a  ->  a g h e d b f (or a g h e d b f a c)
"""

from __future__ import annotations

import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bot_grpo_verl.__main__ import reward_path
from demo import react_corpus
from demo.react_corpus import draw_distinct
from demo.settings import DemoSettings
from demo.tasks import Task, load_reward_file

DATA_SOURCE = "token_credit"
ALPHABET = "abcdefgh"
KINDS = ("reverse", "sort", "replace")
MIN_ITEMS, MAX_ITEMS = 7, 63
TOKEN_CREDIT_REWARD = reward_path("token_credit")  # the installed reward file (in a clone: bot_grpo_verl/rewards/)


@dataclass(frozen=True)
class Transformation:
    """One problem: apply ``kind`` to ``items``.

    Attributes:
        kind: one of :data:`KINDS`.
        items: the prompt's letters (each one letter of :data:`ALPHABET`).
        old, new: for ``replace``, the letter to replace (one of ``items``) and its replacement (another letter);
            None for the other kinds.
        min_items: the fewest letters a right answer holds: any prefix of the transformed list at least this long
            is right (the free-length family); None: only the whole list.
        answer_items: how many letters :attr:`response` (the warm start's corpus) writes, at least ``min_items``;
            None: all.
    """

    kind: str
    items: tuple[str, ...]
    old: str | None = None
    new: str | None = None
    min_items: int | None = None
    answer_items: int | None = None

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {self.kind!r}")
        if not self.items or any(item not in ALPHABET or len(item) != 1 for item in self.items):
            raise ValueError(f"items must be letters of {ALPHABET!r}, at least one: {self.items}")
        replacing = self.kind == "replace"
        if replacing != (self.old is not None and self.new is not None) or (
            replacing and (self.old not in self.items or self.new not in ALPHABET or self.new == self.old)
        ):
            raise ValueError(f"replace needs old (one of the items) and a different new letter, others neither: {self}")
        fewest = 1 if self.min_items is None else self.min_items
        written = len(self.items) if self.answer_items is None else self.answer_items
        if not 1 <= fewest <= written <= len(self.items):
            raise ValueError(f"need 1 <= min_items <= answer_items <= the {len(self.items)} items: {self}")

    @property
    def target(self) -> tuple[str, ...]:
        """The answer's letters."""
        if self.kind == "reverse":
            return self.items[::-1]
        if self.kind == "sort":
            return tuple(sorted(self.items))
        return tuple(self.new if item == self.old else item for item in self.items)

    @property
    def prompt(self) -> str:
        """The user instruction, e.g. ``"replace a with d: c a f b"`` or ``"reverse, at least 7: ..."``."""
        instruction = f"replace {self.old} with {self.new}" if self.kind == "replace" else self.kind
        fewest = f", at least {self.min_items}" if self.min_items is not None else ""
        return f"{instruction}{fewest}: {' '.join(self.items)}"

    @property
    def response(self) -> str:
        """The written answer: the first :attr:`answer_items` target letters joined by single spaces."""
        return " ".join(self.target[: self.answer_items])

    @property
    def reference(self) -> tuple[str, dict]:
        """The RL row's ground truth (the whole target, letters joined by single spaces) and ``extra_info`` fields
        (``kind``, ``items`` and, in the free-length family, ``min_items``, which the reward reads)."""
        fewest = {"min_items": self.min_items} if self.min_items is not None else {}
        return " ".join(self.target), {"kind": self.kind, "items": len(self.items), **fewest}


def random_transformation(rng: random.Random, kind: str, size: int, min_items: int | None = None) -> Transformation:
    """A ``kind`` problem on ``size`` letters drawn uniformly from :data:`ALPHABET` (with repetition); with
    ``min_items``, free-length: right from ``min_items`` letters on, its written answer a prefix of a length drawn
    uniformly from ``[min_items, size]``."""
    items = tuple(rng.choice(ALPHABET) for _ in range(size))
    old = rng.choice(sorted(set(items))) if kind == "replace" else None
    new = rng.choice([letter for letter in ALPHABET if letter != old]) if kind == "replace" else None
    problem = Transformation(kind, items, old, new)
    if min_items is None:
        return problem
    return replace(problem, min_items=min_items, answer_items=rng.randint(min_items, size))


def generate_transformations(size: int, seed: int, min_items: int | None = None) -> list[Transformation]:
    """``size`` distinct problems (distinct prompts), kinds in round-robin, list lengths uniform in
    ``[MIN_ITEMS, MAX_ITEMS]``, from ``random.Random(seed)``; ``min_items``: the free-length family
    (:func:`random_transformation`).

    Raises ``ValueError`` for a negative size.
    """
    return draw_distinct(
        size,
        seed,
        lambda rng, i: random_transformation(rng, KINDS[i % len(KINDS)], rng.randint(MIN_ITEMS, MAX_ITEMS), min_items),
        "transformations",
    )


def transformation_metrics(responses: Sequence[str], examples: Sequence[Transformation]) -> dict[str, float]:
    """The task's sample metrics from ``bot_grpo_verl/rewards/token_credit.py`` at its defaults: ``{"accuracy",
    "item_accuracy", "length_match_rate"}``, the fraction of responses exactly right, the mean fraction of the
    letters each response answers for that it has right in place (the reward's ``items_correct``), and the fraction
    of responses that stopped at a right length (as many letters as the answer; free-length: from ``min_items`` to
    all of them)."""
    reward = load_reward_file(TOKEN_CREDIT_REWARD)
    results = [
        reward.compute_score(DATA_SOURCE, response, *example.reference)
        for response, example in zip(responses, examples, strict=True)
    ]
    return {
        "accuracy": sum(result["acc"] for result in results) / len(results),
        "item_accuracy": sum(result["items_correct"] for result in results) / len(results),
        "length_match_rate": sum(result["uncovered"] for result in results) / len(results),
    }


# Kept out of demo/tasks.py's TASKS: that file's bytes enter every task's cache key (demo/assets.py), so registering
# this task there would change the keys of the warm starts other studies resume from.
TOKEN_CREDIT = Task(
    name="token_credit",
    data_source=DATA_SOURCE,
    ability="transformation",
    generate=generate_transformations,
    reference=lambda problem: problem.reference,
    score_samples=transformation_metrics,
    sources=(Path(__file__), Path(react_corpus.__file__)),  # it draws with react_corpus.draw_distinct
    # The demo's default Qwen2 (hidden 128, 4 layers). A 118K-parameter one (hidden 64, 2 layers) solved none of 64
    # validation samples after 400 supervised steps at 1e-2 (letters right in place 0.23, lengths right 0.05).
    settings=DemoSettings(
        sft_examples=4000,
        vocab_size=320,
        max_position_embeddings=160,
        sft_steps=1500,
        eval_samples=128,
        max_response_tokens=72,
    ),
)
# The free-length family (H4's task: response lengths that vary within a group), with the same model and settings.
TOKEN_CREDIT_PREFIX = replace(
    TOKEN_CREDIT, name="token_credit_prefix", generate=functools.partial(generate_transformations, min_items=MIN_ITEMS)
)
