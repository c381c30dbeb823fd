"""Unit tests of pipeline/agentic/: the iterative search loop, its parts and its jobs."""
