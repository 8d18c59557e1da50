"""The benchmarks: speed scripts and the CPU-task protocol (``matrix``; its report pipeline ``reporting``, whose
command lines are ``report`` and ``protocol_report``).

Not part of the installed package. Run them from the repository root, e.g. ``python -m benchmarks.matrix``;
benchmarks/PROTOCOL.md describes the protocol.
"""
