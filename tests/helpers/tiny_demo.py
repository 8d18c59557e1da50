"""Demo settings small enough to build the demo's assets in seconds on 2 cores."""

from demo.settings import DemoSettings

# Seconds to build on 2 cores; big enough that SFT visibly learns.
TINY = DemoSettings(
    sft_examples=64,
    train_prompts=12,
    val_prompts=8,
    test_prompts=6,
    vocab_size=512,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    sft_steps=24,
    sft_batch_size=8,
    sft_learning_rate=1e-2,
    eval_samples=4,
    max_response_tokens=24,
)
