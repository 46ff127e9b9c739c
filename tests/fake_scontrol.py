"""A stateful `scontrol`/`sinfo` pair for [actions] tests: `update ... State=DRAIN` records the node and its reason
(`--oneliner show node` reports them), after sleeping `drain_sleep_s`; with `kill_caller` it then SIGKILLs the
process that called it (a crash between the call and the row). Every argv is one JSON line of `calls`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

SCRIPT = """#!{python}
import json, os, signal, sys, time
options = json.load(open({options!r}))
argv = sys.argv[1:]
open(options["calls"], "a").write(json.dumps(argv) + "\\n")
state = json.load(open(options["state"])) if os.path.exists(options["state"]) else {{}}
if os.path.basename(sys.argv[0]) == "sinfo":
    print("\\n".join(options["nodes"]))
elif argv[:2] == ["update", argv[1]] and "State=DRAIN" in argv:
    time.sleep(options["drain_sleep_s"])
    state[argv[1].split("=", 1)[1]] = argv[3].split("=", 1)[1]
    json.dump(state, open(options["state"], "w"))
    if options["kill_caller"]:
        os.kill(os.getppid(), signal.SIGKILL)
elif argv[:3] == ["--oneliner", "show", "node"]:
    node = argv[3]
    print(f"NodeName={{node}} State=IDLE+DRAIN Reason={{state[node]}} [root@now]" if node in state else f"NodeName={{node}} State=IDLE")
"""


def fake_scontrol(folder: Path, nodes: list[str], *, drain_sleep_s: float = 0.0, kill_caller: bool = False) -> tuple[Path, Path]:
    """(the scontrol path, the calls file) of a fresh pair in `folder`."""
    options = folder / "scontrol.json"
    calls = folder / "calls.jsonl"
    options.write_text(json.dumps({"calls": str(calls), "state": str(folder / "drained.json"), "nodes": nodes,
                                   "drain_sleep_s": drain_sleep_s, "kill_caller": kill_caller}))
    for name in ("scontrol", "sinfo"):
        (folder / name).write_text(SCRIPT.format(python=sys.executable, options=str(options)))
        (folder / name).chmod(0o755)
    return folder / "scontrol", calls


def drains(calls: Path) -> list[list[str]]:
    return [argv for argv in map(json.loads, calls.read_text().splitlines()) if "State=DRAIN" in argv]
