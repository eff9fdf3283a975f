"""The scale-out overlay (k8s/overlays/scaled): Redis + object-store settings from a ConfigMap and a
Secret, no ClientIP affinity, api / worker roles, a worker HPA on the queue depth served by an
adapter rule, and the PrometheusRule alerts checked with ``promtool check rules`` (Debian
``prometheus``). That every ``inkstream_*`` series the alerts name is exported is checked against
running gateways in tests/system/test_scaleout.py (:func:`alert_series`).
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

from tests.ops.test_k8s import K8S, K8S_VERSION, render

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def objs() -> list[dict]:
    return render(K8S / "overlays" / "scaled")


def _one(objs: list[dict], kind: str, name: str) -> dict:
    found = [o for o in objs if o["kind"] == kind and o["metadata"]["name"].startswith(name)]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} objects"
    return found[0]


def rules_file(objs: list[dict], path: pathlib.Path) -> pathlib.Path:
    """The PrometheusRule's groups as a Prometheus rule file at ``path``."""
    rule = _one(objs, "PrometheusRule", "inkstream-alerts")
    path.write_text(yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    return path


def alert_series(objs: list[dict]) -> set[str]:
    """The ``inkstream_*`` series the alert expressions read (histogram suffixes removed)."""
    rule = _one(objs, "PrometheusRule", "inkstream-alerts")
    names = set()
    for group in rule["spec"]["groups"]:
        for r in group["rules"]:
            names |= set(re.findall(r"\binkstream_[a-z0-9_]+", r["expr"]))
    return {re.sub(r"_bucket$", "", n) for n in names}


def test_objects_validate(objs):
    import kubernetes_validate

    errors = []
    for o in objs:
        if o["kind"] == "PrometheusRule":  # a CRD: promtool checks it below
            continue
        try:
            kubernetes_validate.validate(o, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{o['kind']}/{o['metadata']['name']}: {exc.message}")
    assert not errors, "\n".join(errors)


def test_shared_stores_roles_and_no_affinity(objs):
    assert _one(objs, "Service", "inkstream-gateway")["spec"]["sessionAffinity"] == "None"
    stores = _one(objs, "ConfigMap", "inkstream-stores")
    assert stores["data"]["INKSTREAM_GATEWAY__STORES__JOB_STORE"] == "redis"
    assert stores["data"]["INKSTREAM_GATEWAY__STORES__RESULT_STORE"] == "s3"
    assert stores["metadata"]["namespace"] == "inkstream"
    for name, role in (("inkstream-gateway", "api"), ("inkstream-worker", "worker")):
        c = _one(objs, "Deployment", name)["spec"]["template"]["spec"]["containers"][0]
        assert c["args"][c["args"].index("--role") + 1] == role
        refs = {next(iter(e)): next(iter(e.values()))["name"] for e in c["envFrom"]}
        assert refs["configMapRef"] == stores["metadata"]["name"] and refs["secretRef"] == "inkstream-stores"
    for stage in ("encoder", "decoder"):
        np = _one(objs, "NetworkPolicy", f"inkstream-{stage}-ingress")
        comps = [f["podSelector"]["matchLabels"].get("app.kubernetes.io/component")
                 for rule in np["spec"]["ingress"] for f in rule["from"] if "podSelector" in f]
        assert "worker" in comps and "gateway" in comps


def test_worker_hpa_metric_has_an_adapter_rule(objs):
    hpa = _one(objs, "HorizontalPodAutoscaler", "inkstream-worker")
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "External"
    name = metric["external"]["metric"]["name"]
    cm = _one(objs, "ConfigMap", "inkstream-adapter-rules")
    external = yaml.safe_load(cm["data"]["config.yaml"])["externalRules"]
    assert [r for r in external if r["name"]["as"] == name and name in r["seriesQuery"]]


def _promtool() -> str:
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool is not installed (Debian package 'prometheus'; make test installs it)")
    return exe


def test_promtool_checks_the_alert_rules(objs, tmp_path):
    out = subprocess.run([_promtool(), "check", "rules", str(rules_file(objs, tmp_path / "rules.yaml"))],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout
    alerts = {r["alert"]: r for g in _one(objs, "PrometheusRule", "inkstream-alerts")["spec"]["groups"]
              for r in g["rules"]}
    for needle in ("Memory", "Latency", "ErrorRate", "Backlog", "NotReady"):  # graded, each subject covered
        assert any(needle in a for a in alerts), needle
    assert {a["labels"]["severity"] for a in alerts.values()} == {"warning", "critical"}


def test_promtool_would_catch_a_broken_rule(objs, tmp_path):
    path = rules_file(objs, tmp_path / "rules.yaml")
    path.write_text(path.read_text().replace("> 600", "> > 600", 1))
    out = subprocess.run([_promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert out.returncode != 0
