"""Errors a user can cause; the CLI turns them into one line and exit status 2."""
from __future__ import annotations

import errno


class BadInput(Exception):
    """Malformed user input: names the file and the field (None when the problem is the whole file: not found,
    not parseable)."""

    def __init__(self, file: str, field: str | None, problem: str):
        self.file, self.field, self.problem = file, field, problem
        super().__init__(f"{file}: field '{field}': {problem}" if field else f"{file}: {problem}")


def describe(e: BaseException) -> str:
    """One line for a failure row or a warning: a BadInput as it reads, anything else with its type."""
    return str(e) if isinstance(e, BadInput) else f"{type(e).__name__}: {e}"


_REFUSED = (errno.EROFS, errno.EACCES, errno.EPERM)
WHERE_TO = "make it writable by this user or choose another place (--lake, --warehouse, [automation] spool_dir)"
# the spool and its outbox (<spool_dir>/outbox) are the worker's
SPOOL_WHERE_TO = "make it writable by the worker's user or set [automation] spool_dir to a folder it can write"


def refused_by_file_system(e: OSError, path: object = None, where_to: str = WHERE_TO) -> BadInput | None:
    """A file-system refusal (a read-only mount, permissions) on `path` (default: the one the error names): the
    user's to fix, not a bug."""
    path = path or e.filename
    if e.errno not in _REFUSED or not path:
        return None
    return BadInput(str(path), None, f"{e.strerror}: {where_to}")
