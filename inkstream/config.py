"""Configuration loading: YAML file + environment-variable overrides, validated with pydantic.

Each service defines a pydantic model of its settings. :func:`load_config` reads the YAML file
(optional), applies overrides from ``<PREFIX>__<FIELD>[__<SUBFIELD>]`` environment variables (values
parsed as YAML scalars, so ``8``, ``true`` and ``0.5`` get their types), and validates; any problem
raises :class:`ConfigError` with every bad field named.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Mapping
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

T = TypeVar("T", bound=BaseModel)


class ConfigError(ValueError):
    """Invalid configuration; the message lists each bad field and why."""


def _set_path(d: dict[str, Any], path: list[str], value: Any) -> None:
    for key in path[:-1]:
        d = d.setdefault(key, {})
        if not isinstance(d, dict):
            raise ConfigError(f"cannot override {'.'.join(path)}: {key} is not a section")
    d[path[-1]] = value


def load_config(
    model: type[T],
    path: str | pathlib.Path | None = None,
    env_prefix: str = "INKSTREAM",
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> T:
    """Build ``model`` from YAML at ``path``, then env vars, then ``overrides`` (highest).

    Env example: ``INKSTREAM_DECODER__MAX_RUNNING=16`` sets ``max_running`` when
    ``env_prefix="INKSTREAM_DECODER"``. Raises ConfigError for unreadable YAML, unknown or
    invalid fields.
    """
    data: dict[str, Any] = {}
    if path:
        p = pathlib.Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist")
        try:
            loaded = yaml.safe_load(p.read_text()) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {p} is not valid YAML: {exc}") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"config file {p} must hold a mapping at the top level")
        data.update(loaded)
    env = os.environ if environ is None else environ
    prefix = env_prefix.upper() + "__"
    for key, raw in env.items():
        if key.startswith(prefix):
            fields = [part.lower() for part in key[len(prefix):].split("__") if part]
            if fields:
                _set_path(data, fields, yaml.safe_load(raw) if raw != "" else "")
    for key, value in (overrides or {}).items():
        if value is not None:
            _set_path(data, key.split("."), value)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = [f"  {'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors()]
        raise ConfigError(f"invalid {model.__name__} configuration:\n" + "\n".join(lines)) from None
