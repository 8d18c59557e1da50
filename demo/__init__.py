"""The CPU demo: verl's real trainer teaching a tiny Qwen2 React/TSX or arithmetic with token-level rewards.

Not part of the installed package (it ships in the sdist). Run from the repository root:
``python -m demo.run`` (``make demo``), ``python -m demo.assets`` (the cached tokenizer, model and data).
"""
