"""Command line and configuration of ``inkstream serve encoder`` (no model is loaded here)."""

from __future__ import annotations

import json

import pytest

from encoder_service.config import EncoderConfig, load_encoder_config
from encoder_service.main import main
from inkstream.config import ConfigError


def test_config_sources_and_precedence(tmp_path):
    path = tmp_path / "enc.yaml"
    path.write_text("max_batch_size: 4\nwire_dtype: float32\nport: 6000\n")
    env = {"INKSTREAM_ENCODER__MAX_BATCH_SIZE": "12", "INKSTREAM_ENCODER__MAX_WAIT_MS": "2.5"}
    cfg = load_encoder_config(path, overrides={"port": 7000, "metrics_port": None}, environ=env)
    got = (cfg.max_batch_size, cfg.max_wait_ms, cfg.wire_dtype, cfg.port, cfg.metrics_port)
    assert got == (12, 2.5, "float32", 7000, None)
    assert EncoderConfig().wire_dtype == "bfloat16"


@pytest.mark.parametrize(
    "yaml_text,field",
    [
        ("max_batch_sise: 4\n", "max_batch_sise"),
        ("wire_dtype: int8\n", "wire_dtype"),
        ("max_batch_size: 0\n", "max_batch_size"),
        ("max_image_bytes: 70000000\n", "max_image_bytes"),
    ],
)
def test_bad_config_names_the_field(tmp_path, yaml_text, field):
    path = tmp_path / "enc.yaml"
    path.write_text(yaml_text)
    with pytest.raises(ConfigError, match=field):
        load_encoder_config(path, environ={})


def test_help_exits_zero(capsys):
    assert main(["--help"]) == 0
    assert "--model DIR" in capsys.readouterr().out


def test_missing_model_dir_exits_2(capsys, monkeypatch):
    monkeypatch.delenv("INKSTREAM_ENCODER__MODEL_DIR", raising=False)
    assert main([]) == 2
    assert "pass --model DIR" in capsys.readouterr().err


def test_not_a_checkpoint_exits_2(tmp_path, capsys):
    assert main(["--model", str(tmp_path)]) == 2
    assert "not a checkpoint directory (no config.json)" in capsys.readouterr().err


def test_unknown_family_exits_2(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    assert main(["--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown model family" in err and "deepseek_ocr2" in err


def test_bad_config_file_exits_2(tmp_path, capsys):
    cfg = tmp_path / "enc.yaml"
    cfg.write_text("max_queue_pages: -3\n")
    assert main(["--model", str(tmp_path), "--config", str(cfg)]) == 2
    assert "max_queue_pages" in capsys.readouterr().err
    assert main(["--model", str(tmp_path), "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_bad_flag_exits_2(capsys):
    assert main(["--port", "not-a-number"]) == 2
