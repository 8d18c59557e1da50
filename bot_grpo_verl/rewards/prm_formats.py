"""PRM input formats: how a process reward model (PRM) reads a question and the steps of a response.

A PRM reads the question and the steps, with a tag after each step, and scores each step at the tag's
token. Three public formats (:data:`FORMATS`):

- ``"qwen"`` (Qwen2.5-Math-PRM, arXiv:2501.07301): the special token ``<extra_0>`` after each step; a
  2-label head gives P(correct) = softmax(logits)[1] at that token.
- ``"math_shepherd"`` (Math-Shepherd, arXiv:2312.08935): the tag `` ки`` after each step; a causal LM's
  next-token logits at the tag, restricted to the tokens ``+`` and ``-``, give P(correct) =
  softmax([logit(+), logit(-)])[0].
- ``"pure"`` (PURE, arXiv:2504.15275): a token-classification PRM scored at each step's last token, a
  ``\\n`` appended after the step; PURE's step reward is p(+) - p(-), which for its 2-label head is
  2 p(+) - 1, i.e. :func:`bot_grpo_verl.rewards.prm_values.to_values` with ``symmetric=True`` of P(correct) =
  softmax(logits)[1].

:func:`encode_steps` turns a question and its steps into the token ids of a PRM's input and the readout
position of each step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FORMAT_NAMES = ("qwen", "math_shepherd", "pure")

QWEN_PROMPT = (
    "<|im_start|>system\nPlease reason step by step, and put your final answer within \\boxed{}.<|im_end|>\n"
    "<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
)


@dataclass(frozen=True)
class PRMFormat:
    """How a PRM reads a response: the text around the steps and the head that scores them.

    Attributes:
        name: one of :data:`FORMAT_NAMES`.
        step_tag: text whose tokens follow each step; the step is scored at the tag's last token.
        joiner: text put before every step but the first.
        prompt_template: the text before the first step, ``{question}`` replaced by the question.
        head: ``"classifier"`` (2-label token classification, label 1 = correct) or ``"lm_pair"`` (a causal
            LM's next-token logits over the tokens ``plus`` and ``minus``).
        plus, minus: the two tokens of ``"lm_pair"``.
        served_positive_column: the column of P(correct) in a row a server returns: the classifier's
            labels in order, or the ``returned_token_ids`` of vLLM's STEP pooler in order ``[+, -]``.
    """

    name: str
    step_tag: str
    joiner: str
    prompt_template: str
    head: str
    plus: str = "+"
    minus: str = "-"
    served_positive_column: int = 1


FORMATS = {
    "qwen": PRMFormat("qwen", step_tag="<extra_0>", joiner="", prompt_template=QWEN_PROMPT, head="classifier"),
    "math_shepherd": PRMFormat(
        "math_shepherd",
        step_tag=" ки",
        joiner="\n",
        prompt_template="{question} ",
        head="lm_pair",
        served_positive_column=0,
    ),
    "pure": PRMFormat("pure", step_tag="\n", joiner="", prompt_template="{question}\n", head="classifier"),
}


def encode_steps(
    tokenizer, fmt: PRMFormat, question: str, steps: Sequence[str], max_tokens: int | None = None
) -> tuple[list[int], list[int]]:
    """Token ids of the PRM input and the readout position of each step.

    The prompt is encoded with the tokenizer's special tokens (a BOS where the model has one); each step
    is encoded on its own (``joiner + step``) and followed by the ids of ``step_tag`` encoded on its own,
    as PURE concatenates token ids, so the readout position is exactly the tag's last token whatever the
    tokenizer would merge across steps. Steps that would make the input longer than ``max_tokens`` are
    dropped from the end: then ``len(positions) < len(steps)``.

    Returns:
        ``(ids, positions)``: ``ids`` a list of ints, ``positions`` one index into ``ids`` per kept step.
    """
    ids = tokenizer.encode(fmt.prompt_template.replace("{question}", question), add_special_tokens=True)
    tag_ids = tokenizer.encode(fmt.step_tag, add_special_tokens=False)
    positions: list[int] = []
    for number, step in enumerate(steps):
        segment = tokenizer.encode((fmt.joiner if number else "") + step, add_special_tokens=False) + tag_ids
        if max_tokens is not None and len(ids) + len(segment) > max_tokens:
            break
        ids.extend(segment)
        positions.append(len(ids) - 1)
    return ids, positions
