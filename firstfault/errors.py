"""Errors a user can cause; the CLI turns them into one line and exit status 2."""
from __future__ import annotations


class BadInput(Exception):
    """Malformed user input: names the file and the field."""

    def __init__(self, file: str, field: str, problem: str):
        self.file, self.field, self.problem = file, field, problem
        super().__init__(f"{file}: field '{field}': {problem}")
