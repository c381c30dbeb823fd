"""The built-in agents, one per module, apart from the machinery that runs them (``agentsearch.pipeline.agents``).

They are found exactly as a third party's agents are, through the ``agentsearch.agents`` entry points in
``pyproject.toml``; nothing in the machinery imports them. ``citation_marks`` is the rendering the PDF report and the
email draft share.

Usage::

    from agentsearch.pipeline.agents.registry import AgentRegistry

    agent = AgentRegistry.discover().build("language_detector", {})   #
    agentsearch.pipeline.agents.builtin.language_detector
"""
