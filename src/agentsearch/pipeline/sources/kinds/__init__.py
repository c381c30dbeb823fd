"""The kinds of source, by name: one module each (``web``, ``feed``, ``git``, ``mail``, ``drive``, ``objects``, and
the SaaS tools: ``confluence``, ``slack``, ``notion``, ``google_drive``, ``sharepoint``),
each a class with ``name``, ``config_model`` and ``items`` (``agentsearch.pipeline.sources.kinds.base``). A new kind
is a module here and a line in ``KINDS``.

Usage::

    kind = kind_named("web")                          # None for a name no kind has
    config = kind.config_model.model_validate({"url": "https://example.org/docs/"})
"""

from __future__ import annotations

from agentsearch.pipeline.sources.kinds.base import SourceKind
from agentsearch.pipeline.sources.kinds.confluence import Confluence
from agentsearch.pipeline.sources.kinds.drive import Drive
from agentsearch.pipeline.sources.kinds.feed import Feed
from agentsearch.pipeline.sources.kinds.git import Git
from agentsearch.pipeline.sources.kinds.google_drive import GoogleDrive
from agentsearch.pipeline.sources.kinds.mail import Mail
from agentsearch.pipeline.sources.kinds.notion import Notion
from agentsearch.pipeline.sources.kinds.objects import Objects
from agentsearch.pipeline.sources.kinds.sharepoint import SharePoint
from agentsearch.pipeline.sources.kinds.slack import Slack
from agentsearch.pipeline.sources.kinds.web import Web

KINDS: dict[str, SourceKind] = {kind.name: kind for kind in (
    Web(), Feed(), Git(), Mail(), Drive(), Objects(), Confluence(), Slack(), Notion(), GoogleDrive(),
    SharePoint())}


def kind_named(name: str) -> SourceKind | None:
    return KINDS.get(name)
