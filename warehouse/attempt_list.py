"""The attempts list of `GET /v1/attempts` (docs/api.md): its query (filters and page) checked, and the page read from
the warehouse, newest first as in the report's attempts table."""
from __future__ import annotations

from datetime import date
from urllib.parse import urlencode

from firstfault.errors import BadInput
from firstfault.warehouse.read import query, reading

QUERY = "query string"
PAGE_SIZE, MAX_PAGE_SIZE = 100, 1000  # attempts per page: default, at most
VERDICTS = ("attributed", "ambiguous", "unattributed", "not_failed")
DOMAINS = ("hardware", "network", "software", "application", "infrastructure")
_ISO = "'%Y-%m-%dT%H:%M:%S.%gZ'"  # as timestamps read inside a verdict (docs/verdict.md)
# one line per attempt, as the report's attempts table shows it
ATTEMPT_LIST_SQL = f"""SELECT attempt_id, cluster, workload_id, attempt, state, verdict, domain, subdomain, culprit_nodes,
    action, quality.confidence AS confidence, root_cause.summary AS summary, day, strftime(start_ts, {_ISO}) AS start,
    strftime(end_ts, {_ISO}) AS "end", gpu_model, nodes FROM attributions"""
ATTEMPT_FILTERS = {"verdict": "verdict = ?", "domain": "domain = ?", "day": "day = ?", "node": "list_contains(nodes, ?)"}


def list_attempts(path: str, filters: dict[str, str], limit: int, offset: int) -> tuple[int, list[dict]]:
    """(how many attempts match, the page of them from `offset`), newest start first as in the report (attempts
    without a start last; then by attempt id, descending). `filters`: verdict, domain, day (exact) and node (the
    attempt ran on it). FileNotFoundError when the warehouse does not exist yet."""
    conditions = [ATTEMPT_FILTERS[key] for key in filters]
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    params = list(filters.values())
    with reading(path) as con:
        total = con.execute(f"SELECT count(*) FROM attributions{where}", params).fetchone()[0]
        page = query(con, f"{ATTEMPT_LIST_SQL}{where} ORDER BY start_ts DESC NULLS LAST, attempt_id DESC LIMIT ? OFFSET ?",
                     [*params, limit, offset])
    return total, page


def attempt_query(params) -> tuple[dict[str, str], int, int]:
    """(filters, limit, offset) of GET /v1/attempts from its query parameters; BadInput naming the parameter."""
    allowed = (*ATTEMPT_FILTERS, "limit", "offset")
    for key in params:
        if key not in allowed:
            raise BadInput(QUERY, key, f"unknown parameter: one of {', '.join(allowed)}")
        if len(params.getlist(key)) > 1:
            raise BadInput(QUERY, key, "given more than once")
    choices = {"verdict": VERDICTS, "domain": DOMAINS}
    filters = {}
    for key in ATTEMPT_FILTERS:
        value = params.get(key)
        if value is None:
            continue
        if not value:
            raise BadInput(QUERY, key, "empty")
        if key in choices and value not in choices[key]:
            raise BadInput(QUERY, key, f"{value!r} is not one of {', '.join(choices[key])}")
        if key == "day" and not _is_day(value):
            raise BadInput(QUERY, key, f"{value!r} is not a UTC day YYYY-MM-DD")
        filters[key] = value
    limit = _whole_number(params, "limit", PAGE_SIZE, 1, MAX_PAGE_SIZE)
    offset = _whole_number(params, "offset", 0, 0, None)
    return filters, limit, offset


def _is_day(value: str) -> bool:
    try:
        return date.fromisoformat(value).isoformat() == value
    except ValueError:
        return False


def _whole_number(params, key: str, default: int, low: int, high: int | None) -> int:
    value = params.get(key)
    if value is None:
        return default
    if not (value.isascii() and value.isdigit()) or int(value) < low or (high is not None and int(value) > high):
        bound = f"from {low} to {high}" if high is not None else f"of at least {low}"
        raise BadInput(QUERY, key, f"{value!r} is not a whole number {bound}")
    return int(value)


def next_page(filters: dict[str, str], limit: int, offset: int, shown: int, total: int) -> str | None:
    """The URL of the page after this one, None on the last page."""
    if offset + shown >= total:
        return None
    return "/v1/attempts?" + urlencode({**filters, "limit": limit, "offset": offset + shown})
