"""The Kubernetes manifests (k8s/): render both overlays with kustomize, validate every object against
the Kubernetes JSON schemas, and check the operational rules of DESIGN.md on the rendered objects.

Tools (offline): ``kubectl kustomize`` (kubectl ships kustomize; a standalone ``kustomize`` binary is
used when present instead) and the PyPI package ``kubernetes-validate``, which ships the Kubernetes
JSON schemas of every release it supports inside the wheel (nothing is downloaded at test time).
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[2]
K8S = REPO / "k8s"
OVERLAYS = ("cpu", "gpu", "gpu-vllm")
K8S_VERSION = "1.32"  # schemas of this Kubernetes release (kubernetes-validate ships them)
STAGES = ("gateway", "encoder", "decoder")
MODEL_STAGES = ("encoder", "decoder")


def _kustomize_cmd(path: pathlib.Path) -> list[str]:
    if shutil.which("kustomize"):
        return ["kustomize", "build", str(path)]
    if shutil.which("kubectl"):
        return ["kubectl", "kustomize", str(path)]
    pytest.fail("neither kustomize nor kubectl is installed (kubectl: Debian package 'kubectl' / "
                "'kubernetes-client' >= 1.21, which has kustomize v4+ built in)")


def render(path: pathlib.Path) -> list[dict]:
    """Objects of ``kustomize build path`` (raises with kustomize's message on failure)."""
    out = subprocess.run(_kustomize_cmd(path), capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"kustomize failed for {path}:\n{out.stderr}"
    return [d for d in yaml.safe_load_all(out.stdout) if d]


@pytest.fixture(scope="module", params=OVERLAYS)
def rendered(request) -> tuple[str, list[dict]]:
    return request.param, render(K8S / "overlays" / request.param)


def _one(objs: list[dict], kind: str, name: str) -> dict:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
    return found[0]


def _deploy(objs, stage):
    return _one(objs, "Deployment", f"inkstream-{stage}")


def _container(objs, stage) -> dict:
    (c,) = _deploy(objs, stage)["spec"]["template"]["spec"]["containers"]
    return c


def _service_config(objs, stage) -> dict:
    """The YAML settings file the stage's container reads with --config, from the rendered ConfigMap."""
    c = _container(objs, stage)
    path = c["args"][c["args"].index("--config") + 1]
    mount = next(m for m in c["volumeMounts"] if path.startswith(m["mountPath"] + "/"))
    vol = next(v for v in _deploy(objs, stage)["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"])
    cm = _one(objs, "ConfigMap", vol["configMap"]["name"])
    return yaml.safe_load(cm["data"][path[len(mount["mountPath"]) + 1:]])


def test_every_object_validates_against_kubernetes_schemas(rendered):
    import kubernetes_validate

    overlay, objs = rendered
    assert len(objs) >= 20
    errors = []
    for o in objs:
        try:
            kubernetes_validate.validate(o, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{o['kind']}/{o['metadata']['name']}: {'.'.join(map(str, exc.path))}: {exc.message}")
    assert not errors, f"{overlay}: " + "\n".join(errors)


def test_schema_validation_catches_mistakes():
    """The validator is really checking: a typo'd field and a wrong type are reported."""
    import kubernetes_validate

    objs = render(K8S / "overlays" / "cpu")
    bad = _deploy(objs, "encoder")
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProb"] = {}  # typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S_VERSION, strict=True)
    hpa = _one(objs, "HorizontalPodAutoscaler", "inkstream-decoder")
    hpa["spec"]["maxReplicas"] = "eight"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(hpa, K8S_VERSION, strict=True)


def test_stage_services(rendered):
    _, objs = rendered
    for stage in MODEL_STAGES:
        svc = _one(objs, "Service", f"inkstream-{stage}")
        assert svc["spec"]["clusterIP"] == "None", "model services must be headless (client-side balancing)"
        assert svc["spec"]["selector"] == _deploy(objs, stage)["spec"]["selector"]["matchLabels"]
    gw = _one(objs, "Service", "inkstream-gateway")
    assert gw["spec"].get("clusterIP") != "None"
    assert {p["targetPort"] for p in gw["spec"]["ports"]} == {"http", "grpc"}
    cfg = _service_config(objs, "gateway")
    assert cfg["encoders"] == ["inkstream-encoder:50051"] and cfg["decoders"] == ["inkstream-decoder:50051"]


def test_hpa_per_stage_on_pod_custom_metrics(rendered):
    _, objs = rendered
    wanted = {
        "encoder": {"inkstream_encoder_queue_depth"},
        "decoder": {"inkstream_decoder_sequences_waiting", "inkstream_decoder_kv_cache_usage"},
        "gateway": {"inkstream_gateway_requests_inflight"},
    }
    hpas = [o for o in objs if o["kind"] == "HorizontalPodAutoscaler"]
    assert len(hpas) == 3
    for stage, names in wanted.items():
        hpa = _one(objs, "HorizontalPodAutoscaler", f"inkstream-{stage}")
        assert hpa["apiVersion"] == "autoscaling/v2"
        assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                                 "name": f"inkstream-{stage}"}
        assert all(m["type"] == "Pods" for m in hpa["spec"]["metrics"])
        assert {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]} == names
        assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]


def hpa_metric_names(objs: list[dict]) -> dict[str, set[str]]:
    """Stage -> custom metric names its HPA scales on."""
    out = {}
    for stage in STAGES:
        hpa = _one(objs, "HorizontalPodAutoscaler", f"inkstream-{stage}")
        out[stage] = {m["pods"]["metric"]["name"] for m in hpa["spec"]["metrics"]}
    return out


def adapter_rules(objs: list[dict]) -> list[dict]:
    cm = _one(objs, "ConfigMap", "inkstream-adapter-rules")
    return yaml.safe_load(cm["data"]["config.yaml"])["rules"]


def test_adapter_serves_every_hpa_metric_per_pod(rendered):
    _, objs = rendered
    rules = adapter_rules(objs)
    served = {}
    for r in rules:
        series = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{", r["seriesQuery"]).group(1)
        assert re.fullmatch(r["name"]["matches"], series), r
        assert r["resources"]["overrides"]["pod"] == {"resource": "pod"}
        assert r["resources"]["overrides"]["namespace"] == {"resource": "namespace"}
        assert "<<.Series>>" in r["metricsQuery"] and "by (<<.GroupBy>>)" in r["metricsQuery"]
        served[r["name"]["as"]] = series
    for names in hpa_metric_names(objs).values():
        for n in names:
            assert n in served, f"HPA metric {n} has no prometheus-adapter rule"
    assert _one(objs, "ConfigMap", "inkstream-adapter-rules")["metadata"]["namespace"] == "monitoring"


def test_metrics_documented():
    doc = (REPO / "docs" / "metrics.md").read_text()
    objs = render(K8S / "overlays" / "cpu")
    for names in hpa_metric_names(objs).values():
        for n in names:
            assert f"`{n}`" in doc, f"{n} missing from docs/metrics.md"


def test_pdb_per_stage_matches_pods(rendered):
    _, objs = rendered
    for stage in STAGES:
        pdb = _one(objs, "PodDisruptionBudget", f"inkstream-{stage}")
        labels = _deploy(objs, stage)["spec"]["template"]["metadata"]["labels"]
        assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert pdb["spec"]["maxUnavailable"] == 1


def _selects(selector: dict, labels: dict) -> bool:
    return selector.get("matchLabels", {}).items() <= labels.items()


def test_only_gateway_reaches_model_services(rendered):
    _, objs = rendered
    pols = [o for o in objs if o["kind"] == "NetworkPolicy"]
    labels = {s: _deploy(objs, s)["spec"]["template"]["metadata"]["labels"] for s in STAGES}
    deny = [p for p in pols if p["spec"]["podSelector"] == {} and "ingress" not in p["spec"]]
    assert deny and deny[0]["spec"]["policyTypes"] == ["Ingress"], "default-deny ingress policy missing"
    for stage in MODEL_STAGES:
        grpc_port = next(p["containerPort"] for p in _container(objs, stage)["ports"] if p["name"] == "grpc")
        rules = [r for p in pols if _selects(p["spec"]["podSelector"], labels[stage]) and p["spec"]["podSelector"]
                 for r in p["spec"].get("ingress", [])]
        assert rules
        for r in rules:
            assert r.get("from"), f"{stage}: an ingress rule without 'from' admits everyone"
            ports = {p["port"] for p in r["ports"]}
            for peer in r["from"]:
                if "podSelector" in peer:
                    assert _selects(peer["podSelector"], labels["gateway"])
                    assert not _selects(peer["podSelector"], labels[stage])
                    assert ports == {grpc_port}
                else:  # Prometheus: metrics port only
                    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
                    assert grpc_port not in ports


def test_probes_and_drain_timing(rendered):
    from inkstream.lifecycle import LIVENESS_SERVICE

    _, objs = rendered
    for stage in STAGES:
        c = _container(objs, stage)
        spec = _deploy(objs, stage)["spec"]["template"]["spec"]
        if stage in MODEL_STAGES:
            port = next(p["containerPort"] for p in c["ports"] if p["name"] == "grpc")
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                assert c[probe]["grpc"]["port"] == port, f"{stage} {probe} must be a native gRPC probe"
            assert c["readinessProbe"]["grpc"].get("service", "") == ""
            assert c["livenessProbe"]["grpc"]["service"] == LIVENESS_SERVICE
            # Startup probe budget covers weight loading: at least 5 minutes.
            assert c["startupProbe"]["periodSeconds"] * c["startupProbe"]["failureThreshold"] >= 300
        else:
            assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
            assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
            assert c["startupProbe"]["httpGet"]["path"] == "/healthz"
        pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
        assert pre_stop[0] == "sleep" and int(pre_stop[1]) >= 1
        drain = float(_service_config(objs, stage)["drain_grace_s"])
        # The gateway's uvicorn gets min(drain, 30 s) more after the drain (gateway/main.py).
        after = min(drain, 30.0) if stage == "gateway" else 0.0
        assert spec["terminationGracePeriodSeconds"] > int(pre_stop[1]) + drain + after, stage
        if stage in MODEL_STAGES:  # torch threads follow the CPU request, not the node's cores
            omp = next(e for e in c["env"] if e["name"] == "OMP_NUM_THREADS")
            assert omp["valueFrom"]["resourceFieldRef"] == {"containerName": c["name"], "resource": "requests.cpu",
                                                            "divisor": "1"}
    dec = _service_config(objs, "decoder")
    # The slowest page (max_new_tokens_cap tokens) must fit the drain at a TPOT of 30 ms.
    assert dec["max_new_tokens_cap"] * 0.030 < dec["drain_grace_s"]


def test_config_files_are_valid_service_settings(rendered):
    from decoder_service.config import DecoderConfig
    from encoder_service.config import EncoderConfig
    from gateway.config import GatewayConfig

    overlay, objs = rendered
    enc = EncoderConfig.model_validate(_service_config(objs, "encoder"))
    dec = DecoderConfig.model_validate(_service_config(objs, "decoder"))
    gw = GatewayConfig.model_validate(_service_config(objs, "gateway"))
    assert enc.host == dec.host == gw.host == "0.0.0.0"
    for stage, cfg in (("encoder", enc), ("decoder", dec)):
        ports = {p["name"]: p["containerPort"] for p in _container(objs, stage)["ports"]}
        assert ports == {"grpc": cfg.port, "metrics": cfg.metrics_port}
        assert cfg.model_dir == "/weights"
        assert cfg.device == ("cuda" if overlay.startswith("gpu") else "cpu")
    ports = {p["name"]: p["containerPort"] for p in _container(objs, "gateway")["ports"]}
    assert ports == {"http": gw.port, "grpc": gw.grpc_port}


def test_resources_and_gpus(rendered):
    overlay, objs = rendered
    for stage in STAGES:
        res = _container(objs, stage)["resources"]
        assert "cpu" in res["requests"] and "memory" in res["requests"] and "memory" in res["limits"]
        gpus = res["limits"].get("nvidia.com/gpu")
        if overlay.startswith("gpu") and stage in MODEL_STAGES:
            assert gpus == "1" and res["requests"]["nvidia.com/gpu"] == "1"
        else:
            assert gpus is None


def test_weights_mounted_read_only_and_not_in_gateway(rendered):
    overlay, objs = rendered
    weights_cm = next(o["metadata"]["name"] for o in objs if o["kind"] == "ConfigMap"
                      and o["metadata"]["name"].startswith("inkstream-weights"))
    version = _one(objs, "ConfigMap", weights_cm)["data"]["version"]
    for stage in MODEL_STAGES:
        mount = next(m for m in _container(objs, stage)["volumeMounts"] if m["name"] == "weights")
        assert mount == {"name": "weights", "mountPath": "/weights", "subPath": version, "readOnly": True}
        vol = next(v for v in _deploy(objs, stage)["spec"]["template"]["spec"]["volumes"] if v["name"] == "weights")
        assert vol["persistentVolumeClaim"]["readOnly"] is True
    assert all(m["name"] != "weights" for m in _container(objs, "gateway")["volumeMounts"])
    assert version == {"cpu": "compact-v1", "gpu": "deepseek-ocr2-v1", "gpu-vllm": "deepseek-ocr2-v1"}[overlay]
    for init in _deploy(objs, "decoder")["spec"]["template"]["spec"].get("initContainers", []):
        # gpu-vllm's export-vllm: the same weights directory as the decoder, read-only
        mount = next(m for m in init["volumeMounts"] if m["name"] == "weights")
        assert mount == {"name": "weights", "mountPath": "/weights", "subPath": version, "readOnly": True}


def test_weights_version_is_one_value(tmp_path):
    """Changing the one literal in an overlay moves both model Deployments to the new directory and
    changes their pod templates (a rolling update); nothing else needs editing."""
    tree = tmp_path / "k8s"
    shutil.copytree(K8S, tree)
    before = render(tree / "overlays" / "gpu")
    kfile = tree / "overlays" / "gpu" / "kustomization.yaml"
    text = kfile.read_text()
    assert text.count("version=deepseek-ocr2-v1") == 1
    kfile.write_text(text.replace("version=deepseek-ocr2-v1", "version=deepseek-ocr2-v2"))
    after = render(tree / "overlays" / "gpu")
    for stage in MODEL_STAGES:
        mounts = {m["name"]: m for m in _container(after, stage)["volumeMounts"]}
        assert mounts["weights"]["subPath"] == "deepseek-ocr2-v2"
        assert _deploy(after, stage)["spec"]["template"] != _deploy(before, stage)["spec"]["template"]
    assert _deploy(after, "gateway") == _deploy(before, "gateway")


def test_config_and_secret_sources(rendered):
    overlay, objs = rendered
    gw = _container(objs, "gateway")
    env = {e["name"]: e.get("value") for e in gw["env"]}
    vols = {v["name"]: v for v in _deploy(objs, "gateway")["spec"]["template"]["spec"]["volumes"]}
    keys_mount = next(m for m in gw["volumeMounts"] if m["name"] == "api-keys")
    assert vols["api-keys"]["secret"]["secretName"] == "inkstream-api-keys"
    assert env["INKSTREAM_API_KEYS_FILE"].startswith(keys_mount["mountPath"] + "/")
    assert not any(o["kind"] == "Secret" for o in objs), "API keys must not be committed in the manifests"
    for stage in STAGES:
        c = _container(objs, stage)
        assert c["args"][:2] == ["serve", stage]
        vllm = overlay == "gpu-vllm" and stage == "decoder"  # the decoder on the vLLM image (Dockerfile.vllm)
        assert c["image"].startswith("ghcr.io/inkstream/inkstream-vllm:" if vllm else "ghcr.io/inkstream/inkstream:")
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert _deploy(objs, stage)["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    assert len({_container(objs, s)["image"].replace("-vllm:", ":") for s in STAGES}) == 1, \
        "one image (one version) for every stage"


def _quantity(q: str) -> float:
    """A Kubernetes quantity as a number ("750m" -> 0.75, "4" -> 4.0)."""
    return float(q[:-1]) / 1000 if q.endswith("m") else float(q)


def test_hpa_targets_consistent_with_service_limits(rendered):
    """Scale out before admission refuses work: queue / waiting targets below the configured
    limits, KV-cache usage target a fraction below 1."""
    _, objs = rendered
    targets = {}
    for stage in STAGES:
        for m in _one(objs, "HorizontalPodAutoscaler", f"inkstream-{stage}")["spec"]["metrics"]:
            targets[m["pods"]["metric"]["name"]] = _quantity(m["pods"]["target"]["averageValue"])
    enc, dec = _service_config(objs, "encoder"), _service_config(objs, "decoder")
    assert 1 <= targets["inkstream_encoder_queue_depth"] <= enc["max_queue_pages"] / 2
    assert 1 <= targets["inkstream_decoder_sequences_waiting"] <= dec["max_waiting"] / 2
    assert 0.5 <= targets["inkstream_decoder_kv_cache_usage"] < 1.0
