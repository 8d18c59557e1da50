"""Ready token-level reward functions for verl, installed as ``bot_grpo_verl.rewards``.

verl loads them by file path: ``reward.custom_reward_function.path=$(bot-grpo-verl reward-path react_tsx)``
(from a clone, ``bot_grpo_verl/rewards/<file>.py`` is the same file).

- :mod:`bot_grpo_verl.rewards.prm`: process reward models: the step scorer, over ``prm_formats``, ``prm_local``,
  ``prm_endpoint`` (``prm_http``) and ``micro_batcher``; ``prm_values`` shapes its probabilities into step values.
  ``http_json`` is the ``httpx`` transport of the PRM endpoint (deadlines, retries).
- :mod:`bot_grpo_verl.rewards.react_tsx`: the React/TSX compile reward, diagnostics as spans (``compute_score``),
  over ``react_options`` (its options), ``tsx_source`` (code blocks, positions, error regions), ``tsx_checker`` (the
  compile worker's client, over ``node_worker``) and ``react_gates`` (render: ``react_render``; requirements:
  ``react_requirements``; the optional judge: ``react_judge``, which asks an OpenAI-compatible endpoint, the
  ``[judge]`` extra).
- :mod:`bot_grpo_verl.rewards.math_prm`: the math reward, PRM steps plus a math-verify outcome (``compute_score``).
- :mod:`bot_grpo_verl.rewards.arithmetic_steps`: the demo's exact arithmetic verifier (``compute_score``).
- :mod:`bot_grpo_verl.rewards.calculator`: a calculator tool for verl's tool agent loop (loaded by path, with a
  reward per call), over ``exact_arithmetic`` (exact integer arithmetic on untrusted text).
- :mod:`bot_grpo_verl.rewards.tool_arithmetic`: the agentic demo task's reward: the outcome and one value per
  assistant turn (``compute_score``).
"""
