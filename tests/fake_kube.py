"""A tiny Kubernetes API server for tests: serves captured `kubectl get -o json` documents at the API paths the
Kueue connector reads (single objects, label-selected lists with `limit`/`continue` paging, 404 Status otherwise),
and takes the `PATCH /api/v1/nodes/NAME` of a cordon: recorded in `patches` and merged into the Node's spec."""
from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

# API path -> the kind served there; groups: namespace (if namespaced), then name (single objects only)
ROUTES = [
    (re.compile(r"^/apis/kueue\.x-k8s\.io/v1beta1/namespaces/([^/]+)/workloads/([^/]+)$"), "Workload"),
    (re.compile(r"^/apis/kueue\.x-k8s\.io/v1beta1/namespaces/([^/]+)/workloads$"), "Workload"),
    (re.compile(r"^/apis/kueue\.x-k8s\.io/v1beta1/workloads$"), "Workload"),
    (re.compile(r"^/apis/jobset\.x-k8s\.io/v1alpha2/namespaces/([^/]+)/jobsets/([^/]+)$"), "JobSet"),
    (re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/jobs/([^/]+)$"), "Job"),
    (re.compile(r"^/apis/batch/v1/namespaces/([^/]+)/jobs$"), "Job"),
    (re.compile(r"^/api/v1/namespaces/([^/]+)/pods$"), "Pod"),
    (re.compile(r"^/api/v1/nodes/([^/]+)$"), "Node"),
    (re.compile(r"^/api/v1/nodes$"), "Node"),
]
NODE = re.compile(r"^/api/v1/nodes/([^/]+)$")


def load_objects(folder: Path) -> dict[str, list[dict]]:
    """kind -> objects; of an object captured twice, the highest resourceVersion is what the API would return."""
    latest: dict[tuple, dict] = {}
    for path in sorted(folder.glob("*.json")):
        document = json.loads(path.read_text(encoding="utf-8"))
        items = document["items"] if document["kind"].endswith("List") else [document]
        for item in items:
            kind = item.get("kind") or document["kind"].removesuffix("List")
            meta = item["metadata"]
            key = (kind, meta.get("namespace", ""), meta["name"])
            if key not in latest or int(meta.get("resourceVersion") or 0) >= int(latest[key]["metadata"].get("resourceVersion") or 0):
                latest[key] = {**item, "kind": kind}
    by_kind: dict[str, list[dict]] = {}
    for (kind, _, _), obj in sorted(latest.items()):
        by_kind.setdefault(kind, []).append(obj)
    return by_kind


class FakeKube:
    def __init__(self, folder: Path, token: str = ""):
        self.objects = load_objects(folder)
        self.token = token
        self.requests: list[str] = []
        self.patches: list[tuple[str, str, dict]] = []  # (path, Content-Type, body)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                fake.requests.append(self.path)
                if fake.token and self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self._send(401, {"kind": "Status", "code": 401, "reason": "Unauthorized"})
                status, body = fake.answer(self.path)
                self._send(status, body)

            def do_PATCH(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                fake.patches.append((self.path, self.headers.get("Content-Type", ""), body))
                m = NODE.match(urlsplit(self.path).path)
                found = [o for o in fake.objects.get("Node", []) if m and o["metadata"]["name"] == m.group(1)]
                if not found:
                    return self._send(*_not_found("Node", m.group(1) if m else self.path))
                found[0].setdefault("spec", {}).update(body.get("spec", {}))
                self._send(200, found[0])

            def _send(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeKube":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, raw_path: str) -> tuple[int, dict]:
        parts = urlsplit(raw_path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        for pattern, kind in ROUTES:
            m = pattern.match(parts.path)
            if not m:
                continue
            groups = m.groups()
            candidates = self.objects.get(kind, [])
            if kind == "Node" and groups:
                found = [o for o in candidates if o["metadata"]["name"] == groups[0]]
                return (200, found[0]) if found else _not_found(kind, groups[0])
            namespace = groups[0] if groups else None
            candidates = [o for o in candidates if namespace is None or o["metadata"].get("namespace") == namespace]
            if len(groups) == 2:
                found = [o for o in candidates if o["metadata"]["name"] == groups[1]]
                return (200, found[0]) if found else _not_found(kind, groups[1])
            return 200, _page(kind, _selected(candidates, query.get("labelSelector", "")), query)
        return 404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": f"no route {parts.path}"}


def _selected(objects: list[dict], selector: str) -> list[dict]:
    wanted = dict(term.split("=", 1) for term in selector.split(",") if term)
    return [o for o in objects if all((o["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())]


def _page(kind: str, objects: list[dict], query: dict) -> dict:
    """A typed list as the API returns it (items without kind), `limit` items per page."""
    offset = int(query.get("continue") or 0)
    limit = int(query.get("limit") or len(objects) or 1)
    items = [{k: v for k, v in o.items() if k != "kind"} for o in objects[offset:offset + limit]]
    more = offset + limit < len(objects)
    return {"kind": f"{kind}List", "apiVersion": "v1", "metadata": {"continue": str(offset + limit)} if more else {},
            "items": items}


def _not_found(kind: str, name: str) -> tuple[int, dict]:
    return 404, {"kind": "Status", "code": 404, "reason": "NotFound", "message": f'{kind.lower()}s "{name}" not found'}
