"""Unit tests of pipeline/platform/: breakers, the LLM client, prompt budgets and the ticker."""
