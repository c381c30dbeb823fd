"""Document groups on the real stack: a team collection's document restricted to the group ``hr`` leaves no trace
for a member outside it, whatever the member tries.

One team: an admin and a viewer ``hr`` in the group, an editor and a viewer outside it, a viewer ``mover`` taken out
of it while its job runs. A viewer's search whose query is the restricted document's first sentence word for word
finds the public documents only: no trace of the restricted one in the sources, answer, citations, artifact, event
stream or search counts, before and after an ``hr`` member warmed every cache with that very query (the viewer's job
is never answered from the ``hr`` member's; another ``hr`` member's is). The ``hr`` member's job is 404 to the rest
of the team as a missing id is. A member taken out of the group mid-job gets 404 for that job from its next request;
a public document moved into the group while a viewer's job over it runs makes that job 404 to the viewer. Listings,
reads and the collection's counts hide the document; an editor outside the group can neither replace, delete nor
label its way to it, nor a viewer filter its way there; a collection's webhook made by an editor outside the group
hears nothing of an ``hr`` member's job; the MCP tools find nothing of it. ``access`` is taken on the JSON route, on
a JSON Lines line, as the files upload's form field and by ``agentsearch ingest``; refused on a personal collection,
naming the field. Who may put whom in a group is ``test_teams.py``'s; a key limited to one collection naming another
in ``also_search``, ``test_scoped_keys.py``'s.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from mcp import Client

from tests.integration.conftest import own_collection, runs_by_agent, search, use_agents, wait_job
from tests.integration.test_mcp_server import _http, _reason, _session, _text
from tests.integration.test_scoped_keys import _same_as_missing
from tests.integration.test_teams import _as
from tests.integration.test_webhooks import allowed_api, client, deliveries, receiver  # noqa: F401 - fixtures

pytestmark = pytest.mark.integration

ROLES = {"admin": "admin", "editor": "editor", "viewer": "viewer", "hr": "viewer", "mover": "viewer"}
IN_HR = ("admin", "hr", "mover")
# The restricted document's first sentence is what the viewer asks, word for word.
QUERY = "Severance pay is three months of salary plus one week for every year of service."
SECRET = {"id": "hr-severance", "title": "Quillfeather severance ledger",
          "text": QUERY + " Each case is entered in the Quillfeather ledger (QFL) by the office.",
          "metadata": {"ledger_code": "QF-7731"}, "access": {"groups": ["hr"]}}
# What of it would show if it leaked: the query itself is everywhere the viewer's own question is echoed, so it is
# taken out first; its sentence then shows only as a quote (the answer cites it as "... service [1].").
MARKS = ("hr-severance", "Quillfeather", "QF-7731", "Severance pay is three months")
PUBLIC = [{"id": "leave", "title": "Leave policy", "text": "The notice period is four weeks for every employee."},
          {"id": "travel", "title": "Travel", "text": "Trains are booked in second class for trips under four hours."}]
# The collection whose agent set holds the job in its response stage long enough to change something under it.
SLOW_S = 6
BONUS_QUERY = "When is the annual bonus paid?"
BONUS = {"id": "bonus-marigold", "title": "Marigold bonus calendar",
         "text": "The annual bonus is paid in March to every employee who passed probation."}
SLOW_SECRET = {"id": "hr-slow", "title": "Quillfeather dismissal file",
               "text": "Dismissals are reviewed by a panel of three within ten working days.",
               "access": {"groups": ["hr"]}}


def traces(blob: str, marks: tuple[str, ...] = MARKS, asked: str = QUERY) -> list[str]:
    """The marks of a restricted document found in ``blob``, once the searcher's own question is taken out."""
    rest = blob.replace(asked, "")
    return [mark for mark in marks if mark in rest]


def indexed(http: httpx.Client, collection_id: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while (counts := http.get(f"/v1/collections/{collection_id}").json()["documents"])["pending"]:
        assert time.monotonic() < deadline, f"indexing stuck: {counts}"
        time.sleep(0.2)
    assert counts["failed"] == 0, counts


def until_stage(http: httpx.Client, job_id: str, stage: str, timeout_s: float = 30) -> None:
    """Wait until the job reaches ``stage`` (its answer written and its sources fixed for ``response``)."""
    deadline = time.monotonic() + timeout_s
    while (job := http.get(f"/v1/jobs/{job_id}").json())["stage"] != stage:
        assert job["status"] in ("queued", "running"), f"the job ended before {stage}: {job['status']}"
        assert time.monotonic() < deadline, f"job {job_id} never reached {stage}"
        time.sleep(0.05)


def submitted(http: httpx.Client, collection_id: str, query: str, **extra) -> str:
    """A search job's id: a new job (202), or one answered at once from the whole-job cache (200)."""
    response = http.post("/v1/search", json={"collection_id": collection_id, "query": query, **extra})
    assert response.status_code in (200, 202), response.text
    return response.json()["job_id"]


def running_job(http: httpx.Client, query: str, timeout_s: float = 20) -> str:
    """The id of the caller's job of ``query`` still queued or running, once the listing shows it."""
    deadline = time.monotonic() + timeout_s
    while True:
        for job in http.get("/v1/jobs", params={"limit": 20}).json()["items"]:
            if job["query"] == query and job["status"] in ("queued", "running"):
                return job["job_id"]
        assert time.monotonic() < deadline, f"no job of {query!r} running"
        time.sleep(0.05)


def asked(http: httpx.Client, collection_id: str, query: str, **extra) -> dict:
    return wait_job(http, submitted(http, collection_id, query, **extra))


def ids(job: dict) -> set[str]:
    return {s["document_id"] for s in job["response"]["sources"]}


def cached_from(stack, job_id: str) -> str | None:
    (row,) = stack.sql("SELECT cached_from FROM jobs WHERE id = %s", job_id)
    return str(row[0]) if row[0] else None


@pytest.fixture(scope="module")
def team(stack) -> dict:
    """The team, its group ``hr`` (admin, hr, mover), a collection of two public documents and the restricted one,
    and a collection whose agent set holds each job SLOW_S seconds in its response stage."""
    tag = uuid.uuid4().hex[:6]
    names = {who: f"{who}-{tag}" for who in ROLES}
    keys = {who: stack.create_user(name) for who, name in names.items()}
    with stack.http(keys["admin"]) as admin:
        made = admin.post("/v1/teams", json={"name": f"people-{tag}"})
        assert made.status_code == 201, made.text
        team_id = made.json()["id"]
        for who, role in ROLES.items():
            if who != "admin":
                assert admin.put(f"/v1/teams/{team_id}/members/{names[who]}", json={"role": role}).status_code == 200
        for who in IN_HR:
            put = admin.put(f"/v1/teams/{team_id}/groups/hr/members/{names[who]}")
            assert put.status_code == 200 and put.json()["group"] == "hr", put.text
        collections = {}
        for name in ("policies", "slow"):
            created = admin.post("/v1/collections", json={"name": name, "team_id": team_id})
            assert created.status_code == 201, created.text
            collections[name] = created.json()["id"]
        slow = admin.post("/v1/agent-configs", json={"agent_id": "test_slow_responder", "config": {"sleep_s": SLOW_S}})
        assert slow.status_code == 201, slow.text
        linked = admin.put(f"/v1/collections/{collections['slow']}/agents",
                           json={"agents": [{"agent_config_id": slow.json()["id"]}]})
        assert linked.status_code == 200, linked.text
        for name, documents in (("policies", [*PUBLIC, SECRET]), ("slow", [*PUBLIC, BONUS, SLOW_SECRET])):
            sent = admin.post(f"/v1/collections/{collections[name]}/documents", json={"documents": documents})
            assert sent.status_code == 202, sent.text
        for collection_id in collections.values():
            indexed(admin, collection_id)
    return {"id": team_id, "name": f"people-{tag}", "keys": keys, "names": names, **collections}


@pytest.fixture(scope="module")
def jobs(stack, team) -> dict[str, dict]:
    """The searches of the query, in this order: the viewer's on cold caches (``cold``); an ``hr`` member's, which
    fills the search, embedding, agent and whole-job caches (``warm``), and again (``again``, from the cache); the
    viewer's of the same request (``after``); the admin's, also in ``hr`` (``shared``). Each asks for an executive
    summary, the cheapest artifact; ``warm`` and after it ask for top_k 6, so ``cold`` cannot answer ``after``."""
    c, keys, made = team["policies"], team["keys"], {}
    summary = {"agents": ["executive_summary"]}
    with stack.http(keys["viewer"]) as viewer:
        made["cold"] = search(viewer, c, QUERY, use_cache=False, **summary)
    with stack.http(keys["hr"]) as hr:
        made["warm"] = search(hr, c, QUERY, top_k=6, **summary)
        made["again"] = asked(hr, c, QUERY, top_k=6, **summary)
    with stack.http(keys["viewer"]) as viewer:
        made["after"] = asked(viewer, c, QUERY, top_k=6, **summary)
    with stack.http(keys["admin"]) as admin:
        made["shared"] = asked(admin, c, QUERY, top_k=6, **summary)
    return made


def no_trace_in_the_viewers_job(http: httpx.Client, job: dict) -> None:
    """Sources, answer, citations, counts, artifact and event stream of a viewer's job: only public documents."""
    assert job["status"] == "succeeded", job
    assert ids(job) and ids(job) <= {d["id"] for d in PUBLIC}, job["response"]["sources"]
    assert all(c.get("document_id") != SECRET["id"] for c in job["response"]["citations"])
    assert traces(json.dumps(job)) == [], traces(json.dumps(job))
    (artifact,) = job["response"]["agent_artifacts"]
    assert artifact["filename"] == "executive_summary.txt"
    downloaded = http.get(artifact["url"])
    assert downloaded.status_code == 200 and downloaded.content == base64.b64decode(artifact["data"])
    summary = downloaded.content.decode()
    assert summary.startswith(f"Executive summary: {QUERY}") and traces(summary) == [], summary
    events = http.get(f"/v1/jobs/{job['job_id']}/events")
    assert events.status_code == 200 and "event: done" in events.text and "event: answer" in events.text
    assert traces(events.text) == [], traces(events.text)


def test_a_viewers_search_word_for_word_of_a_restricted_document_finds_no_trace_of_it(stack, team, jobs):
    cold, warm = jobs["cold"], jobs["warm"]
    # The document is there to be found: the hr member's job finds it first, with its sentence quoted.
    assert warm["status"] == "succeeded" and SECRET["id"] in ids(warm), warm["response"]["sources"]
    assert "Severance pay is three months" in warm["response"]["answer"]
    with stack.http(team["keys"]["viewer"]) as viewer:
        no_trace_in_the_viewers_job(viewer, cold)
        assert cold["cached"] is False


def test_the_counts_of_a_viewers_search_are_of_what_it_finds(jobs):
    """Each document is one chunk here, so every count of the search says how many documents there are."""
    seen, full = jobs["cold"]["response"]["metadata"]["search"], jobs["warm"]["response"]["metadata"]["search"]
    assert seen["sources_found"] == full["sources_found"] - 1 == len(PUBLIC), (seen, full)
    assert seen["returned"] == len(jobs["cold"]["response"]["sources"]) == len(PUBLIC)
    # The collection's chunks by language, as the keyword analysis read them: of what the viewer finds.
    languages = seen.get("languages", {}).get("collection", {})
    assert sum(languages.values()) <= len(PUBLIC), (seen.get("languages"), full.get("languages"))


def test_with_every_cache_warmed_by_an_hr_member_the_viewers_job_still_finds_no_trace(stack, team, jobs):
    warm, again, after, shared = jobs["warm"], jobs["again"], jobs["after"], jobs["shared"]
    # Warm: the hr member's own second request, and the admin's (also in hr), are answered from its job.
    assert again["cached"] is True and cached_from(stack, again["job_id"]) == warm["job_id"]
    assert shared["cached"] is True and cached_from(stack, shared["job_id"]) == warm["job_id"]
    assert SECRET["id"] in ids(shared)
    # The viewer's identical request holds other groups: a job of its own, searched afresh.
    assert after["cached"] is False and cached_from(stack, after["job_id"]) is None
    assert after["job_id"] != warm["job_id"]
    with stack.http(team["keys"]["viewer"]) as viewer:
        no_trace_in_the_viewers_job(viewer, after)
    seen, full = after["response"]["metadata"]["search"], warm["response"]["metadata"]["search"]
    assert (seen["sources_found"], seen["returned"]) == (full["sources_found"] - 1, full["returned"] - 1)


def test_every_search_of_an_iterative_job_over_also_search_finds_no_trace_for_a_viewer(stack, team):
    """The team collection named in ``also_search`` of a job over the searcher's own collection, searched again in
    each iteration: the hr member's job finds the restricted document there, the viewer's in none of them."""
    lunch = {"id": "lunch", "title": "Lunch", "text": "Lunch is served at noon in the canteen."}
    found = {}
    for who in ("hr", "viewer"):
        with stack.http(team["keys"][who]) as member:
            own = own_collection(member, f"mine-{uuid.uuid4().hex[:6]}", [lunch])
            found[who] = search(member, own, QUERY, agents=[], use_cache=False, also_search=[team["policies"]],
                                mode="iterative", iterative={
                                    "max_iterations": 2, "per_iteration": 2, "sufficiency": False,
                                    # Every result graded is kept: what is found is what is shown.
                                    "thresholds": {"first": 1.0, "later": 1.0}})
    assert found["hr"]["status"] == "succeeded" and SECRET["id"] in ids(found["hr"]), found["hr"]["response"]
    job = found["viewer"]
    assert job["status"] == "succeeded" and ids(job) & {d["id"] for d in PUBLIC}, job["response"]["sources"]
    assert ids(job) <= {lunch["id"], *(d["id"] for d in PUBLIC)}, job["response"]["sources"]
    assert traces(json.dumps(job)) == [], traces(json.dumps(job))


def test_a_profile_set_run_of_a_viewer_finds_no_trace(stack, team):
    """A profile set's run is made by the scheduler's code, not by a search request's: the hr member's run finds the
    restricted document, the viewer's neither in the job nor in the set's listing of its runs."""
    runs = {}
    for who in ("hr", "viewer"):
        with stack.http(team["keys"][who]) as member:
            made = member.post("/v1/profile-sets", json={
                "name": f"severance-{uuid.uuid4().hex[:6]}", "collection_id": team["policies"], "query": QUERY,
                "profiles": [{"name": "all", "target": 3}],
                "iterative": {"max_iterations": 1, "thresholds": {"first": 1.0, "later": 1.0}}})
            assert made.status_code == 201, made.text
            run = member.post(f"/v1/profile-sets/{made.json()['id']}/runs")
            assert run.status_code == 202, run.text
            job = wait_job(member, run.json()["job_id"])
            listed = member.get(f"/v1/profile-sets/{made.json()['id']}/runs").json()
            runs[who] = json.dumps(job) + json.dumps(listed)
            assert job["status"] == "succeeded", job
    assert SECRET["id"] in runs["hr"]
    assert traces(runs["viewer"]) == [], traces(runs["viewer"])


def test_a_fact_checker_trusting_the_team_collection_is_no_oracle_for_a_restricted_document(stack, team):
    """A member's own document copying a sentence only the restricted document holds, checked by its own fact
    checker against the team collection: supported for the hr member, whose search of the team collection finds the
    original; for the viewer it may not be (nothing the viewer finds says so), though its job searches no team
    collection itself, so no document group of its own restricts it."""
    claim = SECRET["text"].removeprefix(QUERY).strip()  # "Each case is entered in the Quillfeather ledger (QFL) ..."
    checked = {}
    for who in ("hr", "viewer"):
        with stack.http(team["keys"][who]) as member:
            own = own_collection(member, f"claims-{uuid.uuid4().hex[:6]}", [{"id": "copy", "title": "Copy",
                                                                           "text": claim}])
            use_agents(member, own, {"agent_id": "fact_checker", "config": {"trusted_collection_id": team["policies"]}})
            job = search(member, own, claim, use_cache=False)
        assert job["status"] == "succeeded" and runs_by_agent(job)["fact_checker"]["status"] == "ok", job
        checked[who] = job
    assert checked["hr"]["response"]["metadata"]["fact_check"]["supported"] == 1, checked["hr"]["response"]["metadata"]
    verdicts = checked["viewer"]["response"]["metadata"]["fact_check"]
    assert (verdicts["supported"], verdicts["mixed"]) == (0, 0), verdicts
    assert traces(json.dumps(checked["viewer"]), ("hr-severance", "Quillfeather severance")) == []


def test_the_agents_reading_the_collections_words_learn_none_of_a_restricted_document(stack, team):
    """The spell checker corrects toward the collection's vocabulary, the acronym resolver expands the acronyms its
    text defines: for a viewer, neither may come from the restricted document ("Quillfether" is one letter from its
    word, "QFL" its acronym for "Quillfeather ledger")."""
    with stack.http(team["keys"]["viewer"]) as viewer:
        job = search(viewer, team["policies"], "Quillfether QFL entries", use_cache=False,
                     agents=["spell_checker", "acronym_resolver"])
    assert job["status"] == "succeeded", job
    # Skipped is an answer too: no acronym the viewer's documents define.
    ran = {r["agent_id"]: r["status"] for r in job["response"]["agents"]}
    assert set(ran) == {"spell_checker", "acronym_resolver"} and set(ran.values()) <= {"ok", "skipped"}, ran
    assert traces(json.dumps(job).lower(), ("quillfeather", "ledger")) == [], job["response"]["search_query"]


def test_an_hr_members_job_is_missing_to_the_members_outside_the_group(stack, team, jobs):
    warm = jobs["warm"]["job_id"]
    artifact = f"/v1/jobs/{warm}/artifacts/executive_summary.txt"
    for who in ("viewer", "editor"):
        with stack.http(team["keys"][who]) as member:
            for path in (f"/v1/jobs/{warm}", f"/v1/jobs/{warm}/events", artifact):
                _same_as_missing(member, path, warm)
            listed = {j["job_id"] for j in member.get("/v1/jobs", params={"limit": 200}).json()["items"]}
            assert warm not in listed and jobs["shared"]["job_id"] not in listed
            assert jobs["cold"]["job_id"] in listed  # the viewer's, read by every member
            assert member.delete(f"/v1/jobs/{warm}").status_code == 404
    with stack.http(team["keys"]["admin"]) as admin:
        assert admin.get(f"/v1/jobs/{warm}").status_code == 200 and admin.get(artifact).status_code == 200


def test_the_job_listing_counts_only_the_jobs_a_member_outside_the_group_may_read(stack, team, jobs):
    """The page's ``total`` is no count of the hr members' searches: every job of the module fits on one page."""
    for who in ("viewer", "editor"):
        with stack.http(team["keys"][who]) as member:
            page = member.get("/v1/jobs", params={"limit": 200}).json()
            assert page["total"] == len(page["items"]), (who, page["total"], len(page["items"]))


def test_a_member_taken_out_of_the_group_mid_job_gets_404_for_that_job(stack, team):
    t, slow, mover = team["id"], team["slow"], team["keys"]["mover"]
    with stack.http(mover) as member:
        conversation = member.post("/v1/conversations", json={"title": "dismissals"}).json()["id"]
        job_id = submitted(member, slow, SLOW_SECRET["text"], use_cache=False, conversation_id=conversation)
        until_stage(member, job_id, "response")
        with stack.http(team["keys"]["admin"]) as admin:
            out = admin.delete(f"/v1/teams/{t}/groups/hr/members/{team['names']['mover']}")
            assert out.status_code == 204, out.text
            # Its very next request, the job still running.
            _same_as_missing(member, f"/v1/jobs/{job_id}", job_id)
            finished = wait_job(admin, job_id, timeout_s=60)
        assert finished["status"] == "succeeded" and SLOW_SECRET["id"] in ids(finished), finished
        for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/events", f"/v1/jobs/{job_id}/artifacts/slow.txt"):
            _same_as_missing(member, path, job_id)
        assert job_id not in {j["job_id"] for j in member.get("/v1/jobs", params={"limit": 200}).json()["items"]}
        # The job's turn, recorded when it ended, is not the member's to read in its own conversation either.
        assert stack.sql("SELECT count(*) FROM conversation_turns WHERE job_id = %s", job_id) == [(1,)]
        kept = member.get(f"/v1/conversations/{conversation}").json()
        assert (kept["turns"], kept["turn_count"]) == ([], 0), kept
        # And its next search finds the public documents only.
        again = search(member, slow, SLOW_SECRET["text"], agents=[], use_cache=False)
        assert again["status"] == "succeeded" and SLOW_SECRET["id"] not in ids(again), again["response"]["sources"]
        # Its sentence would show quoted with a citation mark ("... working days [1].").
        assert traces(json.dumps(again), ("hr-slow", "Quillfeather", "working days ["), SLOW_SECRET["text"]) == []


def test_a_document_moved_into_a_group_mid_job_makes_the_viewers_job_unreadable(stack, team):
    """The viewer's job found the public document and wrote its answer; then the document is restricted to ``hr``
    while the job's response stage runs. What the viewer gets back afterwards: the submission's own wait, the
    event stream opened then, the job, its events and artifact once it has ended."""
    slow, key = team["slow"], team["keys"]["viewer"]
    moved = (BONUS["id"], "Marigold", "paid in March")

    def waited() -> httpx.Response:
        with stack.http(key, timeout_s=90) as http:
            return http.post("/v1/search", params={"wait": 60},
                             json={"collection_id": slow, "query": BONUS_QUERY, "use_cache": False})

    with stack.http(key) as viewer, stack.http(team["keys"]["admin"]) as admin, ThreadPoolExecutor(1) as pool:
        submission = pool.submit(waited)
        job_id = running_job(viewer, BONUS_QUERY)
        until_stage(viewer, job_id, "response")  # the search found the public document; the answer quotes it
        resent = admin.post(f"/v1/collections/{slow}/documents",
                            json={"documents": [{**BONUS, "access": {"groups": ["hr"]}}]})
        assert resent.status_code == 202, resent.text
        # Still running: the answer already written must not reach the viewer through the event stream.
        with viewer.stream("GET", f"/v1/jobs/{job_id}/events") as events:
            streamed = events.status_code, "".join(events.iter_text())
        answered = submission.result(timeout=90)
        finished = wait_job(admin, job_id, timeout_s=60)
        assert finished["status"] == "succeeded" and BONUS["id"] in ids(finished), finished["response"]["sources"]
        # The wait ended with the job: its answer is the 202 of an id, which reads as missing.
        assert answered.status_code == 202 and answered.json()["job_id"] == job_id, answered.text
        assert traces(answered.text, moved) == []
        for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/events", f"/v1/jobs/{job_id}/artifacts/slow.txt"):
            _same_as_missing(viewer, path, job_id)
        assert job_id not in {j["job_id"] for j in viewer.get("/v1/jobs", params={"limit": 200}).json()["items"]}
        _same_as_missing(viewer, f"/v1/collections/{slow}/documents/{BONUS['id']}", BONUS["id"])
    leaked = [line for line in streamed[1].splitlines() if traces(line, moved)]
    assert streamed[0] == 404 or leaked == [], (streamed[0], leaked)


def test_a_document_restricted_before_the_search_of_a_collection_without_groups_stays_out_of_reach(stack, team):
    """Where no document of a collection is restricted, its jobs search without the access filter. One restricted
    while a viewer's job over it waits in its pre-search agent (and indexed again with its groups before the search
    runs) is found by that search all the same: the job is the hr members', 404 to the viewer."""
    tag = uuid.uuid4().hex[:6]
    with stack.http(team["keys"]["admin"]) as admin:
        made = admin.post("/v1/collections", json={"name": f"open-{tag}", "team_id": team["id"]})
        assert made.status_code == 201, made.text
        c = made.json()["id"]
        # The job waits in its pre-search agent until the document is indexed again, however long that takes.
        gate = stack.call_logs / f"gate-{tag}"
        use_agents(admin, c, {"agent_id": "test_gated", "config": {"gate": str(gate)}})
        assert admin.post(f"/v1/collections/{c}/documents", json={"documents": [*PUBLIC, BONUS]}).status_code == 202
        indexed(admin, c)
        with stack.http(team["keys"]["viewer"]) as viewer:
            job_id = submitted(viewer, c, BONUS_QUERY, use_cache=False)
            resent = admin.post(f"/v1/collections/{c}/documents",
                                json={"documents": [{**BONUS, "access": {"groups": ["hr"]}}]})
            assert resent.status_code == 202, resent.text
            indexed(admin, c)
            stage = viewer.get(f"/v1/jobs/{job_id}").json()["stage"] or "queued"  # "pre_search:test_gated"
            gate.touch()
            assert stage.split(":")[0] in ("queued", "pre_search"), f"searched too soon: {stage}"
            finished = wait_job(admin, job_id, timeout_s=60)
            assert finished["status"] == "succeeded" and BONUS["id"] in ids(finished), finished["response"]["sources"]
            for path in (f"/v1/jobs/{job_id}", f"/v1/jobs/{job_id}/events"):
                _same_as_missing(viewer, path, job_id)


def test_listings_reads_and_counts_hide_a_restricted_document(stack, team):
    c = team["policies"]
    for who in ("viewer", "editor"):
        with stack.http(team["keys"][who]) as member:
            listed = member.get(f"/v1/collections/{c}/documents").json()
            assert {d["id"] for d in listed["items"]} == {d["id"] for d in PUBLIC} and listed["total"] == len(PUBLIC)
            assert traces(json.dumps(listed)) == []
            _same_as_missing(member, f"/v1/collections/{c}/documents/{SECRET['id']}", SECRET["id"])
            counts = member.get(f"/v1/collections/{c}").json()["documents"]
            assert counts == {"pending": 0, "indexed": len(PUBLIC), "failed": 0}
            assert {x["id"]: x["documents"] for x in member.get("/v1/collections").json()}[c] == counts
    with stack.http(team["keys"]["hr"]) as hr:
        listed = {d["id"]: d for d in hr.get(f"/v1/collections/{c}/documents").json()["items"]}
        assert listed[SECRET["id"]]["access"] == {"groups": ["hr"]} and listed["leave"]["access"] is None
        read = hr.get(f"/v1/collections/{c}/documents/{SECRET['id']}").json()
        # The groups show as access; the tokens the service keeps in the metadata do not.
        assert (read["text"], read["access"], read["metadata"]) == (SECRET["text"], {"groups": ["hr"]},
                                                                    SECRET["metadata"])


def test_no_member_outside_the_group_reaches_its_document_by_id_metadata_or_filter(stack, team):
    """Escalation short of joining the group: an editor outside ``hr`` replacing (as JSON or as a file), deleting or
    labelling its way to the restricted document; a viewer's filter naming the service's own metadata key. Joining it (a
    viewer or an editor putting itself in ``hr``: 403 naming ``admin``; an outsider: 404) is
    ``test_teams.py::test_only_an_admin_changes_who_is_in_a_group_and_nobody_puts_itself_in_one``; changing one's
    own role, ``test_teams.py::test_nobody_raises_its_own_role``."""
    t, c = team["id"], team["policies"]
    with stack.http(team["keys"]["viewer"]) as viewer:
        # A member outside every group learns no group's name, nor who is in one.
        assert viewer.get(f"/v1/teams/{t}").json()["groups"] == []
        probe = viewer.post("/v1/search", json={"collection_id": c, "query": QUERY, "agents": [], "use_cache": False,
                                                "filter": {"in": {"key": "_access_groups", "values": [f"{t}:hr"]}}})
        # Refused or searched: either way the filter is joined to the access clause, never in its place.
        assert probe.status_code in (202, 422), probe.text
        if probe.status_code == 202:
            found = wait_job(viewer, probe.json()["job_id"])
            assert found["status"] == "succeeded" and found["response"]["sources"] == [], found
            assert traces(json.dumps(found)) == []
    with stack.http(team["keys"]["editor"]) as editor:
        replaced = editor.post(f"/v1/collections/{c}/documents",
                               json={"documents": [{"id": SECRET["id"], "title": "mine", "text": "Overwritten."}]})
        assert replaced.status_code == 409 and "restricted to groups you are not in" in replaced.json()["detail"]
        uploaded = editor.post(f"/v1/collections/{c}/files", data={"document_ids": [SECRET["id"]]},
                               files=[("files", ("mine.txt", b"Overwritten by a file.", "text/plain"))])
        assert uploaded.status_code == 409 and "restricted to groups you are not in" in uploaded.json()["detail"]
        _same_as_missing(editor, f"/v1/collections/{c}/documents/{SECRET['id']}", SECRET["id"])
        assert editor.delete(f"/v1/collections/{c}/documents/{SECRET['id']}").status_code == 404
        labelled = editor.post(f"/v1/collections/{c}/documents", json={"documents": [
            {"id": "forged", "title": "Forged", "text": "A note.", "metadata": {"_access_groups": [f"{t}:hr"]}}]})
        assert labelled.status_code == 422 and labelled.json()["detail"][0]["loc"][:3] == ["body", "documents", 0]
    with stack.http(team["keys"]["admin"]) as admin:
        kept = admin.get(f"/v1/collections/{c}/documents/{SECRET['id']}").json()
        assert kept["text"] == SECRET["text"] and kept["access"] == {"groups": ["hr"]}
    assert stack.sql("SELECT count(*) FROM documents WHERE collection_id = %s AND external_id = 'forged'", c) == [(0,)]


def test_access_is_taken_on_every_way_in_and_refused_on_a_personal_collection(stack, team, tmp_path):
    tag = uuid.uuid4().hex[:6]
    with stack.http(team["keys"]["admin"]) as admin:
        made = admin.post("/v1/collections", json={"name": f"intake-{tag}", "team_id": team["id"]})
        assert made.status_code == 201, made.text
        c = made.json()["id"]
        personal = admin.post("/v1/collections", json={"name": f"own-{tag}"}).json()["id"]
        # A personal collection has no groups: 422 naming the field, nothing stored.
        refused = admin.post(f"/v1/collections/{personal}/documents",
                             json={"documents": [{"id": "p", "text": "Personal.", "access": {"groups": ["hr"]}}]})
        assert refused.status_code == 422 and refused.json()["detail"][0]["loc"] == ["body", "documents", 0, "access"]
        form = admin.post(f"/v1/collections/{personal}/files", data={"access": json.dumps({"groups": ["hr"]})},
                          files=[("files", ("note.txt", b"A personal note.", "text/plain"))])
        assert form.status_code == 422 and "access" in form.json()["detail"][0]["loc"], form.text
        assert admin.get(f"/v1/collections/{personal}/documents").json()["total"] == 0
        # On the team's: a JSON Lines line's own access wins over the form's, which the other files take.
        lines = [{"id": "jl-finance", "title": "Budget", "text": "The Zephyrine budget closes in May.",
                  "access": {"groups": ["finance"]}},
                 {"id": "jl-open", "title": "Canteen", "text": "The canteen opens at noon."}]
        upload = admin.post(f"/v1/collections/{c}/files", data={"access": json.dumps({"groups": ["hr"]})},
                            files=[("files", ("lines.jsonl", "".join(json.dumps(x) + "\n" for x in lines).encode(),
                                              "application/x-ndjson")),
                                   ("files", ("memo.txt", b"The Zephyrine memo names the new head of payroll.",
                                              "text/plain"))])
        assert upload.status_code == 202, upload.text
        # The command line, as the same admin, by TEAM/NAME.
        path = tmp_path / "cli.jsonl"
        path.write_text(json.dumps({"id": "cli-hr", "title": "Appraisals", "text": "Zephyrine appraisals run in June.",
                                    "access": {"groups": ["hr"]}}) + "\n")
        _as(stack, team["keys"]["admin"], "ingest", str(path), "--collection", f"{team['name']}/intake-{tag}")
        indexed(admin, c)
        # The admin is in hr, not in finance: it lists what it finds, each with its groups.
        access = {d["id"]: d["access"] for d in admin.get(f"/v1/collections/{c}/documents").json()["items"]}
        assert access == {"jl-open": {"groups": ["hr"]}, "memo": {"groups": ["hr"]},
                          "cli-hr": {"groups": ["hr"]}}, access
    stored = stack.sql("SELECT d.external_id, g.name FROM documents d JOIN document_groups g ON g.document_id = d.id "
                       "WHERE d.collection_id = %s ORDER BY 1", c)
    assert stored == [("cli-hr", "hr"), ("jl-finance", "finance"), ("jl-open", "hr"), ("memo", "hr")], stored
    with stack.http(team["keys"]["viewer"]) as viewer:
        assert viewer.get(f"/v1/collections/{c}/documents").json()["items"] == []
        # Indexed with their groups: the viewer's search over them finds nothing, the admin's finds the hr ones.
        found = search(viewer, c, "Zephyrine", agents=[], use_cache=False)
        assert found["status"] == "succeeded" and found["response"]["sources"] == [], found["response"]["sources"]
        assert "Zephyrine" not in found["response"]["answer"]
    with stack.http(team["keys"]["admin"]) as admin:
        found = ids(search(admin, c, "Zephyrine", agents=[], use_cache=False))
        assert {"memo", "cli-hr"} <= found and "jl-finance" not in found, found
        # Sent again with other groups, or none, a document changes its groups.
        again = admin.post(f"/v1/collections/{c}/documents", json={"documents": [
            {"id": "memo", "title": "memo", "text": "The Zephyrine memo names the new head of payroll."},
            {"id": "cli-hr", "title": "Appraisals", "text": "Zephyrine appraisals run in June.",
             "access": {"groups": ["finance"]}}]})
        assert again.status_code == 202, again.text
        indexed(admin, c)
    with stack.http(team["keys"]["viewer"]) as viewer:
        listed = {d["id"]: d["access"] for d in viewer.get(f"/v1/collections/{c}/documents").json()["items"]}
        assert listed == {"memo": None}
        assert ids(search(viewer, c, "Zephyrine", agents=[], use_cache=False)) == {"memo"}
    with stack.http(team["keys"]["admin"]) as admin:
        # The admin is in hr, not finance: cli-hr has left its reach.
        _same_as_missing(admin, f"/v1/collections/{c}/documents/cli-hr", "cli-hr")


def test_an_editors_collection_webhook_hears_nothing_of_an_hr_members_job(
        stack, team, allowed_api, receiver):  # noqa: F811 - the fixtures imported above
    c = team["policies"]
    with client(allowed_api, team["keys"]["editor"]) as editor:
        hook = editor.post("/v1/webhooks", json={"url": f"{receiver.url}/groups", "events": ["job.succeeded"],
                                                 "collection_id": c})
        assert hook.status_code == 201, hook.text
        hook_id = hook.json()["id"]
    with stack.http(team["keys"]["hr"]) as hr:
        secret_job = search(hr, c, QUERY, agents=[], use_cache=False)
        assert SECRET["id"] in ids(secret_job)
    with stack.http(team["keys"]["viewer"]) as viewer:
        public_job = search(viewer, c, "How long is the notice period?", agents=[], use_cache=False)
    # The viewer's job, which the editor reads, is heard; by then the hr member's had ended long before.
    receiver.wait_processed("/groups", 1)
    bodies = [json.loads(r.body) for r in receiver.received("/groups")]
    assert {b["data"]["job_id"] for b in bodies} == {public_job["job_id"]}, bodies
    for body in bodies:
        assert not {"answer", "sources", "documents", "response"} & set(body["data"]), body
        assert traces(json.dumps(body)) == []
    with client(allowed_api, team["keys"]["editor"]) as editor:
        assert {d["job_id"] for d in deliveries(editor, hook_id)} == {public_job["job_id"]}
        assert editor.delete(f"/v1/webhooks/{hook_id}").status_code == 204


def test_the_mcp_tools_find_no_trace_of_a_restricted_document_for_a_viewer(stack, team, jobs):
    warm = jobs["warm"]["job_id"]

    async def steps(mcp: Client):
        return [await mcp.call_tool("search", {"collection": team["policies"], "query": QUERY, "agents": [],
                                               "use_cache": False, "wait_s": 60}),
                await mcp.call_tool("get_job", {"job_id": warm})]

    searched, theirs = _session(_http(stack, {"Authorization": f"Bearer {team['keys']['viewer']}"}), steps)
    assert not searched.is_error, _text(searched)
    outcome = searched.structured_content
    assert outcome["status"] == "succeeded" and {s["document_id"] for s in outcome["sources"]} <= {"leave", "travel"}
    assert traces(json.dumps(outcome)) == [] and traces(_text(searched)) == []
    assert theirs.is_error and _reason(theirs) == f"HTTP 404: job {warm} not found"
