"""The benchmarks' one report pipeline, split by job.

- :mod:`~benchmarks.reporting.runs`: reading runs (the protocol's run summaries; a matrix's run folders);
- :mod:`~benchmarks.reporting.statistics`: Pass@k per problem, bootstrap intervals, steps to a level;
- :mod:`~benchmarks.reporting.sweep`: the learning rate each cell runs at, from the validation sweep;
- :mod:`~benchmarks.reporting.comparison`: the protocol's final comparison on the test split;
- :mod:`~benchmarks.reporting.matrix_summary`: a matrix's quick summary, mean ± std over seeds;
- :mod:`~benchmarks.reporting.tables` and :mod:`~benchmarks.reporting.plots`: markdown and figures;
- :mod:`~benchmarks.reporting.outputs`: the pieces put together into a report's files.

The command lines are :mod:`benchmarks.protocol_report` (the protocol's sweep and final report) and
:mod:`benchmarks.report` (a matrix's quick summary).
"""
