"""k8s/: each kustomization as `kubectl kustomize` renders it, validated against the Kubernetes and KEDA schemas.

Kubernetes objects: kubernetes-validate's strict JSON schemas (unknown fields rejected, as `kubectl apply`'s
strict field validation does), for the oldest and the newest Kubernetes release these manifests target.
ScaledObjects: the schema of KEDA 2.16's CRD, as the cloudcoil-models-keda models carry it, made strict the same way.
"""

from __future__ import annotations

import ast
import base64
import copy
import itertools
import os
import time
from functools import lru_cache
from urllib.parse import urlparse

import jsonschema
import kubernetes_validate
import pytest

from agentsearch.worker.app import ALL_QUEUES, ARTIFACTS_QUEUE, DEFAULT_QUEUE, INGEST_QUEUE, WEBHOOKS_QUEUE
from tests.deploy.conftest import (
    KUSTOMIZATIONS,
    assert_each_queue_has_one_worker,
    assert_window_spans_several_heartbeats,
    broker_lists,
    kombu_list_name,
    longest_hard_time_limit_s,
    run_probe,
    settings_from,
)

# autoscaling/v2 HPAs need 1.23; 1.30 is the oldest release still commonly run. 1.37: the newest the validator knows.
KUBERNETES_VERSIONS = ("1.30.0", "1.37.0")
POD_OWNERS = ("Deployment", "Job")
BUILDS = tuple(KUSTOMIZATIONS)
WORKERS = ("worker-threads", "worker-prefork", "worker-webhooks")


def by_kind(objects: list[dict], kind: str) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


def pod_spec(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def component(obj: dict) -> str:
    return obj["metadata"]["labels"]["app.kubernetes.io/component"]


def workloads(objects: list[dict], *components: str) -> list[dict]:
    return [o for o in objects if o["kind"] in POD_OWNERS and (not components or component(o) in components)]


def configmap_data(objects: list[dict]) -> dict[str, str]:
    (configmap,) = by_kind(objects, "ConfigMap").values()
    return configmap["data"]


def container_env(objects: list[dict], container: dict) -> dict[str, str]:
    """What a container's environment holds: its envFrom ConfigMaps and Secrets, then its env."""
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            env.update(by_kind(objects, "ConfigMap")[source["configMapRef"]["name"]]["data"])
        if "secretRef" in source:
            secret = by_kind(objects, "Secret")[source["secretRef"]["name"]]
            env.update({k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()})
            env.update(secret.get("stringData", {}))
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    return env


def flag_value(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


@lru_cache(maxsize=1)
def scaled_object_schema() -> dict:
    from cloudcoil.models.keda.v1alpha1 import ScaledObject

    schema = ScaledObject.model_json_schema(by_alias=True)

    def strict(node):
        # A field the CRD does not define is dropped by the API server or refused by strict field validation:
        # either way a typo, so refuse it here.
        if isinstance(node, dict):
            if "properties" in node and "additionalProperties" not in node:
                node["additionalProperties"] = False
            for value in node.values():
                strict(value)
        elif isinstance(node, list):
            for value in node:
                strict(value)

    strict(schema)
    return schema


def test_both_kustomizations_render_the_whole_service(builds):
    for name, objects in builds.items():
        kinds = {(o["kind"], o["metadata"]["name"]) for o in objects}
        expected = {
            ("Deployment", "agentsearch-api"), ("Service", "agentsearch-api"),
            ("HorizontalPodAutoscaler", "agentsearch-api"),
            ("Deployment", "agentsearch-worker-threads"), ("ScaledObject", "agentsearch-worker-threads"),
            ("Deployment", "agentsearch-worker-prefork"), ("ScaledObject", "agentsearch-worker-prefork"),
            ("Deployment", "agentsearch-worker-webhooks"), ("ScaledObject", "agentsearch-worker-webhooks"),
            ("Deployment", "agentsearch-embeddings"), ("Service", "agentsearch-embeddings"),
            ("HorizontalPodAutoscaler", "agentsearch-embeddings"),
            ("Deployment", "agentsearch-beat"),
            ("Deployment", "agentsearch-flower"), ("Service", "agentsearch-flower"),
            ("Job", "agentsearch-migrate"),
        }
        assert expected <= kinds, (name, expected - kinds)
        namespaces = {o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"}
        assert {o["metadata"].get("namespace") for o in objects if o["kind"] != "Namespace"} == namespaces, name


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("build", BUILDS)
def test_every_kubernetes_object_matches_its_schema(builds, build, version):
    checked = 0
    for obj in builds[build]:
        if obj["apiVersion"].startswith("keda.sh/"):
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{build}: {obj['kind']}/{obj['metadata']['name']} at {list(exc.path)}: {exc.message}")
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("build", BUILDS)
def test_scaled_objects_match_the_keda_crd_schema(builds, build):
    scaled = by_kind(builds[build], "ScaledObject")
    assert scaled
    for name, obj in scaled.items():
        assert obj["apiVersion"] == "keda.sh/v1alpha1"
        try:
            jsonschema.validate(obj, scaled_object_schema())
        except jsonschema.ValidationError as exc:
            pytest.fail(f"{build}: ScaledObject/{name} at {list(exc.path)}: {exc.message}")


def test_the_keda_schema_catches_mistakes(builds):
    good = next(iter(by_kind(builds["base"], "ScaledObject").values()))
    typo = copy.deepcopy(good)
    typo["spec"]["maxReplicaCounts"] = typo["spec"].pop("maxReplicaCount")
    numeric = copy.deepcopy(good)
    numeric["spec"]["triggers"][0]["metadata"]["listLength"] = 4  # the CRD wants strings
    no_target = copy.deepcopy(good)
    del no_target["spec"]["scaleTargetRef"]
    for bad in (typo, numeric, no_target):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, scaled_object_schema())


def queue_lists(objects: list[dict]) -> dict[str, frozenset[bytes]]:
    """Each queue's Redis lists with the broker this build configures (conftest.broker_lists)."""
    return broker_lists(configmap_data(objects)["AGENTSEARCH_BROKER_URL"])


def list_name(trigger: dict) -> bytes:
    # The exact bytes KEDA asks Redis for: the YAML string, control characters included.
    return trigger["metadata"]["listName"].encode()


def test_every_queue_has_a_list_per_priority_its_messages_carry(builds):
    """A message sent from outside any task (NEW_WORK_PRIORITY, agentsearch.worker.app) waits on another list than one
    sent from a task (no priority): each queue has both, and an autoscaler reading one of them misses the other's
    backlog."""
    from agentsearch.worker.app import NEW_WORK_PRIORITY, app

    options = app.conf.broker_transport_options
    for objects in builds.values():
        lists = queue_lists(objects)
        assert set(lists) == set(ALL_QUEUES)
        for queue, names in lists.items():
            assert names == {kombu_list_name(queue, None, options),
                             kombu_list_name(queue, NEW_WORK_PRIORITY, options)}, (queue, names)
            assert queue.encode() in names, queue  # the plain list: messages sent from a task


@pytest.mark.parametrize("build", BUILDS)
def test_keda_watches_every_list_of_the_queues_each_worker_consumes_on_the_broker(builds, build):
    objects = builds[build]
    deployments = by_kind(objects, "Deployment")
    broker = urlparse(configmap_data(objects)["AGENTSEARCH_BROKER_URL"])
    lists_of = queue_lists(objects)
    watched = []
    for name, scaled in by_kind(objects, "ScaledObject").items():
        target = deployments[scaled["spec"]["scaleTargetRef"]["name"]]
        namespace = target["metadata"]["namespace"]
        (container,) = pod_spec(target)["containers"]
        # One trigger per Redis list of each queue the worker consumes: a task waiting on any of them scales it.
        lists = []
        for trigger in scaled["spec"]["triggers"]:
            meta = trigger["metadata"]
            assert trigger["type"] == "redis", name
            assert int(meta["listLength"]) >= 1
            assert meta["databaseIndex"] == broker.path.lstrip("/"), name
            # KEDA's operator reads the address from the target's environment and connects from its own namespace.
            address = container_env(objects, container)[meta["addressFromEnv"]]
            host, _, port = address.rpartition(":")
            assert host in (f"{broker.hostname}.{namespace}.svc.cluster.local", f"{broker.hostname}.{namespace}.svc",
                            f"{broker.hostname}.{namespace}"), (name, address)
            assert int(port) == (broker.port or 6379), name
            lists.append(list_name(trigger))
        consumed = flag_value(container["args"], "--queues").split(",")
        expected = set().union(*(lists_of[queue] for queue in consumed))
        assert len(lists) == len(set(lists)), (name, lists)
        assert set(lists) == expected, (name, "missing", expected - set(lists), "not a list of its queues",
                                        set(lists) - expected)
        watched += lists
    assert sorted(watched) == sorted(set().union(*lists_of.values()))


class FormulaError(ValueError):
    pass


def evaluate_formula(formula: str, values: dict[str, float]) -> float:
    """A scalingModifiers formula of the kind these ScaledObjects use (trigger names, +, max, min) on ``values``,
    as KEDA's expression language would compute it; anything else is refused."""
    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            return value(node.left) + value(node.right)
        if isinstance(node, ast.Name):
            if node.id not in values:
                raise FormulaError(f"{node.id!r} names no trigger")
            return values[node.id]
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min")
                and node.args and not node.keywords):
            return {"max": max, "min": min}[node.func.id](value(arg) for arg in node.args)
        raise FormulaError(f"unexpected {ast.dump(node)} in {formula!r}")

    return value(ast.parse(formula, mode="eval"))


def test_the_formula_check_catches_mistakes():
    values = {"a": 1.0, "a_new": 2.0, "b": 4.0}
    assert evaluate_formula("max(a + a_new, b)", values) == 4.0
    for bad in ("a + c", "a * 2", "a - a_new", "__import__('os')"):
        with pytest.raises(FormulaError):
            evaluate_formula(bad, values)


@pytest.mark.parametrize("build", BUILDS)
def test_keda_adds_up_the_lists_of_a_queue_and_follows_the_larger_queue(builds, build):
    """Without a formula KEDA follows the longest list: a queue's backlog split over two lists would count half.
    The formula adds up each queue's lists and takes the larger queue; its target is the waiting tasks per replica,
    the listLength of each trigger."""
    objects = builds[build]
    lists_of = queue_lists(objects)
    for name, scaled in by_kind(objects, "ScaledObject").items():
        triggers = scaled["spec"]["triggers"]
        names = [trigger.get("name") for trigger in triggers]
        # Every trigger is named (KEDA refuses a formula over an unnamed one), each name once, as an identifier.
        assert all(n and n.isidentifier() for n in names) and len(set(names)) == len(names), (name, names)
        modifiers = scaled["spec"]["advanced"]["scalingModifiers"]
        assert modifiers.get("metricType", "AverageValue") == "AverageValue", name
        assert {trigger["metadata"]["listLength"] for trigger in triggers} == {modifiers["target"]}, name
        queue_of = {trigger["name"]: next((q for q, lists in lists_of.items() if list_name(trigger) in lists), None)
                    for trigger in triggers}

        def expected(values: dict[str, float], queue_of=queue_of) -> float:
            per_queue: dict[str, float] = {}
            for trigger_name, queue in queue_of.items():
                per_queue[queue] = per_queue.get(queue, 0.0) + values[trigger_name]
            return max(per_queue.values())

        # Each list alone, every list at once, and lengths that tell every sum apart.
        cases = [{n: float(n == only) for n in names} for only in names]
        cases.append(dict.fromkeys(names, 1.0))
        cases += [dict(zip(names, map(float, lengths)))
                  for lengths in itertools.permutations([10 ** i for i in range(len(names))])]
        for values in cases:
            assert evaluate_formula(modifiers["formula"], values) == expected(values), (name, values)


@pytest.mark.parametrize("build", BUILDS)
def test_every_queue_is_consumed_by_exactly_one_worker(builds, build):
    objects = builds[build]
    consumed = {}
    for obj in workloads(objects):
        (container,) = pod_spec(obj)["containers"]
        if container["args"][:2] == ["agentsearch", "worker"]:
            consumed[component(obj)] = flag_value(container["args"], "--queues")
    # Every workload that runs a worker is one of these: none consumes a queue unchecked.
    assert set(consumed) == set(WORKERS)
    assert_each_queue_has_one_worker(consumed)


@pytest.mark.parametrize("build", BUILDS)
def test_steps_run_in_threads_and_computing_in_processes(builds, build):
    deployments = by_kind(builds[build], "Deployment")
    workers = {}
    for name in WORKERS:
        (container,) = pod_spec(deployments[f"agentsearch-{name}"])["containers"]
        args = container["args"]
        workers[name] = (flag_value(args, "--pool"), flag_value(args, "--queues"), flag_value(args, "--concurrency"))
    assert workers == {"worker-threads": ("threads", DEFAULT_QUEUE, "128"),
                       "worker-prefork": ("prefork", f"{ARTIFACTS_QUEUE},{INGEST_QUEUE}", "2"),
                       "worker-webhooks": ("threads", WEBHOOKS_QUEUE, "16")}


@pytest.mark.parametrize("build", BUILDS)
def test_webhook_deliveries_have_threads_of_their_own(builds, build):
    objects = builds[build]
    deployment = by_kind(objects, "Deployment")["agentsearch-worker-webhooks"]
    (container,) = pod_spec(deployment)["containers"]
    args = container["args"]
    assert flag_value(args, "--queues") == WEBHOOKS_QUEUE
    assert flag_value(args, "--pool") == "threads"
    # One user's slow receivers hold at most their cap of attempts: a small share of the threads.
    settings = settings_from(container_env(objects, container))
    assert int(flag_value(args, "--concurrency")) >= 4 * settings.webhook_max_in_flight_per_user
    scaled = by_kind(objects, "ScaledObject")["agentsearch-worker-webhooks"]
    assert scaled["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert {list_name(t) for t in scaled["spec"]["triggers"]} == queue_lists(objects)[WEBHOOKS_QUEUE]
    # The periodic sweep is on this queue: a worker is always there to run it.
    assert 1 <= scaled["spec"]["minReplicaCount"] < scaled["spec"]["maxReplicaCount"]


def cpu_cores(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


def memory_bytes(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(float(quantity[: -len(suffix)]) * factor)
    return int(quantity)


def test_the_dev_overlay_shrinks_every_worker(builds):
    """The dev overlay patches every worker alike: requests no larger than the base's, at most 2 replicas."""
    dev_requests = {}
    for name in WORKERS:
        base = by_kind(builds["base"], "Deployment")[f"agentsearch-{name}"]
        dev = by_kind(builds["dev"], "Deployment")[f"agentsearch-{name}"]
        (base_container,), (dev_container,) = pod_spec(base)["containers"], pod_spec(dev)["containers"]
        base_req, dev_req = base_container["resources"]["requests"], dev_container["resources"]["requests"]
        assert cpu_cores(dev_req["cpu"]) <= cpu_cores(base_req["cpu"]), name
        assert memory_bytes(dev_req["memory"]) <= memory_bytes(base_req["memory"]), name
        dev_requests[name] = (dev_req["cpu"], dev_req["memory"])
        assert by_kind(builds["dev"], "ScaledObject")[f"agentsearch-{name}"]["spec"]["maxReplicaCount"] <= 2, name
    assert len(set(dev_requests.values())) == 1, dev_requests


@pytest.mark.parametrize("build", BUILDS)
def test_one_embeddings_service_serves_every_process_that_embeds(builds, build):
    objects = builds[build]
    deployment = by_kind(objects, "Deployment")["agentsearch-embeddings"]
    service = by_kind(objects, "Service")["agentsearch-embeddings"]
    (container,) = pod_spec(deployment)["containers"]
    args = container["args"]
    assert container["image"].startswith("michaelf34/infinity:") and args[0] == "v2"
    # The name the service knows its vectors by (collections, caches) is the one served.
    assert flag_value(args, "--served-model-name") == settings_from({}).embedding_model
    (port,) = service["spec"]["ports"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert port["targetPort"] == "http" and container["ports"][0]["containerPort"] == int(flag_value(args, "--port"))
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/health", "port": "http"}, probe
    url = urlparse(configmap_data(objects)["AGENTSEARCH_EMBEDDING_URL"])
    assert (url.hostname, url.port, url.path) == (service["metadata"]["name"], port["port"],
                                                  flag_value(args, "--url-prefix"))
    for obj in workloads(objects, "api", *WORKERS):
        (app,) = pod_spec(obj)["containers"]
        assert not settings_from(container_env(objects, app)).embeds_in_process, obj["metadata"]["name"]


@pytest.mark.parametrize("build", BUILDS)
def test_one_autoscaler_per_deployment(builds, build):
    objects = builds[build]
    deployments = by_kind(objects, "Deployment")
    hpa_targets = [h["spec"]["scaleTargetRef"]["name"] for h in by_kind(objects, "HorizontalPodAutoscaler").values()]
    keda_targets = [s["spec"]["scaleTargetRef"]["name"] for s in by_kind(objects, "ScaledObject").values()]
    assert sorted(hpa_targets) == ["agentsearch-api", "agentsearch-embeddings"]
    targets = hpa_targets + keda_targets
    # KEDA makes an HPA of its own: two for one Deployment would fight over the replica count.
    assert len(targets) == len(set(targets))
    for target in targets:
        # A fixed count in the Deployment would be reset by every apply.
        assert "replicas" not in deployments[target]["spec"], target


@pytest.mark.parametrize("build", BUILDS)
def test_workers_outlast_their_longest_task_on_shutdown(builds, build):
    objects = builds[build]
    for obj in workloads(objects, *WORKERS):
        (container,) = pod_spec(obj)["containers"]
        limit = longest_hard_time_limit_s(settings_from(container_env(objects, container)))
        assert pod_spec(obj)["terminationGracePeriodSeconds"] > limit, obj["metadata"]["name"]


@pytest.mark.parametrize("build", BUILDS)
def test_worker_and_beat_liveness_is_the_heartbeat_file_age(builds, build, tmp_path):
    objects = builds[build]
    checked = 0
    for obj in workloads(objects, *WORKERS, "beat"):
        (container,) = pod_spec(obj)["containers"]
        heartbeat_file = str(settings_from(container_env(objects, container)).worker_heartbeat_file)
        for probe_name in ("livenessProbe", "startupProbe"):
            argv = container[probe_name]["exec"]["command"]
            assert "celery" not in argv and not any("inspect" in a for a in argv), obj["metadata"]["name"]
            assert argv[:2] == ["sh", "-c"]
            command = argv[2]
            assert_window_spans_several_heartbeats(command)
            beat_file = tmp_path / f"{obj['metadata']['name']}-{probe_name}"
            assert run_probe(command, heartbeat_file, beat_file) != 0, "alive without a heartbeat file"
            beat_file.touch()
            assert run_probe(command, heartbeat_file, beat_file) == 0, "a fresh heartbeat fails the probe"
            os.utime(beat_file, (time.time() - 120, time.time() - 120))
            assert run_probe(command, heartbeat_file, beat_file) != 0, "a two-minute-old heartbeat passes"
            checked += 1
        # The probe allows at least a minute of silence before a restart: several missed 10 s beats.
        live = container["livenessProbe"]
        assert live["periodSeconds"] * live["failureThreshold"] >= 60
    assert checked == 2 * (len(WORKERS) + 1)


def test_api_probes_use_the_health_routes(builds):
    from agentsearch.api.routes.health import router

    routes = {route.path for route in router.routes}
    for objects in builds.values():
        (container,) = pod_spec(by_kind(objects, "Deployment")["agentsearch-api"])["containers"]
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
        assert {"/readyz", "/healthz"} <= routes
        port = container["readinessProbe"]["httpGet"]["port"]
        assert port in {p.get("name") for p in container["ports"]} | {p["containerPort"] for p in container["ports"]}
        assert flag_value(container["args"], "--port") == str(container["ports"][0]["containerPort"])


@pytest.mark.parametrize("build", BUILDS)
def test_every_container_runs_as_non_root_with_bounded_resources(builds, build):
    for obj in workloads(builds[build]):
        name = obj["metadata"]["name"]
        spec = pod_spec(obj)
        pod_security = spec.get("securityContext", {})
        assert pod_security.get("runAsNonRoot") is True, name
        assert pod_security.get("runAsUser", 0) != 0, name
        assert spec.get("automountServiceAccountToken") is False, name
        for container in spec.get("initContainers", []) + spec["containers"]:
            security = container.get("securityContext", {})
            assert security.get("runAsUser", pod_security["runAsUser"]) != 0, name
            assert security.get("allowPrivilegeEscalation") is False, name
            assert security.get("readOnlyRootFilesystem") is True, name
            assert security.get("capabilities", {}).get("drop") == ["ALL"], name
            resources = container.get("resources", {})
            for bound in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(resources.get(bound, {})), (name, bound)
            # The image's ENTRYPOINT (tini; the embeddings server's `infinity_emb`) stays when the manifest sets
            # args, not command.
            assert "command" not in container, name
            assert container["args"][0] == ("v2" if component(obj) == "embeddings" else "agentsearch"), name
            # A read-only root needs writable scratch space where the code writes.
            mounts = {m["mountPath"] for m in container.get("volumeMounts", [])}
            assert "/tmp" in mounts, name


@pytest.mark.parametrize("build", BUILDS)
def test_exactly_one_beat_and_never_two_at_once(builds, build):
    objects = builds[build]
    beat = by_kind(objects, "Deployment")["agentsearch-beat"]
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"]["type"] == "Recreate"
    for obj in workloads(objects):
        for container in pod_spec(obj)["containers"]:
            runs_beat = container["args"][:2] == ["agentsearch", "beat"] or "--beat" in container["args"]
            assert runs_beat == (obj is beat), obj["metadata"]["name"]


@pytest.mark.parametrize("build", BUILDS)
def test_flower_gets_basic_auth_and_nothing_else_does(builds, build):
    objects = builds[build]
    for obj in workloads(objects):
        (container,) = pod_spec(obj)["containers"]
        env = container_env(objects, container)
        if component(obj) == "flower":
            assert container["args"][:2] == ["agentsearch", "flower"]
            assert settings_from(env).flower_credentials()
            for probe in ("readinessProbe", "livenessProbe"):
                assert container[probe]["httpGet"]["path"] == "/healthcheck"
        else:
            assert "AGENTSEARCH_FLOWER_BASIC_AUTH" not in env, obj["metadata"]["name"]


@pytest.mark.parametrize("build", BUILDS)
def test_the_settings_every_process_gets_are_valid(builds, build):
    objects = builds[build]
    for obj in workloads(objects):
        if component(obj) == "embeddings":
            continue  # not an agentsearch process
        (container,) = pod_spec(obj)["containers"]
        settings = settings_from(container_env(objects, container))
        assert not settings.embedded, obj["metadata"]["name"]
        assert not settings.embeds_in_process, obj["metadata"]["name"]
        if component(obj) not in ("beat", "flower"):  # neither touches the database
            assert settings.database_url.startswith("postgresql"), obj["metadata"]["name"]


def test_base_secrets_are_marked_examples(builds):
    for secret in by_kind(builds["base"], "Secret").values():
        for key, value in secret["data"].items():
            assert "CHANGE-ME" in base64.b64decode(value).decode(), (secret["metadata"]["name"], key)


def test_migration_job_runs_migrate_once(builds):
    for objects in builds.values():
        job = by_kind(objects, "Job")["agentsearch-migrate"]
        (container,) = pod_spec(job)["containers"]
        assert container["args"] == ["agentsearch", "migrate"]
        assert pod_spec(job)["restartPolicy"] == "Never"


@pytest.mark.parametrize("build", BUILDS)
def test_images_are_pinned(builds, build):
    for obj in workloads(builds[build]):
        for container in pod_spec(obj)["containers"]:
            repository, _, tag = container["image"].rpartition(":")
            assert repository and tag and "/" not in tag and tag != "latest", container["image"]

