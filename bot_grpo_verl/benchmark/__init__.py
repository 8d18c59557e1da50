"""Benchmark harness: run a matrix of algorithms x seeds through verl's trainer and report on it."""
