"""`firstfault demo` attributes every embedded attempt as the scenario was built."""
import json

from firstfault.cli import main
from firstfault.synthetic.demo import EXPECTED


def test_demo_verdicts(tmp_path, capsys):
    assert main(["demo", "--dir", str(tmp_path / "demo"), "--json"]) == 0
    verdicts = {v["workload_id"].removeprefix("demo-"): v for v in map(json.loads, capsys.readouterr().out.splitlines())}
    assert len(verdicts) >= 8 and set(verdicts) == set(EXPECTED)
    for name, (verdict, domain, subdomain, culprits) in EXPECTED.items():
        v = verdicts[name]
        assert (v["verdict"], v["domain"], v["subdomain"], v["culprit_nodes"]) == (verdict, domain, subdomain, culprits), name
        assert v["schema_version"] == "1"
        if verdict in ("attributed", "ambiguous"):
            assert any(e["role"] in ("root_cause", "corroboration") for e in v["evidence"]), name
