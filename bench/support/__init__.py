"""Shared parts of the benchmarks (not benchmarks themselves: `./dev bench` runs bench/*.py)."""
