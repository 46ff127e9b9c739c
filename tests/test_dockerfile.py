"""The Dockerfile installs the way the tests do: both run scripts/install.sh (the README's set-up), and the image
serves the API on the demo it builds. Building the image is not tested here (no container daemon): the image's
command runs here, with the image's environment, its paths mapped onto this checkout and a demo of the test's."""
import json
import os
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def instructions(path: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", "\n".join(l for l in path.read_text().splitlines() if not l.lstrip().startswith("#")))
    return [(m.group(1).upper(), m.group(2)) for m in re.finditer(r"^\s*(\w+)\s+(.*)$", text, re.M)]


def test_the_image_and_the_test_script_install_through_the_same_script():
    steps = instructions(REPO / "Dockerfile")
    assert steps[0] == ("FROM", "python:3.11-slim-bookworm")
    runs = [args for op, args in steps if op == "RUN"]
    assert any(re.match(r"bash scripts/install\.sh(\s|$)", r) for r in runs), runs
    setup = "\n".join(l for l in (REPO / "scripts" / "setup-and-test.sh").read_text().splitlines() if not l.lstrip().startswith("#"))
    assert re.search(r'^bash "\$REPO/scripts/install\.sh" --test', setup, re.M)
    # the install steps live in one place: neither caller creates a venv or runs pip itself
    for text in ["\n".join(runs), setup]:
        assert "pip install" not in text and "-m venv" not in text
    install = (REPO / "scripts" / "install.sh").read_text()
    assert '-m venv "$VENV"' in install and 'pip" install --quiet -e' in install


def test_the_image_serves_the_api_on_the_demo_it_builds():
    steps = instructions(REPO / "Dockerfile")
    runs = " ".join(args for op, args in steps if op == "RUN")
    assert "firstfault -q demo --dir /var/lib/firstfault/demo" in runs
    cmd = [args for op, args in steps if op == "CMD"][-1]
    assert '"api"' in cmd and '"0.0.0.0"' in cmd and "/var/lib/firstfault/demo/firstfault.duckdb" in cmd
    assert ("EXPOSE", "8080") in steps


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as e:
        return e.code


def test_the_image_command_serves_the_demo_with_the_token_from_docker_run(tmp_path):
    steps = instructions(REPO / "Dockerfile")
    [workdir] = [args for op, args in steps if op == "WORKDIR"]
    demo = "/var/lib/firstfault/demo"
    port = _free_port()
    here = {workdir: str(REPO), demo: str(tmp_path / "demo"), "8080": str(port),
            "/opt/firstfault/.venv/bin": str(Path(sys.executable).parent)}

    def mapped(text: str) -> str:
        for image_path, local in here.items():
            text = text.replace(image_path, local)
        return text

    # the demo as the image builds it (its RUN step), here under tmp_path
    build = re.search(r"\.venv/bin/(firstfault -q demo [^&]*?)\s*>/dev/null", " ".join(a for op, a in steps if op == "RUN"))
    subprocess.run(mapped(build.group(1)).replace("firstfault", f"{sys.executable} -m firstfault.cli", 1).split(), check=True,
                   capture_output=True)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    for op, args in steps:
        if op == "ENV":
            name, value = args.split("=", 1)
            env[name] = mapped(value.replace(f"${name}", env.get(name, "")))
    command = [mapped(a) for a in json.loads([args for op, args in steps if op == "CMD"][-1])]
    assert command[0] == "firstfault" and "--host" in command
    command[command.index("--host") + 1] = "127.0.0.1"  # 0.0.0.0 inside the container; here only this host

    refused = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "FIRSTFAULT_API_TOKEN" in refused.stderr, refused.stderr  # no token in the image
    # as README.md runs it: docker run -e FIRSTFAULT_API_TOKEN=...
    server = subprocess.Popen(command, env={**env, "FIRSTFAULT_API_TOKEN": "image-test-token"}, cwd=REPO,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                health = _get(url + "/healthz")
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, server.stderr.read() if server.poll() is not None else "slow"
                time.sleep(0.2)
        assert health == 200
        assert _get(url + "/v1/attempts/demo/demo-headline/0") == 401
        assert _get(url + "/v1/attempts/demo/demo-headline/0", "image-test-token") == 200
    finally:
        server.kill()
        server.wait()
    readme = (REPO / "README.md").read_text()
    assert "docker run --rm -p 8080:8080 -e FIRSTFAULT_API_TOKEN firstfault" in readme


def test_the_scripts_parse():
    for script in ("install.sh", "setup-and-test.sh"):
        done = subprocess.run(["bash", "-n", str(REPO / "scripts" / script)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
