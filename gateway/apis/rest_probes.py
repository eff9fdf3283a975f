"""Probes and metrics (APIRouter): ``/healthz``, ``/readyz``, ``/metrics`` — on every role."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest

from gateway.core import GatewayCore

_READY = {"type": "object", "required": ["ready", "reason"],
          "properties": {"ready": {"type": "boolean"}, "reason": {"type": "string"}}}


def probes_router(core: GatewayCore) -> APIRouter:
    """Liveness, readiness (replicas + stores) and the Prometheus exposition over ``core``."""
    router = APIRouter()

    @router.get("/healthz", summary="Liveness: the process answers")
    async def healthz() -> dict[str, str]:
        """Liveness: 200 while the process answers (also while draining)."""
        return {"status": "ok"}

    @router.get("/readyz", summary="Readiness: replicas SERVING and the stores reachable", responses={
        200: {"description": "ready", "content": {"application/json": {"schema": _READY}}},
        503: {"description": "not ready (no replica serving, a store unreachable, or draining); reason says which",
              "content": {"application/json": {"schema": _READY}}}})
    async def readyz() -> JSONResponse:
        """Readiness: 200 when an encoder and a decoder replica are SERVING and the job and result
        stores answer; else 503 with the reason (also 503 while draining).
        """
        if core.draining:
            return JSONResponse({"ready": False, "reason": "draining"}, status_code=503)
        ok, reason = await core.stores_ready()
        if ok:
            ok, reason = await core.service.ready()
        return JSONResponse({"ready": ok, "reason": reason}, status_code=200 if ok else 503)

    @router.get("/metrics", summary="Prometheus metrics", response_class=Response, responses={
        200: {"description": f"Prometheus text exposition ({CONTENT_TYPE_LATEST})",
              "content": {CONTENT_TYPE_LATEST.split(";")[0]: {"schema": {"type": "string"}}}}})
    async def metrics() -> Response:
        """Prometheus text exposition of the process's OpenTelemetry metrics."""
        return Response(generate_latest(REGISTRY), media_type=CONTENT_TYPE_LATEST)

    return router
