"""firstfault.toml (docs/DESIGN.md §5): every key optional, unknown keys rejected with file and key."""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from firstfault.errors import BadInput


@dataclass(frozen=True)
class Attribution:
    skew_tolerance_s: float = 2.0
    lookback_s: float = 1800.0
    grace_s: float = 300.0
    ambiguity_margin: float = 0.1
    late_penalty: float = 0.5
    corroboration_bonus: float = 0.05


@dataclass(frozen=True)
class Landing:
    batch_bytes: int = 64 * 1024 * 1024
    max_line_bytes: int = 64 * 1024
    workers: int = 0  # processes landing attempts in parallel; 0 = one per core when the input is big


@dataclass(frozen=True)
class LakeSettings:
    root: str = "./lake"


@dataclass(frozen=True)
class WarehouseSettings:
    path: str = "./firstfault.duckdb"


@dataclass(frozen=True)
class Config:
    lake: LakeSettings = field(default_factory=LakeSettings)
    warehouse: WarehouseSettings = field(default_factory=WarehouseSettings)
    attribution: Attribution = field(default_factory=Attribution)
    landing: Landing = field(default_factory=Landing)


def load_config(path: str | None) -> Config:
    if path is None:
        default = Path("firstfault.toml")
        if not default.exists():
            return Config()
        path = str(default)
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(path, "-", "file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise BadInput(path, "-", f"not valid TOML: {e}") from None
    sections = {f.name: f.type for f in fields(Config)}
    built = {}
    for name, value in doc.items():
        if name not in sections:
            raise BadInput(path, name, "unknown section")
        cls = {"lake": LakeSettings, "warehouse": WarehouseSettings, "attribution": Attribution, "landing": Landing}[name]
        built[name] = _section(path, name, cls, value)
    return Config(**built)


def _section(path: str, name: str, cls, value):
    if not isinstance(value, dict):
        raise BadInput(path, name, "must be a table")
    known = {f.name: f for f in fields(cls)}
    kwargs = {}
    for key, v in value.items():
        if key not in known:
            raise BadInput(path, f"{name}.{key}", "unknown key")
        want = type(getattr(cls(), key))
        if want is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if not isinstance(v, want) or isinstance(v, bool):
            raise BadInput(path, f"{name}.{key}", f"must be {want.__name__}")
        kwargs[key] = v
    return cls(**kwargs)


def resolve_config(path: str | None, *, lake_root: str | None = None, warehouse_path: str | None = None) -> Config:
    """The config file with command-line overrides applied."""
    config = load_config(path)
    if lake_root:
        config = replace(config, lake=LakeSettings(root=lake_root))
    if warehouse_path:
        config = replace(config, warehouse=WarehouseSettings(path=warehouse_path))
    return config
