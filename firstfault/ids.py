"""Attempt identity: the readable attempt id and its path-safe partition key (docs/DESIGN.md §1)."""
from __future__ import annotations

import re
from datetime import datetime, timezone

_SAFE = re.compile(rb"[A-Za-z0-9._-]")


def attempt_id(cluster: str, workload_id: str, attempt: int | str) -> str:
    return f"{cluster}/{workload_id}/{attempt}"


def attempt_key(attempt_id_: str) -> str:
    """Reversible, path-safe, never numeric: every byte outside [A-Za-z0-9._-] becomes ~XX."""
    return "".join(
        chr(b) if _SAFE.fullmatch(bytes([b])) else f"~{b:02X}" for b in attempt_id_.encode("utf-8")
    )


def attempt_id_from_key(key: str) -> str:
    return re.sub(r"~([0-9A-F]{2})", lambda m: chr(int(m.group(1), 16)), key).encode("latin-1").decode("utf-8")


def day_key(start: datetime) -> str:
    return start.astimezone(timezone.utc).strftime("%Y-%m-%d")
