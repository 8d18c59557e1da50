"""Paper-scale recipes: BoT-GRPO and its baselines on React code generation and AIME, with vLLM rollouts.

:mod:`recipes.algorithms` holds the one table of settings, :mod:`recipes.launch` turns a row of it into
a ``python -m verl.trainer.main_ppo`` command, :mod:`recipes.data` writes verl's parquet datasets.
"""
