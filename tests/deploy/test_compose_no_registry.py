"""docker-compose.no-registry.yml over docker-compose.yml, as `docker compose config` merges them: the stack the
deploy drill runs on a host without an image registry must stay the real file's stack but for its images."""

from __future__ import annotations

import json

import pytest

from agentsearch.devstack.deploy_drill import IMAGE, STANDALONE_IMAGE
from agentsearch.devstack.docker_host import LOCAL_IMAGES
from tests.deploy.conftest import COMPOSE_FILE, FLOWER_TEST_CREDENTIALS, REPO, run_compose
from tests.deploy.test_compose import APP_SERVICES

OVERRIDE = REPO / "docker-compose.no-registry.yml"
# What only a registry's images provide; their work is done by the agentsearch image (docker-compose.no-registry.yml).
LEFT_OUT = {"etcd", "minio", "embeddings"}


@pytest.fixture(scope="module")
def merged(tmp_path_factory) -> dict:
    done = run_compose("config", "--format", "json", extra_env={"FLOWER_BASIC_AUTH": FLOWER_TEST_CREDENTIALS},
                       tmp=tmp_path_factory.mktemp("no-registry"), files=(COMPOSE_FILE, OVERRIDE))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_every_image_is_made_on_the_host_and_never_pulled(merged):
    made = set(LOCAL_IMAGES) | {IMAGE, STANDALONE_IMAGE}
    for name, service in merged["services"].items():
        assert service["image"] in made, (name, service["image"])
        assert service.get("pull_policy") == "never", name


def test_the_same_services_but_those_only_a_registry_gives(merged, compose_config):
    assert set(merged["services"]) == set(compose_config["services"]) - LEFT_OUT
    for name, service in merged["services"].items():
        for dependency in service.get("depends_on", {}):
            assert dependency not in LEFT_OUT, (name, dependency)


def test_the_application_runs_as_in_the_real_file_embedding_in_process(merged, compose_config):
    for name in APP_SERVICES:
        ours, real = merged["services"][name], compose_config["services"][name]
        assert ours["command"] == real["command"], name
        assert ours.get("healthcheck") == real.get("healthcheck"), name
        assert {k: v for k, v in ours["environment"].items() if k != "AGENTSEARCH_EMBEDDING_URL"} == \
            {k: v for k, v in real["environment"].items() if k != "AGENTSEARCH_EMBEDDING_URL"}, name
        assert ours["environment"]["AGENTSEARCH_EMBEDDING_URL"] == "", name


def test_the_vector_store_is_milvus_lite_on_the_milvus_address(merged, compose_config):
    milvus = merged["services"]["milvus"]
    assert milvus["command"][:2] == ["milvus-lite", "server"]
    # The default image has no milvus-lite (Dockerfile): the vector store runs its standalone stage.
    assert milvus["image"] == STANDALONE_IMAGE
    port = milvus["command"][milvus["command"].index("--port") + 1]
    uri = compose_config["services"]["api"]["environment"]["AGENTSEARCH_MILVUS_URI"]
    assert uri == f"http://milvus:{port}"
    # Its data on a volume at the image's /data, which the image's non-root user owns.
    (volume,) = milvus["volumes"]
    data_dir = milvus["command"][milvus["command"].index("--data-dir") + 1]
    assert volume["target"] == "/data" and data_dir.startswith("/data/")
