"""What the test modules share: verl's composed hydra config, the tiny tokenizers, the tiny Qwen2 models.

Helpers are plain functions, imported by name (``from conftest import verl_config``).
"""

from hydra import compose, initialize_config_module
from omegaconf import DictConfig


def verl_config(*overrides: str) -> DictConfig:
    """verl's ``ppo_trainer`` config composed with ``overrides``, as ``python -m verl.trainer.main_ppo`` composes it."""
    with initialize_config_module(config_module="verl.trainer.config", version_base=None):
        return compose("ppo_trainer", overrides=list(overrides))
