"""Ready token-level reward functions for verl (``reward.custom_reward_function.path=reward_models/<file>.py``).

- :mod:`reward_models.prm`: process reward models (step scorers, local and served backends, value shaping).
- :mod:`reward_models.react_tsx`: the React/TSX compile reward, diagnostics as spans (``compute_score``).
- :mod:`reward_models.math_prm`: the math reward, PRM steps plus a math-verify outcome (``compute_score``).
"""
