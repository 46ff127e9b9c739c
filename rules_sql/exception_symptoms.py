"""The exception texts the message catalogue calls symptoms (a store left waiting for its clients, the agent's own
stop signal): python_exception leaves an exception aside when its message matches one of them. Each text comes from its entry's format string as written in the emitter's source: the quoted
literals are kept, the expressions and conversions between them match any text."""
from __future__ import annotations

import re
from functools import lru_cache

from firstfault.transforms.messages import Message, load_catalogue

#: a double-quoted C/C++ literal, or a Python one ('…', "…", f"…") when the format is a Python expression
_C_LITERAL = re.compile(r'"((?:[^"\\]|\\.)*)"')
_PY_LITERAL = re.compile(r"""^f?(['"])((?:(?!\1).)*)\1""")
#: printf conversions (`%d`, `%lu`, `%"PRIu64"`, Slurm's `%ps`) and Python replacement fields (`{}`, `{pid}`)
_CONVERSION = re.compile(r'%(?:"PRI\w+"|p[A-Za-z]|[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcsp])|\{[^{}]*\}')
_ANY = "\0"  # placeholder for "any text" while the literals are escaped


def format_pattern(fmt: str) -> str:
    """A regex that matches the messages `fmt` prints: literals kept, every value between them matches anything."""
    literals = _C_LITERAL.findall(fmt)
    if literals and fmt.lstrip().startswith('"'):  # C/C++: "lit", expr, "lit" or "lit" << expr << "lit"
        text, end = "", 0
        for m in _C_LITERAL.finditer(fmt):
            text += (_ANY if re.sub(r"[\s,<]", "", fmt[end:m.start()]) else "") + m.group(1)
            end = m.end()
        text += _ANY if re.sub(r"[\s,<;)]", "", fmt[end:]) else ""
    else:
        py = _PY_LITERAL.match(fmt.strip())
        text = py.group(2) if py else fmt
    text = text.replace("\\n", " ").replace('\\"', '"').replace("\\'", "'")
    text = _CONVERSION.sub(_ANY, text)
    parts = [re.escape(p.strip() if i else p.rstrip()) for i, p in enumerate(text.split(_ANY))]
    return ".*?".join(parts)


def exception_symptom_patterns(messages: list[Message]) -> list[tuple[str, str]]:
    """(entry id, pattern) of every exception text the catalogue calls a symptom, sorted by id. A format whose role
    depends on its values (a worker killed by SIGKILL is a symptom, one that crashed is a cause) has a root entry with
    the same pattern: such a format is left to the rule's own reading of the values."""
    exceptions = [m for m in messages if m.kind == "exception_line"]
    roots = {format_pattern(m.format) for m in exceptions if m.role == "root"}
    return sorted((m.id, p) for m in exceptions if m.role == "symptom" and (p := format_pattern(m.format)) not in roots)


@lru_cache(maxsize=1)
def shipped_exception_symptoms() -> tuple[tuple[str, str], ...]:
    return tuple(exception_symptom_patterns(load_catalogue()))
