"""Unit tests of src/agentsearch/pipeline/platform/: breakers, the LLM client, prompt budgets and the ticker."""
