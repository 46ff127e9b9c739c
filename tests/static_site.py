"""A plain file server on 127.0.0.1 (the standard library's, which decodes `%2e%2e` and `%2f` and resolves `..` as
many servers do) over a folder with `/logs` and `/secret`; every path asked for is recorded. With `stall_reads`,
a read of a file's bytes (a GET with a Range, as fsspec reads) waits until `release()`: a fetch that hangs.
`/logs/moved.log` redirects to `/secret/node-02.log`."""
from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SECRET = "SECRET-LINE-7f3a"
XID = "Nov 29 01:10:02 {node} kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus. {marker}\n"


class StaticSite:
    def __init__(self, root: Path, stall_reads: bool = False):
        (root / "logs").mkdir(parents=True, exist_ok=True)
        (root / "secret").mkdir(exist_ok=True)
        (root / "logs" / "node-01.log").write_text(XID.format(node="node-01", marker="public"))
        (root / "secret" / "node-02.log").write_text(XID.format(node="node-02", marker=SECRET))
        self.asked: list[str] = []
        self.stalled = threading.Event()  # a read is waiting
        self._released = threading.Event()
        if not stall_reads:
            self._released.set()
        site = self

        class Handler(SimpleHTTPRequestHandler):
            def send_head(self):
                site.asked.append(self.path)
                if self.path == "/logs/moved.log":
                    self.send_response(302)
                    self.send_header("Location", "/secret/node-02.log")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return None
                if self.command == "GET" and self.headers.get("Range") and not site._released.is_set():
                    site.stalled.set()
                    site._released.wait(120)
                return super().send_head()

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StaticSite:
        self._thread.start()
        return self

    def release(self) -> None:
        self._released.set()

    def __exit__(self, *exc) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
