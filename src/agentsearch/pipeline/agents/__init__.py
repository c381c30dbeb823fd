"""The agent machinery: the contract (``base``), the registry, the runner, the toolbox; the built-in agents are in
``agentsearch.pipeline.agents.builtin``, one per module."""
