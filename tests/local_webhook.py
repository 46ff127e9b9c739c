"""A webhook receiver on 127.0.0.1 for the worker's tests: records each POSTed JSON body and when it came. With
`hang`, each POST is held unanswered until `release()` (a webhook that hangs)."""
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HANG_LIMIT_S = 120  # a held request is answered after this at the latest, so no test leaves a thread behind


class Receiver:
    def __init__(self, port: int = 0, *, hang: bool = False):
        self.posts: list[tuple[float, dict]] = []
        self.arrived = threading.Event()  # a POST came (a held one included)
        self._released = threading.Event()
        if not hang:
            self._released.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.arrived.set()
                receiver._released.wait(HANG_LIMIT_S)
                receiver.posts.append((time.time(), json.loads(body)))
                self.send_response(204)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def release(self):
        self._released.set()

    def close(self):
        self.release()
        self.server.shutdown()
        self.server.server_close()
