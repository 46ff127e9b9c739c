"""URLs whose path means one thing: what a root check compares and what a fetcher asks for are the same path.

An HTTP client percent-decodes a URL and removes its dot segments before it asks (`/logs/%2e%2e/secret` is asked as
`/secret`), and a server may decode `%2f` into a separator; an object store takes its key as written. So a URL is
accepted only when neither reading can move it: no `.` or `..` segment before or after decoding, no encoded
separator (`%2f`, `%5c`), no backslash, nothing left to decode after one decoding, no control character, no
fragment. What is left is compared by its decoded segments, and fetched exactly as written."""
from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

# schemes whose fetchers percent-decode the path before they ask; the others take it as written (object keys)
_DECODED = frozenset({"http", "https"})
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_ENCODED_SEPARATOR = re.compile(r"%(2f|5c)", re.IGNORECASE)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class NotNormal(ValueError):
    """A URL whose path cannot be brought to one meaning; the message says why."""


@dataclass(frozen=True)
class UrlKey:
    """A URL as its fetcher reads it: scheme and host case-folded, the path as its decoded segments."""
    scheme: str
    host: str
    segments: tuple[str, ...]

    def within(self, root: UrlKey) -> bool:
        return (self.scheme, self.host) == (root.scheme, root.host) and self.segments[:len(root.segments)] == root.segments


def url_key(url: str) -> UrlKey:
    """The key of `url` (scheme://host/path, glob characters allowed); NotNormal when its path is ambiguous."""
    if "::" in url:
        raise NotNormal("a chained URL (with '::') is not accepted here")
    scheme, sep, rest = url.partition("://")
    if not sep or not _SCHEME.fullmatch(scheme):
        raise NotNormal("not a URL of the form scheme://host/path")
    if _CONTROL.search(url):
        raise NotNormal("must not contain control characters")
    if "#" in url:
        raise NotNormal("must not contain a fragment ('#')")
    host, _, path = rest.partition("/")
    if "\\" in url:
        raise NotNormal("must not contain a backslash")
    if _ENCODED_SEPARATOR.search(path):
        raise NotNormal("must not contain an encoded separator (%2f, %5c)")
    scheme = scheme.lower()
    decoded = path
    if scheme in _DECODED:
        try:
            decoded = unquote(path, errors="strict")
        except UnicodeDecodeError:
            raise NotNormal("its percent-encoding is not UTF-8") from None
        if "%" in decoded or _CONTROL.search(decoded):
            raise NotNormal("must not be percent-encoded twice or encode control characters")
    segments = tuple(s for s in decoded.split("/") if s)
    if any(s in (".", "..") for s in (*segments, *path.split("/"))):
        raise NotNormal("must not contain '..' or '.' segments (also percent-encoded)")
    return UrlKey(scheme, host.lower(), segments)


def is_normal(url: str) -> bool:
    try:
        url_key(url)
    except NotNormal:
        return False
    return True


def follow_no_redirects() -> None:
    """From now on this process's HTTP(S) file reads do not follow redirects, so a file fetched is the URL that was
    checked, not wherever its server points (a redirect's own body is read instead: no log lines). For a server that
    reads URLs for other people (`firstfault api`); fsspec applies its config to file systems made after this."""
    import fsspec.config  # imported on use: only the API server turns redirects off

    for scheme in sorted(_DECODED):
        fsspec.config.conf.setdefault(scheme, {})["allow_redirects"] = False
