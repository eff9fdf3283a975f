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


class _Exited:
    """A child process that has exited with code 1."""

    pid = 0

    def poll(self) -> int:
        return 1

    def wait(self, timeout: float | None = None) -> int:
        return 1


def test_a_given_gateway_port_taken_while_starting_is_named_not_retried(monkeypatch, tmp_path, capsys):
    """``inkstream up`` checks its default ports at the start and the gateway binds them minutes later,
    once the replicas are up. When another process took the REST port meanwhile, the gateway was
    respawned on it (3 times, each exiting again) and up failed with 'gateway 0 exited with code 1' and a
    log tail; now the stack stops at once with PortTaken naming the port and the API, and up says which
    flag chooses another one (exit 2)."""
    import socket

    from launcher import up
    from launcher.local_stack import LocalStack, PortTaken

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    taken = holder.getsockname()[1]
    stack = LocalStack(None, gateway_port=taken, log_dir=tmp_path)
    spawned: list[list[str]] = []

    def spawn(service, i, args, env=None):
        spawned.append(args)
        stack.log_path(service, i).write_text(f"ERROR: [Errno 98] error while attempting to bind on address "
                                              f"('127.0.0.1', {taken}): address already in use\n")
        return _Exited()

    monkeypatch.setattr(stack, "_spawn", spawn)
    stack._launch("gateway", 0)
    with pytest.raises(PortTaken) as exc:
        stack._wait(("gateway",))
    assert (exc.value.api, exc.value.port) == ("REST", taken) and len(spawned) == 1

    class _Stack(LocalStack):
        def start(self):
            raise PortTaken("REST", taken)

    monkeypatch.setattr(up, "LocalStack", _Stack)
    try:
        assert up.main(["--state-dir", str(tmp_path / "state"), "--port", "0", "--grpc-port", "0"]) == 2
    finally:
        holder.close()
    err = capsys.readouterr().err
    assert f"port {taken} (the gateway's REST API)" in err and "choose another with --port" in err, err
