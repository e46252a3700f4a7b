"""The deployment files that no engine runs here (no Docker, no Kubernetes), checked against what the server
does: the image installs the wheel in a stage without Node and runs as a non-root user; the Kubernetes
manifest probes the right endpoints on the container's port, runs as that user, sets only variables chatsync
reads, and gives a shutdown the time it takes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from server.app import SHUTDOWN_DRAIN_SECONDS, create_app
from server.serve import uvicorn_config
from server.settings import Settings, load_settings

ROOT = Path(__file__).resolve().parent.parent


def dockerfile_stages() -> list[list[str]]:
    """The Dockerfile's instructions (continuation lines joined), one list per ``FROM`` stage."""
    text = re.sub(r"\\\n", " ", (ROOT / "Dockerfile").read_text())
    stages: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("FROM "):
            stages.append([])
        stages[-1].append(line)
    return stages


def test_the_image_installs_the_wheel_without_node_and_runs_as_a_user() -> None:
    build, runtime = dockerfile_stages()
    assert any("python -m build --wheel" in line for line in build)
    assert not any("node" in line.lower() for line in runtime)
    assert any(re.search(r"pip install .*\.whl", line) for line in runtime)
    (user,) = [line.split()[1] for line in runtime if line.startswith("USER ")]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0  # numeric, so Kubernetes can check runAsNonRoot
    assert runtime[-1] == 'CMD ["chatsync", "serve"]'


def kubernetes() -> dict[str, dict[str, Any]]:
    docs = list(yaml.safe_load_all((ROOT / "deploy" / "kubernetes.yaml").read_text()))
    return {doc["kind"]: doc for doc in docs}


def test_the_kubernetes_manifest_probes_runs_unprivileged_and_drains() -> None:
    manifest = kubernetes()
    assert set(manifest) == {"Deployment", "Service"}
    deployment, service = manifest["Deployment"], manifest["Service"]
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    (port,) = container["ports"]
    assert service["spec"]["ports"][0]["targetPort"] == port["name"]

    probes = {kind: container[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")}
    assert {kind: probe["path"] for kind, probe in probes.items()} == {
        "startupProbe": "/healthz",
        "livenessProbe": "/healthz",
        "readinessProbe": "/readyz",
    }
    assert all(probe["port"] == port["name"] for probe in probes.values())
    settings = load_settings()
    app = create_app(settings)
    assert {"/healthz", "/readyz"} <= {getattr(route, "path", None) for route in app.app.routes}

    env = {e["name"]: e for e in container["env"]}
    assert set(env) <= {f"CHATSYNC_{name.upper()}" for name in Settings.model_fields}
    assert env["CHATSYNC_PORT"]["value"] == str(port["containerPort"])
    assert env["CHATSYNC_HOST"]["value"] == "0.0.0.0"
    assert {"CHATSYNC_DATABASE_URL", "CHATSYNC_BUS_URL"} <= set(env)

    security = pod["spec"]["securityContext"]
    user = next(line.split()[1] for line in dockerfile_stages()[-1] if line.startswith("USER "))
    assert security["runAsNonRoot"] is True and str(security["runAsUser"]) == user.split(":")[0]
    assert container["securityContext"]["allowPrivilegeEscalation"] is False

    # preStop, then the drain, then uvicorn's own graceful close: all inside the grace period.
    pre_stop = float(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    closing = uvicorn_config(app, settings, "127.0.0.1", 0).timeout_graceful_shutdown
    assert closing is not None
    assert pod["spec"]["terminationGracePeriodSeconds"] > pre_stop + SHUTDOWN_DRAIN_SECONDS + closing
