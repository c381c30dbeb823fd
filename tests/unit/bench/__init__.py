"""Unit tests of src/agentsearch/bench/: the benchmarks' own parts."""
