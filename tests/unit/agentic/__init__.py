"""Unit tests of src/agentsearch/pipeline/agentic/: the iterative search loop, its parts and its jobs."""
