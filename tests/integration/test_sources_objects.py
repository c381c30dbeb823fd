"""An objects source's runs on PostgreSQL against a real S3 protocol server started here (moto's server with
authentication on, ``tests/support/s3_server.py``), its key prefixes mapped to a team collection's document groups."""

from __future__ import annotations

import pytest

from agentsearch.devstack.s3_server import S3Server
from tests.integration.test_sources_mail import TeamRunner
from tests.integration.test_sources_runs import database, settings  # noqa: F401  (database: a fixture)

pytestmark = pytest.mark.integration


def _groups(runner: TeamRunner) -> dict[str, list[str]]:
    return {url.removeprefix("s3://handbook/"): names for url, names in runner.group_names().items()}


def test_a_bucket_is_read_by_etag_a_page_at_a_time_and_its_prefixes_give_the_documents_groups(
        database, tmp_path, monkeypatch):  # noqa: F811
    from agentsearch.pipeline.sources.kinds import objects

    monkeypatch.setattr(objects, "PAGE", 2)  # a listing of several pages
    with S3Server() as s3:
        client = s3.client()
        client.create_bucket(Bucket="handbook")
        client.put_bucket_versioning(Bucket="handbook", VersioningConfiguration={"Status": "Enabled"})
        put = lambda key, body: client.put_object(Bucket="handbook", Key=key, Body=body)  # noqa: E731
        put("team/guide.md", b"# Guide\n\nThe silo opens at six.\n")
        put("team/notes.txt", b"Harvest notes: early this year.\n")
        put("team/hr/pay.md", b"# Pay\n\nSalaries rise in May.\n")
        put("team/big.txt", b"x" * 300_000)
        put("other/outside.md", b"# Outside the prefix\n")
        runner = TeamRunner(database, settings())
        config = {"bucket": "handbook", "prefix": "team/", "endpoint_url": s3.url, "access_key": s3.access_key,
                  "secret_key": s3.secret_key, "groups": {"team/hr": "hr"}}
        runner.add("objects", config)

        first = runner.run()
        assert first["status"] == "succeeded", first
        assert first["documents"] == {"new": 3, "changed": 0, "unchanged": 0, "removed": 0, "failed": 1}, first
        assert "team/big.txt: 300000 bytes, over the limit of 200000" in first["errors"][0]
        assert _groups(runner) == {"team/guide.md": [], "team/notes.txt": [], "team/hr/pay.md": ["hr"]}
        assert "silo opens at six" in runner.documents()["s3://handbook/team/guide.md"].text

        second = runner.run()
        assert second["documents"] == {"new": 0, "changed": 0, "unchanged": 3, "removed": 0, "failed": 1}, second
        assert runner.tasks == []

        # A new version of one object, one added, one deleted, one moved under team/hr/.
        put("team/guide.md", b"# Guide\n\nThe silo opens at seven.\n")
        put("team/faq.md", b"# FAQ\n\nAsk the co-op.\n")
        client.delete_object(Bucket="handbook", Key="team/big.txt")
        client.copy_object(Bucket="handbook", Key="team/hr/notes.txt",
                           CopySource={"Bucket": "handbook", "Key": "team/notes.txt"})
        client.delete_object(Bucket="handbook", Key="team/notes.txt")
        third = runner.run()
        assert third["documents"] == {"new": 2, "changed": 1, "unchanged": 1, "removed": 1, "failed": 0}, third
        assert _groups(runner) == {"team/guide.md": [], "team/faq.md": [], "team/hr/notes.txt": ["hr"],
                                   "team/hr/pay.md": ["hr"]}
        assert "opens at seven" in runner.documents()["s3://handbook/team/guide.md"].text

        # The mapping changed: groups at the next run, nothing read again.
        runner.reconfigure(groups={"team/hr": "hr", "team/": "staff"})
        regrouped = runner.run()
        assert regrouped["documents"] == {"new": 0, "changed": 2, "unchanged": 2, "removed": 0, "failed": 0}
        assert _groups(runner)["team/faq.md"] == ["staff"] and runner.sent("parse_document") == []

        # Past max_items: those listed read, none removed, the limit said.
        runner.reconfigure(max_items=2)
        limited = runner.run()
        assert limited["status"] == "succeeded" and "more than 2 objects" in limited["errors"][0], limited
        assert limited["documents"]["removed"] == 0 and len(runner.documents()) == 4
        runner.reconfigure(max_items=10_000)

        # Wrong keys: the store's refusal, nothing removed.
        runner.reconfigure(secret_key="wrong")
        refused = runner.run()
        assert refused["status"] == "failed" and "SignatureDoesNotMatch" in refused["errors"][0], refused
        assert refused["documents"]["removed"] == 0 and len(runner.documents()) == 4
        runner.reconfigure(secret_key=s3.secret_key)

    # The store gone: the run fails, and every document stays.
    gone = runner.run()
    assert gone["status"] == "failed" and gone["errors"][0].startswith("s3 handbook: "), gone
    assert gone["documents"]["removed"] == 0 and len(runner.documents()) == 4


def test_the_objects_bench_reads_every_object_once_and_an_unchanged_bucket_with_one_listing():
    from agentsearch.bench import sources_stores

    figures = sources_stores.measure("objects", 30, 1, sqlite=False)
    # One ListObjectsV2 page (a thousand keys a page), a GetObject per object; unchanged: the listing alone.
    assert figures["first_run_requests"] == 1 + 30
    assert figures["unchanged_run_requests_median"] == 1 and figures["unchanged_run_documents_stored"] == 0
