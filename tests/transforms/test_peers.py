import json

import polars as pl

from firstfault.schema import EVENT_SCHEMA
from firstfault.transforms.peers import resolve_peers


def events(*rows):
    full = [{**{k: None for k in EVENT_SCHEMA}, **r} for r in rows]
    return pl.DataFrame(full, schema=EVENT_SCHEMA).lazy()


def test_peer_addresses_resolve_through_nccl_info_lines_and_host_names():
    lf = events(
        {"kind": "nccl_net_using", "node": "node-02", "fields": json.dumps({"oob_ip": "10.0.0.2"})},
        {"kind": "nccl_bootstrap", "node": "node-03", "fields": json.dumps({"ip": "10.0.0.3"})},
        {"kind": "nccl_net_ib", "node": "node-01", "peer_addr": "::ffff:10.0.0.2"},
        {"kind": "nccl_net_ib", "node": "node-01", "peer_addr": "10.0.0.3"},
        {"kind": "nccl_socket", "node": "node-01", "peer_addr": "node-03.cluster.local"},
        {"kind": "nccl_socket", "node": "node-01", "peer_addr": "fe80::1%ib0"},
        {"kind": "nccl_socket", "node": "node-01", "peer_addr": "192.168.9.9"},
    )
    out = resolve_peers(lf.collect(), ["node-01", "node-02", "node-03"], [("fe80::1", "node-02")])
    assert out["peer_node"].to_list() == [None, None, "node-02", "node-03", "node-03", "node-02", None]
