"""The README's tour as a newcomer runs it: the demo command of its Set-up (without the pip step), then every command
of the tour's `sh` blocks in order, read from the README itself, in a fresh folder. The `api … &` step is started in
the background and stopped at the tour's `kill %1`; the port is a free one instead of 8080 (other services may hold
8080 on a shared machine)."""
import fnmatch
import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def section(text: str, title: str) -> str:
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def sh_commands(text: str) -> list[list[str]]:
    """The commands of every ```sh block, continuation lines joined, comments dropped, as argument lists."""
    commands = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            argv = shlex.split(line, comments=True)
            if argv:
                commands.append(argv)
    return commands


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def firstfault() -> list[str]:
    installed = Path(sys.executable).with_name("firstfault")
    return [str(installed)] if installed.exists() else [sys.executable, "-m", "firstfault.cli"]


def ignored(name: str) -> bool:
    """Whether the repository's .gitignore ignores a top-level file or folder (`name/`) of this name."""
    patterns = [p.strip() for p in (ROOT / ".gitignore").read_text().splitlines() if p.strip() and not p.startswith("#")]
    return any(fnmatch.fnmatch(name, p.lstrip("/")) or fnmatch.fnmatch(name.rstrip("/"), p.lstrip("/")) for p in patterns)


def wait_for(url: str, server: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert server.poll() is None, server.stderr.read()
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"the API did not answer {url}")


def test_the_readme_tour_runs_as_written(tmp_path):
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = sh_commands(section(text, "Set-up"))[0]
    demo = setup[next(i for i, a in enumerate(setup) if Path(a).name == "firstfault"):]  # `.venv/bin/firstfault demo …`
    assert Path(demo[0]).name == "firstfault" and demo[1] == "demo" and "pip" not in demo, setup
    assert "[test]" not in " ".join(setup), "the demo needs the package only; the test command installs the rest"
    tour = sh_commands(section(text, "A short tour"))
    assert [argv[0] for argv in tour].count("firstfault") >= 8, tour
    port = str(free_port())
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    def run(argv: list[str]) -> subprocess.CompletedProcess:
        argv = [*firstfault(), *argv[1:]] if Path(argv[0]).name == "firstfault" else argv
        done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, f"{shlex.join(argv)} exited {done.returncode}: {done.stderr[-2000:]}"
        return done

    run(demo)
    server = None
    outputs = {}
    try:
        for argv in tour:
            argv = [a.replace("8080", port) for a in argv]
            if argv[-1] == "&":  # the API: started here, stopped at `kill %1`
                server = subprocess.Popen([*firstfault(), *argv[1:-1]], cwd=tmp_path, env=env,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                wait_for(f"http://127.0.0.1:{port}/healthz", server)
            elif argv == ["kill", "%1"]:
                server.terminate()
                assert server.wait(timeout=60) in (0, 143, -15), server.stderr.read()
                server = None
            else:
                outputs[shlex.join(argv)] = run(argv).stdout
                if argv[0] == "curl":  # the same request answers 200
                    url = next(a for a in argv if "/v1/" in a)
                    with urllib.request.urlopen(url if "://" in url else f"http://{url}", timeout=30) as answer:
                        assert answer.status == 200
    finally:
        if server is not None:
            server.kill()
            server.wait()
    offenders = [out for command, out in outputs.items() if "FROM node_offenders" in command]
    assert len(offenders) == 1 and len(offenders[0].splitlines()) >= 3, offenders  # header, rule, at least one row
    answers = [out for command, out in outputs.items() if command.startswith("curl ")]
    assert len(answers) == 1 and json.loads(answers[0])["attempt_id"] == "demo/demo-headline/0"
    left = sorted(p.name + ("/" if p.is_dir() else "") for p in tmp_path.iterdir())
    assert "firstfault-demo/" in left and not list(tmp_path.rglob("*.nightly.lock"))
    assert [name for name in left if not ignored(name)] == [], f"the tour leaves files git would show: {left}"
