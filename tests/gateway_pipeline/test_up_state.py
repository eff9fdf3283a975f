"""``inkstream up``'s state folder without starting a stack: the default under the user's data folder
(XDG_DATA_HOME), ``--fresh`` clearing it, and one ``up`` per folder (the lock)."""

from __future__ import annotations

import pytest

from launcher import up


def test_default_state_dir_follows_xdg_data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert up.default_state_dir() == tmp_path / "data" / "inkstream" / "up"


def test_state_kept_unless_fresh_and_locked_while_in_use(tmp_path):
    state = tmp_path / "state"
    with up.open_state_dir(state, fresh=False):
        (state / "gateway").mkdir()
        (state / "gateway" / "jobs.sqlite").write_bytes(b"x")
        with pytest.raises(BlockingIOError):
            up.open_state_dir(state, fresh=False)
        with pytest.raises(BlockingIOError):  # never cleared while another up uses it
            up.open_state_dir(state, fresh=True)
        assert (state / "gateway" / "jobs.sqlite").is_file()
    with up.open_state_dir(state, fresh=False):
        assert (state / "gateway" / "jobs.sqlite").is_file()
    with up.open_state_dir(state, fresh=True):
        assert not (state / "gateway").exists() and (state / "up.lock").is_file()


def test_a_second_up_on_the_same_folder_exits_2(tmp_path, capsys):
    state = tmp_path / "state"
    with up.open_state_dir(state, fresh=False):
        assert up.main(["--state-dir", str(state), "--port", "0", "--grpc-port", "0"]) == 2
    assert "in use by another inkstream up" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "says"), [
    (["--port", "70000"], "argument --port: 70000 is not a port number (0-65535"),
    (["--grpc-port", "-1"], "argument --grpc-port: -1 is not a port number"),
    (["--port", "http"], "argument --port: 'http' is not a port number"),
    (["--port", "9000", "--grpc-port", "9000"], "--port and --grpc-port are both 9000"),
    (["--model", "{tmp}/missing"], "--model {tmp}/missing: no such directory"),
    (["--model", "{tmp}"], "--model {tmp}: not a checkpoint directory (no config.json)"),
    (["--model", "{tmp}/file"], "--model {tmp}/file: not a directory"),
    (["--startup-timeout", "0"], "--startup-timeout must be a number of seconds > 0"),
    (["--log-dir", "{tmp}/file/logs"], "cannot use the log folder {tmp}/file/logs"),
])
def test_bad_flags_exit_2_with_a_message_before_anything_starts(tmp_path, capsys, monkeypatch, flags, says):
    """A port out of range, a missing or wrong model folder, an unusable log folder: exit 2 and one
    line naming the flag, before any process starts (a port out of range was an OverflowError
    traceback, a missing model folder exit 1 after the start message).
    """
    (tmp_path / "file").write_text("not a folder")
    monkeypatch.setattr(up, "LocalStack", None)  # nothing may be started
    argv = ["--state-dir", str(tmp_path / "state"), *(f.format(tmp=tmp_path) for f in flags)]
    try:
        code = up.main(argv)
    except SystemExit as exc:  # argparse's own refusal
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert says.format(tmp=tmp_path) in err and "Traceback" not in err and "starting" not in err, err


def test_help_is_plain_text(capsys):
    # Before: the description was the module docstring's first line, "``inkstream up``: ...".
    with pytest.raises(SystemExit):
        up.main(["--help"])
    out = capsys.readouterr().out
    assert "``" not in out and ":func:" not in out and ":class:" not in out
    assert "Run the whole stack on this machine" in out and "--state-dir" in out
    assert "INKSTREAM_GATEWAY__DRAIN_GRACE_S" in out


class _NoStack(up.LocalStack):
    """A LocalStack that starts nothing (for what ``up`` prints around a stack)."""

    def start(self):
        self.addrs["gateway"] = ["127.0.0.1:1"]
        return self


@pytest.mark.parametrize(("env", "drain", "kill_after"), [(None, "30", 65.0), ("12", "12", 29.0), ("0", "0", 10.0)])
def test_the_stop_message_and_the_kill_grace_follow_the_configured_drain(tmp_path, capsys, monkeypatch, env, drain,
                                                                         kill_after):
    # Before: "up to 65 s" whatever the gateway's drain_grace_s (30 s by default).
    if env is None:
        monkeypatch.delenv("INKSTREAM_GATEWAY__DRAIN_GRACE_S", raising=False)
    else:
        monkeypatch.setenv("INKSTREAM_GATEWAY__DRAIN_GRACE_S", env)
    stacks: list[up.LocalStack] = []

    def make(*args, **kwargs):
        stacks.append(_NoStack(*args, **kwargs))
        return stacks[-1]

    monkeypatch.setattr(up, "LocalStack", make)
    monkeypatch.setattr(up, "watch", lambda stack, stopping: "")
    assert up.main(["--state-dir", str(tmp_path / "state"), "--port", "0", "--grpc-port", "0"]) == 0
    assert f"draining requests in flight, up to {drain} s;" in capsys.readouterr().err
    assert stacks[0].gateway_drain_s == float(drain) and stacks[0].gateway_stop_grace_s == kill_after
    assert stacks[0].env["INKSTREAM_GATEWAY__DRAIN_GRACE_S"] == drain  # what the gateway is started with
