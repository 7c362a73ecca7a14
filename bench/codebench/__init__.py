"""Shared parts of the code-retrieval benchmarks (data, scoring, running the engine)."""
