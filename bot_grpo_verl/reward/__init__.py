"""The reward path: the token-reward contract (:mod:`.token_rewards`), the alignment of spans to tokens
(:mod:`.alignment`), assistant turns and tool calls (:mod:`.turns`), the step layout of process supervision
(:mod:`.step_layout`) and the ``bot_token`` reward manager that applies them to verl's samples (:mod:`.manager`)."""
