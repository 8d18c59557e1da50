"""The demo's tokenizer and policy, made locally: a byte-level BPE ``Qwen2Tokenizer`` trained on a task's
corpus, with Qwen2's chat format, and a randomly initialised tiny ``Qwen2ForCausalLM`` over its vocabulary.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import torch
from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerBase, Qwen2Config, Qwen2ForCausalLM, Qwen2Tokenizer

PAD_TOKEN = "<|endoftext|>"
EOS_TOKEN = "<|im_end|>"
SPECIAL_TOKENS = (PAD_TOKEN, "<|im_start|>", EOS_TOKEN)
# Qwen2's ChatML without a default system prompt; the model stops at <|im_end|> (its EOS).
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def train_tokenizer(texts: Sequence[str], vocab_size: int) -> Qwen2Tokenizer:
    """A byte-level BPE ``Qwen2Tokenizer`` trained on ``texts``; any NFC unicode text round-trips.

    ``AutoTokenizer`` loads every ``model_type="qwen2"`` checkpoint as ``Qwen2Tokenizer``, which imposes
    Qwen2's NFC normalizer and pre-tokenizer regex, so the BPE merges are learnt under exactly those.
    Special tokens: ``<|endoftext|>`` (pad), ``<|im_start|>``, ``<|im_end|>`` (eos); chat template
    :data:`CHAT_TEMPLATE`; no BOS token.
    """
    qwen2 = Qwen2Tokenizer().backend_tokenizer
    tokenizer = Tokenizer(models.BPE())
    tokenizer.normalizer, tokenizer.pre_tokenizer = qwen2.normalizer, qwen2.pre_tokenizer
    tokenizer.decoder = qwen2.decoder
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    bpe = json.loads(tokenizer.to_str())["model"]
    trained = Qwen2Tokenizer(
        vocab=bpe["vocab"],
        merges=[tuple(pair) for pair in bpe["merges"]],
        eos_token=EOS_TOKEN,
        pad_token=PAD_TOKEN,
        chat_template=CHAT_TEMPLATE,
        clean_up_tokenization_spaces=False,
    )
    trained.add_tokens([AddedToken(token, special=True) for token in SPECIAL_TOKENS], special_tokens=True)
    return trained


def prompt_ids(tokenizer: Qwen2Tokenizer, prompt: str) -> list[int]:
    """Token ids of ``prompt`` as one user turn plus the assistant header, exactly as verl's rollout sees it."""
    messages = [{"role": "user", "content": prompt}]
    return list(tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_dict=True)["input_ids"])


def response_ids(tokenizer: Qwen2Tokenizer, response: str) -> list[int]:
    """Token ids of ``response`` followed by EOS: what the policy must generate."""
    return tokenizer(response, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]


def tool_output_ids(tokenizer: Qwen2Tokenizer, output: str) -> list[int]:
    """Token ids verl's tool agent loop puts between an assistant turn's EOS and the next turn: the end of the
    assistant message, the tool's message holding ``output`` and the next assistant header (out of the loss)."""
    message = [{"role": "tool", "content": output}]
    text = "\n" + tokenizer.apply_chat_template(message, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def build_model(
    tokenizer: PreTrainedTokenizerBase,
    seed: int,
    *,
    hidden_size: int,
    intermediate_size: int,
    num_hidden_layers: int,
    num_attention_heads: int,
    num_key_value_heads: int,
    max_position_embeddings: int,
) -> Qwen2ForCausalLM:
    """A randomly initialised tiny ``Qwen2ForCausalLM`` over ``tokenizer``'s vocabulary (tied embeddings, float32,
    sdpa attention); the keywords are ``Qwen2Config``'s sizes (``DemoSettings.architecture``)."""
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        num_key_value_heads=num_key_value_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        attn_implementation="sdpa",
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=None
    )
    return model
