"""Benchmarks of agentsearch (``make bench`` runs them all and writes BENCHMARKS.md at the repository root)."""
