"""launcher.local_stack.LocalStack as a context manager."""

from __future__ import annotations

import pytest


def test_entering_a_started_local_stack_does_not_start_a_second_one(monkeypatch):
    """``with stack.start():`` used to spawn every service twice and stop only the second set (a
    system test left an encoder and a decoder running after CI)."""
    import subprocess

    from launcher.local_stack import LocalStack

    stack = LocalStack(None, gateway=False)
    proc = subprocess.Popen(["sleep", "60"])
    stack.procs["encoder"] = [proc]
    monkeypatch.setattr(stack, "start", lambda: pytest.fail("started again"))
    with stack as entered:
        assert entered is stack
    assert proc.poll() is not None  # stopped on exit
