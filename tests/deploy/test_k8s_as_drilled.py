"""k8s/ against what the deploy drill ran (src/agentsearch/devstack/deploy_drill.py): no API server runs here, so the
manifests are held to the image the drill built, the compose services it ran, and the probes it waited on.

Each agentsearch container of each kustomization must name the drill's image, run its compose service's command
with the same settings (environment keys), and probe what the drill's stack was seen to pass: /readyz for the API's
readiness, the heartbeat file's age for workers and beat, Flower's /healthcheck.
"""

from __future__ import annotations

import pytest

from agentsearch.devstack.deploy_drill import IMAGE, TAG
from tests.deploy.conftest import KUSTOMIZATIONS
from tests.deploy.test_k8s import by_kind, component, container_env, pod_spec, workloads

# Not agentsearch: the embeddings server's own image, which the drill did not run (no registry; its workers embed
# with the image's ONNX model instead). Its manifest is checked by test_k8s.py only.
NOT_DRILLED = {"embeddings"}
# The database secret goes only to the pods that use the database; compose gives every service one environment.
WITHOUT_DATABASE = {"beat", "flower"}
BUILDS = tuple(KUSTOMIZATIONS)


def agentsearch_containers(objects: list[dict]) -> list[tuple[str, dict]]:
    found = [(component(obj), c) for obj in workloads(objects) if component(obj) not in NOT_DRILLED
             for c in pod_spec(obj).get("initContainers", []) + pod_spec(obj)["containers"]]
    assert {name for name, _ in found} >= {"api", "migrate", "beat", "flower", "worker-threads", "worker-prefork",
                                           "worker-webhooks"}
    return found


def settings_keys(env: dict) -> set[str]:
    """The application's settings: KEDA_* variables are read by KEDA's operator, not by the process."""
    return {key for key in env if key.startswith("AGENTSEARCH_")}


@pytest.mark.parametrize("build", BUILDS)
def test_every_container_names_the_image_the_drill_built(builds, build):
    repository = IMAGE.partition(":")[0]
    for name, container in agentsearch_containers(builds[build]):
        image_repository, _, image_tag = container["image"].rpartition(":")
        assert image_repository == repository, (name, container["image"])
        if build == "base":  # an overlay sets its own release tag; the base is the one the drill builds
            assert image_tag == TAG, (name, container["image"])


@pytest.mark.parametrize("build", BUILDS)
def test_every_container_runs_its_compose_services_command_with_the_same_settings(builds, build, compose_config):
    services = compose_config["services"]
    for name, container in agentsearch_containers(builds[build]):
        service = services[name]
        assert container["args"] == service["command"], name
        k8s_keys = settings_keys(container_env(builds[build], container))
        compose_keys = settings_keys(service["environment"])
        if name in WITHOUT_DATABASE:
            compose_keys -= {"AGENTSEARCH_DATABASE_URL"}
        assert k8s_keys == compose_keys, (name, sorted(k8s_keys ^ compose_keys))


def compose_probe(service: dict) -> str:
    """The command of a compose healthcheck, as the container's shell runs it."""
    test = service["healthcheck"]["test"]
    return (test[1] if test[0] == "CMD-SHELL" else " ".join(test[1:])).replace("$$", "$")


@pytest.mark.parametrize("build", BUILDS)
def test_probes_are_the_checks_the_drills_stack_passed(builds, build, compose_config):
    services = compose_config["services"]
    checked = set()
    for name, container in agentsearch_containers(builds[build]):
        probe = compose_probe(services[name]) if "healthcheck" in services[name] and \
            not services[name]["healthcheck"].get("disable") else None
        if name == "migrate":
            assert probe is None and not any(p in container for p in ("readinessProbe", "livenessProbe"))
            continue
        if name in ("api", "flower"):
            path = container["readinessProbe"]["httpGet"]["path"]
            assert probe and f"127.0.0.1:{flag_of(container, '--port')}{path}'" in probe, (name, path, probe)
        else:  # workers and beat: liveness and startup are the compose healthcheck's own shell test
            for kind in ("livenessProbe", "startupProbe"):
                assert container[kind]["exec"]["command"] == ["sh", "-c", probe], (name, kind)
        checked.add(name)
    assert checked == {"api", "flower", "beat", "worker-threads", "worker-prefork", "worker-webhooks"}


def flag_of(container: dict, flag: str) -> str:
    return container["args"][container["args"].index(flag) + 1]


def test_the_check_catches_a_drifted_manifest(builds, compose_config):
    """A manifest whose worker changes its command, whose pods get a setting compose does not give, or whose API
    probes another path, fails."""
    import copy

    objects = copy.deepcopy(builds["base"])
    (worker,) = pod_spec(by_kind(objects, "Deployment")["agentsearch-worker-threads"])["containers"]
    worker["args"] = [*worker["args"][:-1], "64"]
    with pytest.raises(AssertionError):
        test_every_container_runs_its_compose_services_command_with_the_same_settings(
            {"base": objects}, "base", compose_config)
    objects = copy.deepcopy(builds["base"])
    next(iter(by_kind(objects, "ConfigMap").values()))["data"]["AGENTSEARCH_ONLY_IN_K8S"] = "1"
    with pytest.raises(AssertionError):
        test_every_container_runs_its_compose_services_command_with_the_same_settings(
            {"base": objects}, "base", compose_config)
    objects = copy.deepcopy(builds["base"])
    (api,) = pod_spec(by_kind(objects, "Deployment")["agentsearch-api"])["containers"]
    api["readinessProbe"]["httpGet"]["path"] = "/healthz"
    with pytest.raises(AssertionError):
        test_probes_are_the_checks_the_drills_stack_passed({"base": objects}, "base", compose_config)
    objects = copy.deepcopy(builds["base"])
    (api,) = pod_spec(by_kind(objects, "Deployment")["agentsearch-api"])["containers"]
    api["image"] = "agentsearch:0.0.9"
    with pytest.raises(AssertionError):
        test_every_container_names_the_image_the_drill_built({"base": objects}, "base")
