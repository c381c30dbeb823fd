"""The built-in agents, one per module, apart from the machinery that runs them (``pipeline.agents``).

They are found exactly as a third party's agents are, through the ``agentsearch.agents`` entry points in
``pyproject.toml``; nothing in the machinery imports them. ``citation_marks`` is the rendering the PDF report and the
email draft share.

Usage::

    from pipeline.agents.registry import AgentRegistry

    agent = AgentRegistry.discover().build("language_detector", {})   # pipeline.agents.builtin.language_detector
"""
