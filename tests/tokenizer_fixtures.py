"""Two tokenizer families built locally with the `tokenizers` library (no downloads).

- byte-level BPE (GPT-2 / Qwen style): characters split across tokens, multi-byte UTF-8 in pieces;
- SentencePiece style (Llama style): '▁' leading-space markers, byte fallback for unseen characters.
"""

import functools

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

CORPUS = [
    "export default function Counter() { const [count, setCount] = useState(0); return <div>{count}</div>; }",
    "Step 1: add 12 and 30 to get 42.\n\nStep 2: divide by 2.\n\nThe answer is \\boxed{21}.",
    "const title = 'hello world'; return <h1 className=\"title\">{title}</h1>;",
    "The quick brown fox jumps over the lazy dog. 数学 とても 楽しい 🚀 ok",
] * 20
SPECIAL = ["<|endoftext|>", "<|pad|>", "<|im_start|>", "<|im_end|>"]


@functools.cache
def byte_level_bpe() -> PreTrainedTokenizerFast:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=500, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(CORPUS, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<|endoftext|>", pad_token="<|pad|>")


@functools.cache
def sentencepiece_style() -> PreTrainedTokenizerFast:
    base = Tokenizer(models.BPE())
    base.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    base.pre_tokenizer = pre_tokenizers.Split("▁", behavior="merged_with_next")
    base.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIAL))
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
    import json

    return [" ".join(m) if isinstance(m, list) else m for m in json.loads(tokenizer.to_str())["model"]["merges"]]


TOKENIZERS = {"byte_level_bpe": byte_level_bpe, "sentencepiece_style": sentencepiece_style}
