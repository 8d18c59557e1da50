"""What the test modules share: verl's composed hydra config, the tiny tokenizers, the tiny Qwen2 models.

The test process runs verl in the CPU mode on a host without CUDA, as a ``cpu``-preset run does in each of its
processes: ``BOT_GRPO_CPU=1`` is set here, before any test module imports verl (and the plugin), unless it is set
already. Tests that start verl afresh (a subprocess, a Ray worker) set or remove it themselves.

Helpers are plain functions, imported by name (``from conftest import verl_config``). Each tiny asset has one
builder: every tokenizer in :mod:`benchmarks.local_tokenizers` (``byte_level_bpe_model`` trains the byte-level
BPEs; the reward-path benchmark uses them too), with what only tests add in :mod:`tokenizer_fixtures`, the tiny
Qwen2 and the CPU-mode files in :mod:`cpu_assets` (its model is the demo's ``build_model`` at test sizes).
"""

import os

import torch
from hydra import compose, initialize_config_module
from omegaconf import DictConfig

if not torch.cuda.is_available():
    os.environ.setdefault("BOT_GRPO_CPU", "1")

CPU_MODE_VARIABLES = ("BOT_GRPO_CPU", "VERL_PLATFORM", "VERL_ENGINE_DEVICE")
"""What the CPU mode's switch is and what it writes into a process's environment when it activates."""


def environment_without_cpu_mode() -> dict[str, str]:
    """This process's environment without :data:`CPU_MODE_VARIABLES`: for a fresh verl process that must not
    inherit this one's CPU mode."""
    return {key: value for key, value in os.environ.items() if key not in CPU_MODE_VARIABLES}


def verl_config(*overrides: str) -> DictConfig:
    """verl's ``ppo_trainer`` config composed with ``overrides``, as ``python -m verl.trainer.main_ppo`` composes it."""
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=list(overrides))
