"""Probes and metrics (APIRouter): ``/healthz``, ``/readyz``, ``/metrics`` — on every role."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from gateway import tenancy
from gateway.core import GatewayCore

_READY = {"type": "object", "required": ["ready", "checks"],
          "properties": {"ready": {"type": "boolean"},
                         "checks": {"type": "object", "additionalProperties": {"type": "string",
                                                                               "enum": ["ok", "failing"]}},
                         "reason": {"type": "string", "description": "admin role only (or draining)"},
                         "details": {"type": "object", "additionalProperties": {"type": "string"},
                                     "description": "admin role only: why each failing dependency fails"}}}


def probes_router(core: GatewayCore) -> APIRouter:
    """Liveness, readiness (replicas + stores) and the Prometheus exposition over ``core``."""
    router = APIRouter()

    @router.get("/healthz", summary="Liveness: the process answers")
    async def healthz() -> dict[str, str]:
        """Liveness: 200 while the process answers (also while draining)."""
        return {"status": "ok"}

    @router.get("/readyz", summary="Readiness: replicas SERVING and the stores reachable", responses={
        200: {"description": "ready", "content": {"application/json": {"schema": _READY}}},
        503: {"description": "not ready (no replica serving, a store unreachable, or draining); checks says "
                    "which, reason and details why (admin role)",
              "content": {"application/json": {"schema": _READY}}}})
    async def readyz(request: Request) -> JSONResponse:
        """Readiness: 200 when an encoder and a decoder replica are SERVING and the job and result
        stores answer; else 503 (also while draining). ``checks``: each dependency ``ok`` or
        ``failing``; ``reason`` and ``details`` (which name endpoints) only for the admin role (a
        key with ``admin``, or every caller when no API keys are configured).
        """
        if core.draining:
            return JSONResponse({"ready": False, "reason": "draining", "checks": {}}, status_code=503)
        deps = dict(await core.store_checks())
        deps["replicas"] = await core.service.ready()
        ok = all(good for good, _ in deps.values())
        body: dict[str, object] = {"ready": ok,
                                   "checks": {name: "ok" if good else "failing" for name, (good, _) in deps.items()}}
        if tenancy.current().admin:
            body["reason"] = next((why for good, why in deps.values() if not good), "")
            body["details"] = {name: why for name, (good, why) in deps.items() if not good}
        return JSONResponse(body, status_code=200 if ok else 503)

    @router.get("/metrics", summary="Prometheus metrics", response_class=Response, responses={
        200: {"description": f"Prometheus text exposition ({CONTENT_TYPE_LATEST})",
              "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}}}})
    async def metrics() -> Response:
        """Prometheus text exposition of the process's OpenTelemetry metrics."""
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    return router
