"""The benchmarks: speed scripts and the CPU-task protocol (``matrix``, ``report``, ``protocol_report``).

Not part of the installed package. Run them from the repository root, e.g. ``python -m benchmarks.matrix``;
benchmarks/PROTOCOL.md describes the protocol.
"""
