"""The advantage estimators the plugin registers with verl: BoT-GRPO (:mod:`.bot_grpo`), PURE (:mod:`.pure`) and the
same-information baselines (:mod:`.baselines`), over the group statistics they share (:mod:`.groups`)."""
