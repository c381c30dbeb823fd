"""The agent contract (``base``), the registry, and the built-in agents, one per module."""
