"""Registered tools and what a config may name, on a real (SQLite, migrated) database: the operator's CLI, the
registry, the references check the API and the agents share, and the toolbox bound to a user."""

from __future__ import annotations

import json
import uuid
from types import SimpleNamespace

import fakeredis
import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from agentsearch.cli import main
from agentsearch.pipeline.agents.builtin.external_enricher import ExternalEnricher
from agentsearch.pipeline.agents.builtin.fact_checker import FactChecker
from agentsearch.pipeline.agents.builtin.mcp_tool import McpTool
from agentsearch.pipeline.agents.references import (
    MissingResource,
    UnresolvedReference,
    UserResources,
    resolve_config_references,
    resolve_references,
)
from agentsearch.pipeline.agents.toolbox import AgentTools
from agentsearch.pipeline.platform.cache import ResultCache
from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.settings import Settings, get_settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.platform.tables.users import UserRow
from agentsearch.pipeline.security.registered_tools import RegisteredTool, ToolError, ToolStore
from tests.support.databases import migrated_sqlite


@pytest.fixture
def db(tmp_path) -> Database:
    url = f"sqlite:///{tmp_path / 'tools.db'}"
    migrated_sqlite(url)
    database = Database(url)
    yield database
    database.dispose()


def make_user(db: Database, name: str) -> uuid.UUID:
    user_id = uuid.uuid4()
    with db.session() as s:
        s.add(UserRow(id=user_id, name=name))
    return user_id


def make_collection(db: Database, user_id: uuid.UUID, texts: list[str] = ()) -> str:
    collection_id = uuid.uuid4()
    with db.session() as s:
        s.add(CollectionRow(id=collection_id, user_id=user_id, name=f"c-{collection_id.hex[:6]}",
                         embedding_model="m", index_epoch=3))
        s.flush()
        for i, text in enumerate(texts):
            s.add(DocumentRow(collection_id=collection_id, external_id=f"d{i}", title=f"T{i}", text=text,
                              status="indexed"))
    return str(collection_id)


STDIO = RegisteredTool(name="make_outline", kind="mcp", command=["python", "-m", "tools.server"],
                       env={"TOOLS_TOKEN": "secret-1"}, cwd="/srv/tools")
CRM = RegisteredTool(name="crm", kind="http", url="https://crm.example/api/{metadata.company}",
                     headers={"Authorization": "Bearer secret-2"})


# --- the registry -------------------------------------------------------------------------------------------------


def test_tools_are_stored_found_by_kind_and_name_and_removed(db):
    store = ToolStore(db)
    store.add(STDIO)
    store.add(CRM)
    assert store.get("mcp", "make_outline") == STDIO
    assert store.get("http", "crm") == CRM
    assert store.get("http", "make_outline") is None  # a name is found only as the kind a config asks for
    assert [tool.name for tool, _ in store.list()] == ["crm", "make_outline"]
    with pytest.raises(ToolError, match="already registered; give --replace"):
        store.add(RegisteredTool(name="crm", kind="mcp", url="https://other.example/mcp"))
    rotated = CRM.model_copy(update={"headers": {"Authorization": "Bearer rotated"}})
    assert store.add(rotated, replace=True) is True
    assert store.get("http", "crm").headers == {"Authorization": "Bearer rotated"}
    assert len(store.list()) == 2
    assert store.remove("crm") is True and store.remove("crm") is False
    assert store.get("http", "crm") is None


@pytest.mark.parametrize(("fields", "message"), [
    ({"kind": "mcp"}, "exactly one of a command"),
    ({"kind": "mcp", "command": ["x"], "url": "http://h/mcp"}, "exactly one of a command"),
    ({"kind": "mcp", "command": []}, "non-empty argv"),
    ({"kind": "mcp", "command": ["x"], "cwd": "relative/dir"}, "absolute"),
    ({"kind": "mcp", "command": ["x"], "env": {"BAD-NAME": "1"}}, "environment variable name"),
    ({"kind": "mcp", "command": ["x"], "allow_internal": True}, "reached by url"),
    ({"kind": "mcp", "url": "ftp://h/mcp"}, "http"),
    ({"kind": "mcp", "url": "http://h/mcp", "env": {"A": "1"}}, "stdio"),
    ({"kind": "http"}, "url template"),
    ({"kind": "http", "url": "http://{metadata.h}/x"}, "host"),
    ({"kind": "http", "url": "http://h/{nope}"}, "unknown placeholder"),
    ({"kind": "http", "url": "http://h/x", "command": ["x"]}, "for mcp tools"),
    ({"kind": "shell", "command": ["x"]}, "kind"),
    ({"name": "bad name", "kind": "mcp", "command": ["x"]}, "invalid tool name"),
])
def test_a_tool_is_validated_when_it_is_registered(fields, message):
    with pytest.raises(ValidationError, match=message):
        RegisteredTool(**{"name": "t", **fields})


def test_the_cli_registers_lists_without_secrets_and_removes(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENTSEARCH_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    try:
        cli = CliRunner()
        added = cli.invoke(main, ["tools", "add", "outline", "--kind", "mcp", "--command",
                                  "python -m tools.server --flag 'two words'", "--env", "TOOLS_TOKEN=secret-1",
                                  "--cwd", "/srv/tools", "--server-tool", "make_outline"])
        assert added.exit_code == 0, added.output
        assert "registered mcp tool outline (stdio)" in added.output
        added = cli.invoke(main, ["tools", "add", "crm", "--kind", "http", "--url", "http://10.0.0.5/c/{document_id}",
                                  "--header", "Authorization: Bearer secret-2", "--allow-internal"])
        assert added.exit_code == 0, added.output
        refused = cli.invoke(main, ["tools", "add", "evil", "--kind", "http", "--url", "http://{metadata.h}/"])
        assert refused.exit_code == 2 and "placeholders are not allowed in the URL's host" in refused.output

        listed = cli.invoke(main, ["tools", "list", "--json"])
        assert listed.exit_code == 0, listed.output
        tools = {t["name"]: t for t in json.loads(listed.output)}
        assert tools["outline"]["command"] == ["python", "-m", "tools.server", "--flag", "two words"]
        assert tools["outline"]["env"] == ["TOOLS_TOKEN"] and tools["crm"]["headers"] == ["Authorization"]
        assert tools["crm"]["allow_internal"] is True
        plain = cli.invoke(main, ["tools", "list"]).output
        for secret in ("secret-1", "secret-2"):
            assert secret not in listed.output and secret not in plain

        store = ToolStore(Database(get_settings().database_url))
        assert store.get("mcp", "outline").env == {"TOOLS_TOKEN": "secret-1"}  # kept, just not shown
        taken = cli.invoke(main, ["tools", "add", "crm", "--kind", "http", "--url", "http://10.0.0.6/{query}"])
        assert taken.exit_code == 2 and "already registered" in taken.output
        rotated = cli.invoke(main, ["tools", "add", "crm", "--kind", "http", "--url", "http://10.0.0.6/{query}",
                                    "--replace"])
        assert rotated.exit_code == 0 and "replaced http tool crm" in rotated.output
        assert store.get("http", "crm").url == "http://10.0.0.6/{query}" and not store.get("http", "crm").headers
        assert cli.invoke(main, ["tools", "remove", "crm"]).exit_code == 0
        gone = cli.invoke(main, ["tools", "remove", "crm"])
        assert gone.exit_code == 2 and "no tool named 'crm'" in gone.output
        assert store.get("http", "crm") is None
    finally:
        get_settings.cache_clear()


# --- references: checked when saved (the API) and when run (the agent) ------------------------------------------


def test_a_config_naming_an_unregistered_or_removed_tool_is_unresolved(db):
    user = make_user(db, "alice")
    resources = UserResources(db, user)
    config = McpTool.Config.model_validate({"context_forge_tool_id": "make_outline"})
    with pytest.raises(UnresolvedReference) as caught:
        resolve_config_references(McpTool, config, resources)
    assert caught.value.field == "context_forge_tool_id"
    assert caught.value.message == ("no mcp tool named 'make_outline' is registered; operators register tools "
                                    "(`agentsearch tools add`)")
    ToolStore(db).add(STDIO)
    assert resolve_config_references(McpTool, config, resources) == {"context_forge_tool_id": STDIO}
    # An http endpoint of that name is not an mcp tool, nor the other way round.
    enricher = ExternalEnricher({"endpoint": "make_outline", "mapping": {"x": "$.x"}})
    with pytest.raises(UnresolvedReference, match="endpoint: no http tool named 'make_outline'"):
        resolve_references(enricher, resources)
    ToolStore(db).remove("make_outline")
    with pytest.raises(UnresolvedReference, match="context_forge_tool_id"):
        resolve_config_references(McpTool, config, resources)


def test_another_users_collection_is_refused_in_the_words_of_a_missing_one(db):
    alice, bob = make_user(db, "alice"), make_user(db, "bob")
    alices = make_collection(db, alice)
    bobs = make_collection(db, bob)
    nobody = str(uuid.uuid4())

    def refusal(collection_id: str) -> str:
        agent = FactChecker({"trusted_collection_id": collection_id})
        with pytest.raises(UnresolvedReference) as caught:
            resolve_references(agent, UserResources(db, bob))
        assert caught.value.field == "trusted_collection_id"
        return caught.value.message.replace(collection_id, "ID")

    assert refusal(alices) == refusal(nobody) == "collection ID not found"
    assert resolve_references(FactChecker({"trusted_collection_id": bobs}), UserResources(db, bob))
    assert resolve_references(FactChecker(), UserResources(db, bob)) == {}  # nothing named, nothing to check
    with pytest.raises(MissingResource):
        UserResources(db, None).owned_collection(bobs)  # nobody's toolbox owns nothing


# --- the toolbox bound to the job's user ----------------------------------------------------------------------------


class RecordingRetriever:
    def __init__(self) -> None:
        self.searches: list[tuple[str, int]] = []

    def search(self, name, query, config, epoch, model):
        self.searches.append((name, epoch))
        return SimpleNamespace(documents=[])


@pytest.fixture
def toolbox(db, tmp_path):
    services = SimpleNamespace(db=db, settings=Settings(data_dir=tmp_path, egress_allow=["10.0.0.0/8"]),
                               retriever=RecordingRetriever(),
                               result_cache=ResultCache(fakeredis.FakeRedis()))
    return AgentTools(services), services


def test_the_bound_toolbox_reads_only_its_users_collections(db, toolbox):
    tools, services = toolbox
    alice, bob = make_user(db, "alice"), make_user(db, "bob")
    alices = make_collection(db, alice, ["Zephyr Crest holds 4417 megalitres under a power purchase agreement (PPA)."])
    bobs = make_collection(db, bob, ["Bob's own text about turbines."])

    as_bob = tools.for_user(str(bob))
    for read in (lambda: as_bob.search(alices, "Zephyr"), lambda: as_bob.epoch(alices),
                 lambda: as_bob.collection_texts(alices), lambda: as_bob.vocabulary(alices),
                 lambda: as_bob.acronyms(alices), lambda: as_bob.search("not-a-uuid", "q")):
        with pytest.raises(MissingResource, match="not found"):
            read()
    assert services.retriever.searches == []  # nothing reached the index

    assert as_bob.collection_texts(bobs) == ["T0. Bob's own text about turbines."]
    assert "turbines" in as_bob.vocabulary(bobs)
    as_bob.search(bobs, "turbines")
    assert services.retriever.searches == [(f"c_{uuid.UUID(bobs).hex}", 3)]

    # Alice's toolbox reads hers; after Bob's refusals her lexicon is computed from her text, not served to him.
    as_alice = tools.for_user(str(alice))
    assert as_alice.acronyms(alices) == {"PPA": "power purchase agreement"}
    with pytest.raises(MissingResource):
        as_bob.acronyms(alices)  # cached in Redis for her collection now: still not his
    with pytest.raises(MissingResource):
        tools.collection_texts(bobs)  # the unbound toolbox reads no collection


def test_the_bound_toolbox_finds_registered_tools_and_the_operators_egress_policy(db, toolbox):
    tools, _ = toolbox
    ToolStore(db).add(CRM)
    as_someone = tools.for_user(str(make_user(db, "carol")))
    assert as_someone.registered_tool("http", "crm") == CRM
    with pytest.raises(MissingResource, match="no mcp tool named 'crm'"):
        as_someone.registered_tool("mcp", "crm")
    assert as_someone.egress_policy == Settings(egress_allow=["10.0.0.0/8"]).egress_policy()
    assert as_someone.llm is tools.llm


def test_a_collections_lexicon_is_kept_in_the_process_per_epoch_and_still_only_for_its_owner(db, toolbox):
    tools, services = toolbox
    alice, bob = make_user(db, "alice"), make_user(db, "bob")
    alices = make_collection(db, alice, ["Turbines under a power purchase agreement (PPA)."])
    as_alice = tools.for_user(str(alice))
    first = as_alice.vocabulary(alices)
    services.result_cache._redis.flushdb()  # as benchmark 3 does before every job
    with db.session() as s:  # the rows change without an epoch move: only a kept lexicon ignores them
        s.add(DocumentRow(collection_id=uuid.UUID(alices), external_id="late", title="L", text="Gearboxes.",
                          status="indexed"))
    again = tools.for_user(str(alice))  # the next agent call (a new bound toolbox, the same process)
    assert again.vocabulary(alices) is first and "gearboxes" not in first
    with pytest.raises(MissingResource):
        tools.for_user(str(bob)).vocabulary(alices)  # kept for the process, still not his
    with db.session() as s:  # an ingest moves the epoch on: the lexicon is made again
        s.get(CollectionRow, uuid.UUID(alices)).index_epoch += 1
    assert "gearboxes" in tools.for_user(str(alice)).vocabulary(alices)
    assert tools.for_user(str(alice)).acronyms(alices) == {"PPA": "power purchase agreement"}


def test_a_lexicon_holds_only_the_documents_its_reader_finds(db, toolbox):
    from agentsearch.pipeline.platform.tables.teams import TeamGroupMemberRow, TeamMemberRow, TeamRow
    from agentsearch.pipeline.security.document_access import set_document_groups

    tools, _ = toolbox
    member, outsider = make_user(db, "member"), make_user(db, "outsider")
    shared = make_collection(db, member, ["Turbines under a power purchase agreement (PPA)."])
    with db.session() as s:
        team = TeamRow(name="ops", created_by=member)
        s.add(team)
        s.flush()
        s.add_all([TeamMemberRow(team_id=team.id, user_id=u, role="viewer") for u in (member, outsider)])
        s.add(TeamGroupMemberRow(team_id=team.id, name="board", user_id=member))
        collection = s.get(CollectionRow, uuid.UUID(shared))
        collection.team_id = team.id
        secret = DocumentRow(collection_id=collection.id, external_id="minutes", title="M", status="indexed",
                             text="Quillfeather ledger (QFL) closes in March.")
        s.add(secret)
        s.flush()
        set_document_groups(s, secret, collection, ["board"])
    as_outsider, as_member = tools.for_user(str(outsider)), tools.for_user(str(member))
    assert "quillfeather" not in as_outsider.vocabulary(shared) and "QFL" not in as_outsider.acronyms(shared)
    assert "quillfeather" in as_member.vocabulary(shared) and as_member.acronyms(shared)["QFL"] == "quillfeather ledger"
    # Each kept for its readers: the outsider's next call still finds nothing of it.
    assert "quillfeather" not in tools.for_user(str(outsider)).vocabulary(shared)
    assert all("Quillfeather" not in text for text in as_outsider.collection_texts(shared))
