"""A drive source's runs on PostgreSQL against a real WebDAV server started here (WsgiDAV over a folder the test
changes, ``tests/support/dav_server.py``), its paths mapped to a team collection's document groups."""

from __future__ import annotations

import pytest

from agentsearch.devstack.dav_server import DavServer
from tests.integration.test_sources_mail import TeamRunner
from tests.integration.test_sources_runs import Runner, database, settings  # noqa: F401  (database: a fixture)

pytestmark = pytest.mark.integration


def _groups(runner: TeamRunner, dav: DavServer) -> dict[str, list[str]]:
    return {url.removeprefix(dav.url("/Team/")): names for url, names in runner.group_names().items()}


def test_a_drive_is_read_by_etag_and_its_paths_give_the_documents_groups(database, tmp_path):  # noqa: F811
    with DavServer(tmp_path / "drive", auth=("ana", "s3cret")) as dav:
        team = dav.root / "Team"
        (team / "HR" / "2026").mkdir(parents=True)
        (team / "guide.md").write_text("# Guide\n\nThe silo opens at six.\n")
        (team / "notes.txt").write_text("Harvest notes: early this year.\n")
        (team / "HR" / "2026" / "pay.md").write_text("# Pay\n\nSalaries rise in May.\n")
        (team / "photo.raw").write_bytes(b"\x00" * 10)  # no format read: not an item
        runner = TeamRunner(database, settings())
        runner.add("drive", {"url": dav.url("/Team/"), "username": "ana", "password": "s3cret",
                             "groups": {"HR": "hr"}})

        first = runner.run()
        assert first["status"] == "succeeded", first
        assert first["documents"] == {"new": 3, "changed": 0, "unchanged": 0, "removed": 0, "failed": 0}, first
        assert _groups(runner, dav) == {"guide.md": [], "notes.txt": [], "HR/2026/pay.md": ["hr"]}
        assert "silo opens at six" in runner.documents()[dav.url("/Team/guide.md")].text

        # Unchanged: one PROPFIND per folder, no file read, nothing stored or sent.
        dav.requests.clear()
        second = runner.run()
        assert second["documents"] == {"new": 0, "changed": 0, "unchanged": 3, "removed": 0, "failed": 0}, second
        assert runner.tasks == [] and not any(r.startswith("GET") for r in dav.requests), dav.requests
        assert sorted(dav.requests) == ["PROPFIND /Team/", "PROPFIND /Team/HR/", "PROPFIND /Team/HR/2026/"]

        # A change, an addition, a removal, and a file moved into HR: each reaches its document in one run.
        (team / "guide.md").write_text("# Guide\n\nThe silo opens at seven.\n")
        (team / "faq.md").write_text("# FAQ\n\nAsk the co-op.\n")
        (team / "notes.txt").rename(team / "HR" / "notes.txt")
        third = runner.run()
        assert third["documents"] == {"new": 2, "changed": 1, "unchanged": 1, "removed": 1, "failed": 0}, third
        assert _groups(runner, dav) == {"guide.md": [], "faq.md": [], "HR/notes.txt": ["hr"],
                                        "HR/2026/pay.md": ["hr"]}
        assert "opens at seven" in runner.documents()[dav.url("/Team/guide.md")].text

        # The mapping changed: the documents' groups at the next run, their content not read again.
        runner.reconfigure(groups={"HR": "hr", "HR/2026": ["hr", "board"]})
        dav.requests.clear()
        regrouped = runner.run()
        assert regrouped["documents"] == {"new": 0, "changed": 1, "unchanged": 3, "removed": 0, "failed": 0}
        assert _groups(runner, dav)["HR/2026/pay.md"] == ["board", "hr"]
        assert not any(r.startswith("GET") for r in dav.requests)

        # A malformed PROPFIND answer: the run fails with the reason, and nothing is removed.
        dav.malformed = True
        broken = runner.run()
        assert broken["status"] == "failed" and "no XML a WebDAV server sends" in broken["errors"][0], broken
        assert broken["documents"]["removed"] == 0 and len(runner.documents()) == 4 and runner.tasks == []
        dav.malformed = False

        # Wrong credentials: the server's 401, nothing removed.
        runner.reconfigure(password="wrong")
        refused = runner.run()
        assert refused["status"] == "failed" and "HTTP 401" in refused["errors"][0], refused
        assert len(runner.documents()) == 4
        runner.reconfigure(password="s3cret")

        # More files than max_items: those listed read, none removed, the limit said.
        runner.reconfigure(max_items=2)
        limited = runner.run()
        assert limited["status"] == "succeeded" and "more than 2 files" in limited["errors"][0], limited
        assert limited["documents"]["removed"] == 0 and len(runner.documents()) == 4
        runner.reconfigure(max_items=1000)

        # Groups required: a file under no mapping is not indexed, its document removed, the reason said.
        runner.reconfigure(groups={"HR": "hr"}, groups_required=True)
        closed = runner.run()
        assert closed["documents"]["removed"] == 2 and closed["documents"]["failed"] == 2, closed
        assert any("guide.md: no group mapping holds it" in e for e in closed["errors"]), closed["errors"]
        assert set(_groups(runner, dav)) == {"HR/notes.txt", "HR/2026/pay.md"}

    # The server gone: the run fails, and every document stays.
    gone = runner.run()
    assert gone["status"] == "failed" and gone["documents"]["removed"] == 0 and len(runner.documents()) == 2


def _response(href: str, etag: str) -> str:
    return (f"<d:response><d:href>{href}</d:href><d:propstat><d:prop><d:getetag>{etag}</d:getetag><d:resourcetype/>"
            "</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>")


def test_a_listing_naming_places_outside_the_source_reads_none_of_them(database, tmp_path):  # noqa: F811
    with DavServer(tmp_path / "drive", auth=("ana", "s3cret")) as dav:
        (dav.root / "Team").mkdir()
        (dav.root / "Team" / "ok.md").write_text("# OK\n")
        (dav.root / "Other").mkdir()
        (dav.root / "Other" / "secret.md").write_text("# Secret\n")
        dav.answer = ('<?xml version="1.0"?><d:multistatus xmlns:d="DAV:">'
                      + _response("/Team/", '"0"') + _response("/Team/ok.md", '"1"')
                      + _response(f"http://127.0.0.2:{dav.port}/Team/elsewhere.md", '"2"')
                      + _response("/Other/secret.md", '"3"') + _response("/Team/../Other/secret.md", '"4"')
                      + "</d:multistatus>").encode()
        runner = Runner(database, settings())
        runner.add("drive", {"url": dav.url("/Team/"), "username": "ana", "password": "s3cret"})
        done = runner.run()
        assert done["documents"] == {"new": 1, "changed": 0, "unchanged": 0, "removed": 0, "failed": 0}, done
        assert set(runner.documents()) == {dav.url("/Team/ok.md")}
        assert [r for r in dav.requests if r.startswith("GET")] == ["GET /Team/ok.md"]


def test_the_drive_bench_reads_every_file_once_and_an_unchanged_drive_with_a_propfind_a_folder():
    from agentsearch.bench import sources_stores

    figures = sources_stores.measure("drive", 150, 1, sqlite=False)
    # Two subfolders of the bench's folder: PROPFIND the folder and each subfolder, a GET per file.
    assert figures["first_run_requests"] == 3 + 150
    assert figures["unchanged_run_requests_median"] == 3 and figures["unchanged_run_documents_stored"] == 0


def test_the_test_server_offers_no_sync_collection_so_the_drive_lists_by_propfind(tmp_path):
    """Why the drive kind lists every folder: WsgiDAV (the suite's server) answers no ``REPORT`` and keeps no
    ``sync-token`` (RFC 6578), so a ``sync-collection`` client could not be tested here. Should a WsgiDAV release
    offer it, this fails, and the drive kind can use it."""
    import httpx

    with DavServer(tmp_path / "drive", auth=("ana", "s3cret")) as dav:
        (dav.root / "guide.md").write_text("# Guide\n")
        with httpx.Client(auth=("ana", "s3cret"), timeout=10) as http:
            options = http.request("OPTIONS", dav.url("/"))
            assert "PROPFIND" in options.headers["allow"] and "REPORT" not in options.headers["allow"]
            report = http.request("REPORT", dav.url("/"), headers={"Content-Type": "application/xml"}, content=(
                b'<?xml version="1.0"?><d:sync-collection xmlns:d="DAV:"><d:sync-token/><d:sync-level>1'
                b"</d:sync-level><d:prop><d:getetag/></d:prop></d:sync-collection>"))
            assert report.status_code == 405
            props = http.request("PROPFIND", dav.url("/"), headers={"Depth": "0"}, content=(
                b'<?xml version="1.0"?><d:propfind xmlns:d="DAV:"><d:prop><d:supported-report-set/><d:sync-token/>'
                b"</d:prop></d:propfind>"))
            assert props.status_code == 207 and "404 Not Found" in props.text and "<D:sync-token>" not in props.text
