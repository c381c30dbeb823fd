"""Two workers making one new collection at the same moment, on a real ``milvus-lite server``: the first upload of a
collection is split into tasks that start together on several workers, and each makes the collection (its first
generation and its alias) when it finds none. Both must go on; before, the one that lost the race failed its task
("already exists") and indexed its documents only on a retry.
"""

from __future__ import annotations

import os
import threading

import pytest

from agentsearch.devstack import free_port, stop_process
from agentsearch.devstack.stack import start_milvus_lite
from agentsearch.pipeline.retrieval.vector_store import VectorStore, generation_name

pytestmark = pytest.mark.integration

RACES = 4


def test_two_stores_making_one_new_collection_at_once_both_go_on(tmp_path):
    port = free_port()
    proc = start_milvus_lite(tmp_path / "milvus", port, dict(os.environ), tmp_path / "milvus.log")
    try:
        for race in range(RACES):
            name = f"c_race{race}"
            stores = [VectorStore(f"http://127.0.0.1:{port}") for _ in range(2)]
            start, errors = threading.Barrier(len(stores)), []

            def make(store: VectorStore, start=start, name=name, errors=errors) -> None:
                start.wait()
                try:
                    store.ensure_collection(name, 8)
                except Exception as exc:  # noqa: BLE001 - what the losing store raised is the finding
                    errors.append(exc)

            threads = [threading.Thread(target=make, args=(store,)) for store in stores]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            assert errors == [], errors
            assert [store.target(name) for store in stores] == [generation_name(name, 1)] * 2
    finally:
        stop_process(proc)
