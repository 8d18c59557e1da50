"""The sizes of a demo build: its data splits, tokenizer, policy, supervised warm start and measurement."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from demo.tiny_model import SPECIAL_TOKENS

ARCHITECTURE = (
    "hidden_size",
    "intermediate_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "max_position_embeddings",
)


@dataclass(frozen=True)
class DemoSettings:
    """What :func:`demo.assets.build_assets` builds; every field is part of the cache key.

    Parameters:
        sft_examples (`int`, *optional*, defaults to `1600`):
            Prompt/solution pairs of the supervised warm-start corpus.
        train_prompts (`int`, *optional*, defaults to `256`):
            Prompts of the RL train parquet (distinct from the SFT corpus' prompts).
        val_prompts (`int`, *optional*, defaults to `64`):
            Prompts of the RL val parquet (distinct from both), also used to measure the compile rate.
            Benchmarks choose settings and checkpoints on these.
        test_prompts (`int`, *optional*, defaults to `128`):
            Prompts of the RL test parquet (distinct from all others): benchmarks report on these only.
        vocab_size (`int`, *optional*, defaults to `1024`):
            Byte-level BPE vocabulary size including the 3 special tokens (at least 259: 256 bytes + 3).
        hidden_size (`int`, *optional*, defaults to `128`):
            Qwen2 hidden size.
        intermediate_size (`int`, *optional*, defaults to `384`):
            Qwen2 MLP width.
        num_hidden_layers (`int`, *optional*, defaults to `4`):
            Qwen2 decoder layers.
        num_attention_heads (`int`, *optional*, defaults to `4`):
            Query heads (must divide ``hidden_size``).
        num_key_value_heads (`int`, *optional*, defaults to `2`):
            Key/value heads (grouped-query attention as in Qwen2; must divide ``num_attention_heads``).
        max_position_embeddings (`int`, *optional*, defaults to `512`):
            Longest sequence (prompt + response) the policy supports.
        sft_steps (`int`, *optional*, defaults to `240`):
            Optimizer steps of the supervised warm start (0 keeps the random initialisation).
        sft_batch_size (`int`, *optional*, defaults to `32`):
            Sequences per supervised step.
        sft_learning_rate (`float`, *optional*, defaults to `3e-3`):
            AdamW peak learning rate; linear warm-up over the first 10% of steps, then cosine decay to 10%.
        eval_samples (`int`, *optional*, defaults to `64`):
            Responses sampled (temperature 1, one per val prompt, cycling) to measure the compile rate.
        max_response_tokens (`int`, *optional*, defaults to `160`):
            Token limit of those samples; use the same value as verl's ``data.max_response_length``.
    """

    sft_examples: int = 1600
    train_prompts: int = 256
    val_prompts: int = 64
    test_prompts: int = 128
    vocab_size: int = 1024
    hidden_size: int = 128
    intermediate_size: int = 384
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 512
    sft_steps: int = 240
    sft_batch_size: int = 32
    sft_learning_rate: float = 3e-3
    eval_samples: int = 64
    max_response_tokens: int = 160

    def __post_init__(self):
        if self.vocab_size < 256 + len(SPECIAL_TOKENS):
            raise ValueError(f"vocab_size={self.vocab_size} is below 259 (256 bytes + 3 special tokens)")
        if self.hidden_size % self.num_attention_heads or self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(
                f"num_attention_heads={self.num_attention_heads} must divide hidden_size={self.hidden_size} and "
                f"be a multiple of num_key_value_heads={self.num_key_value_heads}"
            )
        sizes = ("sft_examples", "train_prompts", "val_prompts", "test_prompts", "sft_batch_size", "eval_samples")
        if min(getattr(self, size) for size in sizes) < 1 or self.max_response_tokens < 1 or self.sft_steps < 0:
            raise ValueError(f"sizes must be positive (sft_steps >= 0): {asdict(self)}")

    @property
    def architecture(self) -> dict[str, int]:
        """The policy's sizes, the keywords of :func:`demo.tiny_model.build_model`."""
        return {name: getattr(self, name) for name in ARCHITECTURE}
