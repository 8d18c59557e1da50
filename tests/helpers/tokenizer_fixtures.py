"""What only the tests add to the tokenizers of :mod:`benchmarks.local_tokenizers`: a decode counter, Qwen3's
tokenizer or a skip, and chat templates with tool support."""

import copy

import pytest
from transformers import PreTrainedTokenizerFast

from benchmarks.local_tokenizers import Unavailable, qwen3


class CountingBackend:
    """A fast tokenizer's Rust backend that counts its decodes."""

    def __init__(self, backend):
        self.backend, self.decodes = backend, 0

    def __getattr__(self, name):
        return getattr(self.backend, name)

    def decode(self, *args, **kwargs):
        self.decodes += 1
        return self.backend.decode(*args, **kwargs)


def counting_decodes(tokenizer: PreTrainedTokenizerFast) -> PreTrainedTokenizerFast:
    """A copy of ``tokenizer`` whose backend counts its decodes (``tokenizer.backend_tokenizer.decodes``)."""
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer._tokenizer = CountingBackend(tokenizer._tokenizer)
    return tokenizer


def qwen3_or_skip() -> PreTrainedTokenizerFast:
    """Qwen3's tokenizer, or the calling test skipped with the reason it cannot be fetched."""
    try:
        return qwen3()
    except Unavailable as reason:
        pytest.skip(f"Qwen3's tokenizer is not available: {reason}")


# Chat templates with tool support, for verl's tool agent loop (hermes tool calls, verl's default format).
# Qwen's layout: tools in a system turn, calls as <tool_call> JSON blocks, results as a user turn.
QWEN_TOOL_TEMPLATE = """\
{%- if tools %}<|im_start|>system
# Tools

<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}
</tools><|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == "tool" %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% elif message.role == "assistant" %}<|im_start|>assistant
{{ message.content }}
{%- for call in message.tool_calls or [] %}<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>
{%- endfor %}<|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""


# A Llama-2 / Mistral-like layout (no role headers): [INST] user turns, [TOOL_RESULTS] tool output, the
# assistant's turns bare, each closed by the EOS.
INST_TOOL_TEMPLATE = """\
{%- for message in messages %}
{%- if message.role == "user" %}[INST] {{ message.content }} [/INST]
{%- elif message.role == "tool" %}[TOOL_RESULTS] {{ message.content }} [/TOOL_RESULTS]
{%- elif message.role == "assistant" %}{{ message.content }}
{%- for call in message.tool_calls or [] %}<tool_call>{"name": "{{ call.function.name }}", "arguments": \
{{ call.function.arguments | tojson }}}</tool_call>{%- endfor %}<|endoftext|>
{%- endif %}
{%- endfor %}"""
