"""Sources' runs on PostgreSQL against real servers started here: a web site and a feed served by a threaded HTTP
server over a folder changed between runs, a repository served by ``git daemon``. Each run is the worker task's body
(``run_source``); the tasks it would send are collected and checked."""

from __future__ import annotations

import uuid

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr
from sqlalchemy import select

from agentsearch.pipeline.platform.db import Database
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.platform.tables.collections import CollectionRow, DocumentRow
from agentsearch.pipeline.platform.tables.sources import SourceRow
from agentsearch.pipeline.platform.tables.users import DEFAULT_USER_ID
from agentsearch.pipeline.sources.run import run_source
from agentsearch.pipeline.sources.store import create_source, new_run, shown, take_lease
from tests.support.databases import migrated_database
from tests.support.source_servers import GitDaemon, SiteServer, git

pytestmark = pytest.mark.integration


@pytest.fixture
def database():
    with migrated_database("sources") as db:
        yield db


# The test's servers are on 127.0.0.1: the operator's allowlist opens it, as a deployment opens an internal host.
LOOPBACK = ["127.0.0.1"]


def settings(**extra) -> Settings:
    key = SecretStr(Fernet.generate_key().decode())
    return Settings(egress_allow=extra.pop("egress_allow", LOOPBACK), sources_key=key,
                    sources_max_item_bytes=extra.pop("max_bytes", 200_000),
                    sources_fetch_timeout_s=extra.pop("sources_fetch_timeout_s", 5), **extra)


class Runner:
    """A collection of the local user, a source in it, and its runs with the tasks each would send."""

    def __init__(self, db: Database, config: Settings) -> None:
        self.db, self.settings = db, config
        with db.session() as s:
            collection = CollectionRow(user_id=DEFAULT_USER_ID, name=f"c-{uuid.uuid4().hex[:8]}", embedding_model="m")
            s.add(collection)
            s.flush()
            self.collection_id = collection.id
        self.tasks: list[tuple] = []

    def add(self, kind: str, config: dict) -> uuid.UUID:
        with self.db.session() as s:
            collection = s.get(CollectionRow, self.collection_id)
            self.source_id = create_source(s, self.settings, collection, DEFAULT_USER_ID, kind, config, None, True).id
        return self.source_id

    def run(self) -> dict:
        with self.db.session() as s:
            run_id = new_run(s, s.get(SourceRow, self.source_id), "manual").id
        self.tasks = []
        return run_source(self.db, self.settings, run_id, self.tasks.extend)

    def documents(self) -> dict[str, DocumentRow]:
        with self.db.session() as s:
            rows = s.scalars(select(DocumentRow).where(DocumentRow.collection_id == self.collection_id)).all()
            s.expunge_all()
            return {row.metadata_["source_url"]: row for row in rows}

    def sent(self, name: str) -> list[tuple]:
        return [t for t in self.tasks if t[0] == f"agentsearch.{name}"]


def _page(title: str, body: str, links: list[str] = ()) -> str:
    anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
    return f"<html><head><title>{title}</title></head><body><p>{body}</p>{anchors}</body></html>"


def test_a_web_site_is_read_again_only_where_it_changed_and_a_failed_listing_removes_nothing(database, tmp_path):
    with SiteServer(tmp_path / "site") as site:
        site.write("/docs/index.html", _page("Handbook", "Start here.", ["guide.html", "faq.html", "/other/x.html"]))
        site.write("/docs/guide.html", _page("Guide", "The grid was stable.", ["index.html"]))
        site.write("/docs/faq.html", _page("FAQ", "Questions and answers."))
        site.write("/other/x.html", _page("Outside", "Not under the start's folder."))
        site.write("/robots.txt", "User-agent: *\nDisallow: /docs/private/\n")
        site.write("/docs/private/secret.html", _page("Private", "robots.txt keeps this out."))
        site.write("/docs/index.html", _page("Handbook", "Start here.",
                                             ["guide.html", "faq.html", "/other/x.html", "private/secret.html"]))
        runner = Runner(database, settings())
        runner.add("web", {"url": site.url("/docs/index.html"), "max_pages": 10, "max_depth": 2})

        first = runner.run()
        assert first["status"] == "succeeded", first
        assert first["documents"] == {"new": 3, "changed": 0, "unchanged": 0, "removed": 0, "failed": 0}
        documents = runner.documents()
        assert set(documents) == {site.url(f"/docs/{p}.html") for p in ("index", "guide", "faq")}
        guide = documents[site.url("/docs/guide.html")]
        assert guide.title == "Guide" and guide.status == "pending" and guide.metadata_["source_kind"] == "web"
        assert guide.metadata_["source_id"] == str(runner.source_id)
        # The stored files go to the parsing queue, as uploads' do: one task per page, carrying its row.
        assert sorted(t[1][1] for t in runner.sent("parse_document")) == sorted(str(d.id) for d in documents.values())

        site.requests.clear()
        second = runner.run()
        assert second["documents"] == {"new": 0, "changed": 0, "unchanged": 3, "removed": 0, "failed": 0}, second
        assert runner.tasks == []  # nothing stored, nothing parsed, nothing embedded
        assert "/other/x.html" not in site.requests and "/docs/private/secret.html" not in site.requests

        site.write("/docs/guide.html", _page("Guide", "The grid was unstable in May.", ["index.html"]))
        site.write("/docs/index.html", _page("Handbook", "Start here.", ["guide.html"]))
        (site.root / "docs" / "faq.html").unlink()
        third = runner.run()
        assert third["documents"] == {"new": 0, "changed": 2, "unchanged": 0, "removed": 1, "failed": 0}, third
        documents = runner.documents()
        assert set(documents) == {site.url("/docs/index.html"), site.url("/docs/guide.html")}
        faq_id = f"source-{runner.source_id.hex[:12]}:{site.url('/docs/faq.html')}"
        assert runner.sent("delete_documents") == [("agentsearch.delete_documents",
                                                    (str(runner.collection_id), [faq_id]), None)]
        assert len(runner.sent("parse_document")) == 2

    # The server gone: the listing fails with its reason, and every document stays.
    failed = runner.run()
    assert failed["status"] == "failed" and "ConnectError" in failed["errors"][0], failed
    assert failed["documents"]["removed"] == 0 and runner.tasks == []
    assert set(runner.documents()) == {site.url("/docs/index.html"), site.url("/docs/guide.html")}


def test_a_sitemap_lists_the_pages_read(database, tmp_path):
    with SiteServer(tmp_path / "site") as site:
        site.write("/docs/a.html", _page("A", "Alpha."))
        site.write("/docs/b.html", _page("B", "Beta."))
        site.write("/docs/sitemap.xml", '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/'
                   f'sitemap/0.9"><url><loc>{site.url("/docs/a.html")}</loc></url><url><loc>{site.url("/docs/b.html")}'
                   f'</loc></url><url><loc>https://elsewhere.example/c.html</loc></url></urlset>')
        runner = Runner(database, settings())
        runner.add("web", {"url": site.url("/docs/sitemap.xml")})
        assert runner.run()["documents"]["new"] == 2
        assert set(runner.documents()) == {site.url("/docs/a.html"), site.url("/docs/b.html")}
        assert runner.run()["documents"] == {"new": 0, "changed": 0, "unchanged": 2, "removed": 0, "failed": 0}


ATOM = """<?xml version="1.0" encoding="utf-8"?>
<feed xmlns="http://www.w3.org/2005/Atom"><title>News</title><id>urn:news</id><updated>2026-11-01T00:00:00Z</updated>
{entries}</feed>"""
ENTRY = ('<entry><title>{title}</title><id>urn:news:{n}</id><updated>2026-11-0{n}T00:00:00Z</updated>'
         '<link href="{link}"/></entry>')


def test_a_feed_reads_each_new_entry_s_page_once(database, tmp_path):
    with SiteServer(tmp_path / "site") as site:
        entries = [ENTRY.format(title="Solar", n=1, link=site.url("/news/solar.html")),
                   ENTRY.format(title="Wind", n=2, link=site.url("/news/wind.html"))]
        site.write("/news/solar.html", _page("Solar", "Panels on every roof."))
        site.write("/news/wind.html", _page("Wind", "Turbines offshore."))
        site.write("/feed.atom", ATOM.format(entries="".join(entries)))
        runner = Runner(database, settings())
        runner.add("feed", {"url": site.url("/feed.atom")})
        first = runner.run()
        assert first["documents"] == {"new": 2, "changed": 0, "unchanged": 0, "removed": 0, "failed": 0}, first
        assert {d.title for d in runner.documents().values()} == {"Solar", "Wind"}

        site.requests.clear()
        assert runner.run()["documents"]["new"] == 0 and runner.tasks == []
        assert site.requests == ["/feed.atom"]  # the feed asked for, unchanged (304): no entry's page read

        # A new entry, and the oldest gone from the feed: the new one read, the old one's document kept.
        site.write("/news/tides.html", _page("Tides", "Tidal power in the estuary."))
        site.write("/feed.atom", ATOM.format(entries=entries[1] + ENTRY.format(title="Tides", n=3,
                                                                               link=site.url("/news/tides.html"))))
        site.requests.clear()
        third = runner.run()
        assert third["documents"] == {"new": 1, "changed": 0, "unchanged": 2, "removed": 0, "failed": 0}, third
        assert sorted(site.requests) == ["/feed.atom", "/news/tides.html"]
        assert len(runner.documents()) == 3


def test_a_repository_is_read_by_commit_without_its_symlinks_or_submodules(database, tmp_path):
    from tests.support.pdfs import page_text, pdf_file

    repo = tmp_path / "repos" / "handbook"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("# Handbook\n\nThe cooperative shares one silo.\n")
    (repo / "tool.py").write_text("def harvest():\n    return 'grain'\n")
    (repo / "report.pdf").write_bytes(pdf_file([page_text("Revenue reached 412 million euros.")]))
    (repo / "passwd.md").symlink_to("/etc/passwd")
    (repo / "big.txt").write_text("x" * 300_000)
    other = tmp_path / "repos" / "other"
    other.mkdir()
    git(other, "init", "-q", "-b", "main")
    (other / "inner.md").write_text("# Inner\n")
    git(other, "add", ".")
    git(other, "commit", "-qm", "inner")
    git(repo, "submodule", "add", "-q", str(other), "vendor/other")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    with GitDaemon(tmp_path / "repos") as daemon:
        runner = Runner(database, settings())
        runner.add("git", {"url": daemon.url("handbook"), "branch": "main"})
        first = runner.run()
        assert first["status"] == "succeeded", first
        assert first["documents"] == {"new": 3, "changed": 0, "unchanged": 0, "removed": 0, "failed": 1}, first
        assert "big.txt: 300000 bytes, over the limit of 200000" in first["errors"]
        documents = {url.rsplit(":", 1)[1]: row for url, row in runner.documents().items()}
        assert set(documents) == {"README.md", "tool.py", "report.pdf"}  # no symlink, no submodule's file
        assert "one silo" in documents["README.md"].text and documents["tool.py"].text.startswith("def harvest")
        assert len(runner.sent("ingest_documents")) == 1 and len(runner.sent("parse_document")) == 1

        second = runner.run()
        assert second["documents"]["unchanged"] == 3 and runner.tasks == []

        (repo / "README.md").write_text("# Handbook\n\nThe cooperative shares two silos.\n")
        (repo / "tool.py").unlink()
        git(repo, "commit", "-qam", "second")
        third = runner.run()
        assert third["documents"] == {"new": 0, "changed": 1, "unchanged": 1, "removed": 1, "failed": 1}, third
        assert "two silos" in runner.documents()[f"{daemon.url('handbook')}#main:README.md"].text

    # The server gone: the run fails with git's reason, and every document stays.
    gone = runner.run()
    assert gone["status"] == "failed" and gone["errors"][0].startswith("git ls-remote: "), gone
    assert gone["documents"]["removed"] == 0 and len(runner.documents()) == 2 and runner.tasks == []


def test_internal_addresses_loops_large_pages_and_wrong_credentials_end_in_a_run_that_says_so(database, tmp_path):
    with SiteServer(tmp_path / "site") as site:
        site.write("/docs/index.html", _page("Home", "Hello.", ["loop/a", "big.html", "ok.html"]))
        site.write("/docs/ok.html", _page("OK", "Fine."))
        site.write("/docs/big.html", "<html><body>" + "y" * 250_000 + "</body></html>")
        site.root.joinpath("docs", "loop").mkdir()

        # Production's guard: no allowlist, so 127.0.0.1 is refused before any connection.
        guarded = Runner(database, settings(egress_allow=[]))
        guarded.add("web", {"url": site.url("/docs/index.html")})
        refused = guarded.run()
        assert refused["status"] == "failed" and "egress refused: 127.0.0.1 is a loopback address" in \
            refused["errors"][0]
        assert site.requests == []

        runner = Runner(database, settings())
        runner.add("web", {"url": site.url("/docs/index.html"), "username": "reader", "password": "wrong"})
        site.write("/docs/index.html", _page("Home", "Hello.", ["/docs/loop/a", "big.html", "ok.html"]))
        done = runner.run()
        assert done["documents"] == {"new": 2, "changed": 0, "unchanged": 0, "removed": 0, "failed": 2}, done
        assert any("redirect loop" in e for e in done["errors"]), done["errors"]
        assert any("250026 bytes, over the limit of 200000" in e for e in done["errors"]), done["errors"]

        # The site now asks for credentials the source does not have: the run fails with the server's answer,
        # and removes nothing.
        site.auth = ("reader", "right")
        failed = runner.run()
        assert failed["status"] == "failed" and "HTTP 401" in failed["errors"][0], failed
        assert len(runner.documents()) == 2 and runner.tasks == []


def test_two_runs_of_one_source_never_overlap_and_credentials_are_kept_sealed(database, tmp_path):
    config = settings()
    runner = Runner(database, config)
    source_id = runner.add("web", {"url": "https://example.org/docs/", "username": "u", "password": "s3cret"})
    with database.session() as s:
        row = s.get(SourceRow, source_id)
        assert "s3cret" not in (row.credentials or "") and shown(row)["config"]["password"] == "set"
        holder = new_run(s, row, "manual").id
    with database.session() as s:
        assert take_lease(s, source_id, holder, 60)
    second = runner.run()
    assert second == {"status": "skipped"}


class Killed(BaseException):
    """The worker stopped mid-run: nothing of the run's own handling runs after it."""


def test_a_run_killed_mid_way_is_resumed_from_what_it_recorded(database, tmp_path, monkeypatch):
    import time

    from agentsearch.pipeline.platform.tables.sources import SourceRunRow
    from agentsearch.pipeline.sources import run as run_module

    monkeypatch.setattr(run_module, "BATCH", 2)
    with SiteServer(tmp_path / "site") as site:
        pages = [f"p{n}.html" for n in range(5)]
        site.write("/docs/index.html", _page("Index", "All pages.", pages))
        for page in pages:
            site.write(f"/docs/{page}", _page(page, f"Page {page}."))
        runner = Runner(database, settings(sources_run_lease_s=20))
        runner.add("web", {"url": site.url("/docs/index.html")})
        with database.session() as s:
            killed_id = new_run(s, s.get(SourceRow, runner.source_id), "manual").id
        sent: list = []

        def send_then_die(tasks: list) -> None:
            sent.extend(tasks)
            if len(sent) >= 4:  # the second batch committed and sent: the worker dies
                raise Killed

        with pytest.raises(Killed):
            run_source(database, runner.settings, killed_id, send_then_die)
        assert len(runner.documents()) == 4
        assert runner.run() == {"status": "skipped"}  # its lease still held
        with database.session() as s:
            lease_until = s.get(SourceRow, runner.source_id).lease_until
        from agentsearch.pipeline.platform.db import utcnow

        time.sleep(max(0.0, (lease_until - utcnow()).total_seconds()) + 0.5)  # the lease passes
        resumed = runner.run()
        assert resumed["documents"] == {"new": 2, "changed": 0, "unchanged": 4, "removed": 0, "failed": 0}, resumed
        assert len(runner.sent("parse_document")) == 2 and len(runner.documents()) == 6
        with database.session() as s:
            killed = s.get(SourceRunRow, killed_id)
            assert killed.status == "failed"
            assert killed.errors == ["the run was lost: its worker stopped before it ended"]


def test_a_redirect_inside_a_trickle_an_endless_page_and_a_huge_sitemap_are_each_held_to_their_limit(database,
                                                                                                        tmp_path):
    import time

    with SiteServer(tmp_path / "site") as site:
        # 127.0.0.2 is loopback too, but the operator allowed only 127.0.0.1: a redirect there is refused.
        inside = f"/to/127.0.0.2:{site.port}/docs/ok.html"
        site.write("/docs/index.html", _page("Home", "Hello.", [inside, "trickle.html", "endless.html", "ok.html"]))
        site.write("/docs/ok.html", _page("OK", "Fine."))
        runner = Runner(database, settings(sources_fetch_timeout_s=2))
        runner.add("web", {"url": site.url("/docs/index.html")})
        started = time.monotonic()
        done = runner.run()
        assert time.monotonic() - started < 30
        assert done["status"] == "succeeded" and done["documents"]["new"] == 2, done
        assert done["documents"]["failed"] == 2, done  # the trickle and the endless page; the redirect is outside
        assert any("not read within 2 s" in e or "ReadTimeout" in e for e in done["errors"]), done["errors"]
        assert any("over the limit of 200000 bytes" in e for e in done["errors"]), done["errors"]

        # The start URL itself redirecting inside: the listing fails with the guard's reason.
        outside = Runner(database, settings())
        outside.add("web", {"url": site.url(inside)})
        refused = outside.run()
        assert refused["status"] == "failed" and "egress refused: 127.0.0.2 is a loopback address" in \
            refused["errors"][0], refused

        urls = "".join(f"<url><loc>{site.url(f'/docs/p{n}.html')}</loc></url>" for n in range(100_000))
        site.write("/docs/sitemap.xml", f'<?xml version="1.0"?><urlset>{urls}</urlset>')
        huge = Runner(database, settings(max_bytes=10_000_000))
        huge.add("web", {"url": site.url("/docs/sitemap.xml"), "max_pages": 5})
        read = huge.run()
        # Five pages asked for (none exists: 404 is gone, nothing stored), not a hundred thousand.
        assert read["status"] == "succeeded" and sum(read["documents"].values()) == 0, read
        assert sum(1 for r in site.requests if r.startswith("/docs/p")) == 5


def test_a_scheduled_source_is_claimed_once_when_due_and_its_next_time_moves_on(database):
    from datetime import timedelta

    from agentsearch.pipeline.platform.db import utcnow
    from agentsearch.pipeline.platform.tables.sources import SourceRunRow
    from agentsearch.pipeline.sources.store import claim_due
    from agentsearch.worker.app import app

    assert app.conf.beat_schedule["run-due-sources"]["task"] == "agentsearch.run_due_sources"
    runner = Runner(database, settings())
    due_id = runner.add("feed", {"url": "https://example.org/feed.xml"})
    with database.session() as s:
        collection = s.get(CollectionRow, runner.collection_id)
        later_id = create_source(s, runner.settings, collection, DEFAULT_USER_ID, "feed",
                                 {"url": "https://example.org/other.xml"}, 3600, True).id
        disabled_id = create_source(s, runner.settings, collection, DEFAULT_USER_ID, "feed",
                                    {"url": "https://example.org/off.xml"}, 3600, False).id
        for source_id in (due_id, disabled_id):
            row = s.get(SourceRow, source_id)
            row.schedule_s, row.next_run_at = 600, utcnow() - timedelta(seconds=1)
    claimed = claim_due(database)
    assert [source for source, _ in claimed] == [due_id]
    assert claim_due(database) == []  # its next time moved on
    with database.session() as s:
        run = s.get(SourceRunRow, claimed[0][1])
        assert run.trigger == "schedule" and run.status == "queued"
        assert s.get(SourceRow, due_id).next_run_at > utcnow() + timedelta(seconds=590)
        assert s.get(SourceRow, later_id).next_run_at > utcnow() + timedelta(seconds=3590)


RSS = """<?xml version="1.0"?><rss version="2.0"><channel><title>Co-op</title><link>{home}</link>
<description>News</description>{items}</channel></rss>"""


def test_an_rss_feed_is_read_as_an_atom_one_is(database, tmp_path):
    with SiteServer(tmp_path / "site") as site:
        site.write("/news/harvest.html", _page("Harvest", "The harvest was early this year."))
        item = (f"<item><title>Harvest</title><link>{site.url('/news/harvest.html')}</link>"
                "<guid>harvest-2026</guid><pubDate>Sun, 01 Nov 2026 08:00:00 GMT</pubDate></item>")
        site.write("/rss.xml", RSS.format(home=site.url("/"), items=item))
        runner = Runner(database, settings())
        runner.add("feed", {"url": site.url("/rss.xml")})
        assert runner.run()["documents"]["new"] == 1
        (document,) = runner.documents().values()
        assert document.title == "Harvest" and document.external_id.endswith(":harvest-2026")

        site.write("/rss.xml", "this is not a feed at all")
        broken = runner.run()
        assert broken["status"] == "failed" and "not a feed" in broken["errors"][0], broken
        assert len(runner.documents()) == 1


def test_a_repository_over_smart_http_with_a_token_and_with_a_wrong_one(database, tmp_path):
    from tests.support.source_servers import GitHttpServer

    repo = tmp_path / "repos" / "private"
    repo.mkdir(parents=True)
    git(repo, "init", "-q", "-b", "main")
    (repo / "notes.md").write_text("# Notes\n\nThe silo opens at six.\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "first")
    with GitHttpServer(tmp_path / "repos", auth=("reader", "tok-123")) as server:
        runner = Runner(database, settings())
        source_id = runner.add("git", {"url": server.url("private"), "username": "reader", "token": "tok-123"})
        done = runner.run()
        assert done["status"] == "succeeded" and done["documents"]["new"] == 1, done
        with database.session() as s:
            sealed = s.get(SourceRow, source_id).credentials or ""
            assert sealed.startswith("token|") and "tok-123" not in sealed

        wrong = Runner(database, settings())
        wrong.add("git", {"url": server.url("private"), "username": "reader", "token": "nope"})
        failed = wrong.run()
        assert failed["status"] == "failed" and "git ls-remote" in failed["errors"][0], failed
        assert "the server refused the credentials (HTTP 401)" in failed["errors"][0], failed
