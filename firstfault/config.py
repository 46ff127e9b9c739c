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
    # history-aware actions (docs/DESIGN.md §4.3); budgets are counted since the workload last made progress
    max_restarts: int = 3           # failed attempts without progress after which the action is `stop`
    same_root_limit: int = 2        # the same root this many times without progress in between -> `stop`
    confirmation_retries: int = 1   # plain restarts granted to a root that cannot be localised (NVL72 peer, `group`)


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
class RuleSettings:
    dirs: tuple[str, ...] = ()  # site rule folders (*.sql, *.py rules and their fixture *.yaml), after the built-ins


@dataclass(frozen=True)
class PatternSettings:
    dirs: tuple[str, ...] = ()  # site extraction pattern folders (*.yaml), merged after the built-in patterns


@dataclass(frozen=True)
class Config:
    lake: LakeSettings = field(default_factory=LakeSettings)
    warehouse: WarehouseSettings = field(default_factory=WarehouseSettings)
    attribution: Attribution = field(default_factory=Attribution)
    landing: Landing = field(default_factory=Landing)
    rules: RuleSettings = field(default_factory=RuleSettings)
    patterns: PatternSettings = field(default_factory=PatternSettings)


SECTIONS = {
    "lake": LakeSettings, "warehouse": WarehouseSettings, "attribution": Attribution, "landing": Landing,
    "rules": RuleSettings, "patterns": PatternSettings,
}


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
    built = {}
    for name, value in doc.items():
        if name not in SECTIONS:
            raise BadInput(path, name, "unknown section")
        built[name] = _section(path, name, SECTIONS[name], value)
    base = Path(path).resolve().parent
    for name in ("rules", "patterns"):
        if name in built:
            built[name] = replace(built[name], dirs=_resolve_dirs(path, f"{name}.dirs", base, built[name].dirs))
    return Config(**built)


def _resolve_dirs(path: str, key: str, base: Path, dirs: tuple[str, ...]) -> tuple[str, ...]:
    """Folders relative to the config file's folder; each must exist."""
    out = []
    for d in dirs:
        folder = Path(d).expanduser()
        folder = folder if folder.is_absolute() else base / folder
        if not folder.is_dir():
            raise BadInput(path, key, f"no such directory: {folder}")
        out.append(str(folder))
    return tuple(out)


def _section(path: str, name: str, cls, value):
    if not isinstance(value, dict):
        raise BadInput(path, name, "must be a table")
    known = {f.name: f for f in fields(cls)}
    kwargs = {}
    for key, v in value.items():
        if key not in known:
            raise BadInput(path, f"{name}.{key}", "unknown key")
        want = type(getattr(cls(), key))
        if want is tuple:
            if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
                raise BadInput(path, f"{name}.{key}", "must be a list of folder names")
            kwargs[key] = tuple(v)
            continue
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
