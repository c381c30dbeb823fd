"""Unit tests, in folders that mirror the code they test (``agents/`` for src/agentsearch/pipeline/agents/...)."""
