"""The audit log: one structured JSON line per operation that changes or reveals a tenant's data.

Operations: ``job_submit``, ``job_read`` (status), ``result_read``, ``job_cancel``, ``upload``,
``ocr`` (a synchronous read), ``queue_pause`` / ``queue_resume`` / ``queue_read`` (admin),
``refused_key`` (a request with a missing or unknown API key), ``forbidden`` (a valid key without the
role or the ``source`` it asked for). Each line is a record of logger ``inkstream.audit`` (INFO, so it
goes where the process's JSON logs go; operators route it by ``logger``) with fields ``audit: true``,
``action``, ``tenant``, ``key_id`` (a SHA-256 prefix of the API key, never the key), ``request_id``
(stamped by :mod:`inkstream.logs`), ``outcome`` (``ok``, ``denied``, ``not_found``, or the error's
reason) and the operation's ids (``job_id``...). Like every log line it is masked
(:mod:`inkstream.masking`): no URL path or query, password or token is written whole.
"""

from __future__ import annotations

import logging
from typing import Any

from gateway.tenancy import Principal, current
from inkstream.errors import as_inkstream_error

__all__ = ["audit", "AUDIT_LOGGER"]

AUDIT_LOGGER = "inkstream.audit"
log = logging.getLogger(AUDIT_LOGGER)


def audit(action: str, *, outcome: str = "ok", principal: Principal | None = None, **fields: Any) -> None:
    """Write the audit line of ``action`` by ``principal`` (default: the current one) with ``outcome``
    and ``fields`` (ids and counts only; never document content or secrets).
    """
    p = principal or current()
    log.info("audit %s %s", action, outcome, extra={
        "audit": True, "action": action, "tenant": p.tenant, "key_id": p.key_id, "outcome": outcome, **fields})


class audited:
    """Context manager: the audit line of ``action`` when the block ends, with outcome ``ok`` or the
    error's reason (``NOT_FOUND``, ``PERMISSION_DENIED``...; ``cancelled`` when the client left).
    ``fields`` may be added to inside the block (``a.fields["job_id"] = ...``).
    """

    def __init__(self, action: str, **fields: Any):
        self.action, self.fields = action, fields

    def __enter__(self) -> audited:
        return self

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        if exc is None:
            outcome = "ok"
        else:
            outcome = "cancelled" if isinstance(exc, BaseException) and not isinstance(exc, Exception) \
                else as_inkstream_error(exc).reason_name
        audit(self.action, outcome=outcome, **self.fields)
