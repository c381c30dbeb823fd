"""Unit tests of src/agentsearch/pipeline/agents/: the runner, the registry, the fallbacks and the built-in agents."""
