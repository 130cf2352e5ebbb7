"""Benchmarks and tuning scripts of a source checkout (not in the wheel): ``python -m benchmarks.<name>``."""
