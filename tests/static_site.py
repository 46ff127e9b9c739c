"""A plain file server on 127.0.0.1 (the standard library's, which decodes `%2e%2e` and `%2f` and resolves `..` as
many servers do) over a folder with `/logs` and `/secret`; every path asked for is recorded."""
from __future__ import annotations

import functools
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SECRET = "SECRET-LINE-7f3a"
XID = "Nov 29 01:10:02 {node} kernel: NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus. {marker}\n"


class StaticSite:
    def __init__(self, root: Path):
        (root / "logs").mkdir(parents=True, exist_ok=True)
        (root / "secret").mkdir(exist_ok=True)
        (root / "logs" / "node-01.log").write_text(XID.format(node="node-01", marker="public"))
        (root / "secret" / "node-02.log").write_text(XID.format(node="node-02", marker=SECRET))
        self.asked: list[str] = []
        site = self

        class Handler(SimpleHTTPRequestHandler):
            def send_head(self):
                site.asked.append(self.path)
                return super().send_head()

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(root)))
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> StaticSite:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()
