"""firstfault.toml: relative paths resolve against the config file's folder; plug-in tables pass through as given."""
import pytest

from firstfault.config import load_config
from firstfault.errors import BadInput


def test_relative_paths_resolve_against_the_config_folder(tmp_path):
    conf = tmp_path / "etc" / "firstfault.toml"
    conf.parent.mkdir()
    conf.write_text('[catalog]\npaths = ["specs/*.yaml", "s3://bucket/specs"]\n'
                    '[kueue]\ndocuments = "captures"\n[fleet]\ntopology = "/abs/topology.yaml"\n'
                    '[kubernetes]\nurl = "https://k8s"\ninsecure_skip_verify = true\n'
                    '[plugins.mytsdb]\nurl = "https://tsdb"\nretries = 2\n')
    config = load_config(str(conf))
    assert config.catalog.paths == (str(conf.parent / "specs/*.yaml"), "s3://bucket/specs")
    assert config.kueue.documents == str(conf.parent / "captures")
    assert config.fleet.topology == "/abs/topology.yaml"
    assert config.kubernetes.insecure_skip_verify is True
    assert config.plugins == {"mytsdb": {"url": "https://tsdb", "retries": 2}}


@pytest.mark.parametrize("text, field", [
    ('[plugins]\nmytsdb = 3\n', "plugins"),
    ('[kubernetes]\ninsecure_skip_verify = "yes"\n', "kubernetes.insecure_skip_verify"),
    ('[loki]\nstreams = ["x"]\n', "loki.streams"),
])
def test_malformed_sections_name_the_field(tmp_path, text, field):
    conf = tmp_path / "firstfault.toml"
    conf.write_text(text)
    with pytest.raises(BadInput) as e:
        load_config(str(conf))
    assert field in str(e.value)
