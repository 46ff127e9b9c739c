import polars as pl

from firstfault.transforms.placement import place_lines

NODES = ["node-01", "node-02", "node-03"]
RANK_MAP = [(i * 8 + lr, n, lr) for i, n in enumerate(NODES) for lr in range(8)]


SCHEMA = {"srun_label": pl.Int32, "launcher_host": pl.String, "local_rank_prefix": pl.Int32, "rank_prefix": pl.Int32,
          "nccl_host": pl.String, "nccl_dev": pl.Int32, "syslog_host": pl.String}


def frame(**cols):
    base = {name: [None] for name in SCHEMA}
    base.update({k: [v] for k, v in cols.items()})
    return pl.DataFrame(base, schema=SCHEMA)


def place(df, label_mode="rank", file_node=None, file_rank=None):
    return place_lines(df.lazy(), nodes=NODES, rank_map=RANK_MAP, file_node=file_node, file_rank=file_rank, label_mode=label_mode).collect().row(0, named=True)


def test_rank_prefix_gives_rank_and_node():
    row = place(frame(rank_prefix=9))
    assert (row["node"], row["rank"], row["local_rank"]) == ("node-02", 9, 1)


def test_nccl_host_prefix_with_fqdn_and_device():
    row = place(frame(nccl_host="node-03.cluster.example.com", nccl_dev=2))
    assert (row["node"], row["rank"], row["local_rank"]) == ("node-03", 18, 2)


def test_srun_label_as_node_index():
    row = place(frame(srun_label=1), label_mode="node")
    assert (row["node"], row["rank"]) == ("node-02", None)


def test_file_node_wins_and_unknown_hosts_are_kept():
    assert place(frame(syslog_host="other"), file_node="node-01")["node"] == "node-01"
    assert place(frame(nccl_host="stranger"))["node"] == "stranger"


def test_pdsh_host_names_the_node_before_the_nccl_host():
    row = place(frame(launcher_host="NODE-02", nccl_host="719f2593e03a4bbc8d6dff88bf662002000002", nccl_dev=3))
    assert (row["node"], row["rank"], row["local_rank"]) == ("node-02", 11, 3)


def test_pdsh_host_of_no_node_of_the_attempt_places_nothing():
    assert place(frame(launcher_host="other"))["node"] is None


def test_torchrun_local_rank_needs_the_node_from_elsewhere():
    assert (place(frame(local_rank_prefix=3))["node"], place(frame(local_rank_prefix=3))["rank"]) == (None, None)
    row = place(frame(local_rank_prefix=3, nccl_dev=0), file_node="node-03")
    assert (row["node"], row["rank"], row["local_rank"]) == ("node-03", 19, 3)
    row = place(frame(local_rank_prefix=2, launcher_host="node-01"))
    assert (row["node"], row["rank"]) == ("node-01", 2)


def test_a_node_major_map_places_like_its_listed_ranks_without_an_entry_per_rank():
    from firstfault.transforms.placement import NodeMajor

    cases = [frame(rank_prefix=9), frame(rank_prefix=99), frame(rank_prefix=-1), frame(nccl_host="node-03.x", nccl_dev=2),
             frame(nccl_host="node-01", nccl_dev=9), frame(syslog_host="node-02", local_rank_prefix=3), frame(srun_label=2)]
    for df in cases:
        for mode in ("rank", "node"):
            listed = place_lines(df.lazy(), nodes=NODES, rank_map=RANK_MAP, file_node=None, file_rank=None, label_mode=mode)
            major = place_lines(df.lazy(), nodes=NODES, rank_map=NodeMajor(8), file_node=None, file_rank=None, label_mode=mode)
            assert listed.collect().equals(major.collect()), (df.row(0), mode)
