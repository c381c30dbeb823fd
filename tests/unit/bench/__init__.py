"""Unit tests of bench/: the benchmarks' own parts."""
