"""strip_decorations on real sample lines of every decoration."""
import polars as pl
import pytest

from firstfault.transforms.decorations import STAMP_COLUMNS, strip_decorations

PUBLIC = ("msg", "srun_label", "launcher_host", "local_rank_prefix", "rank_prefix", "nccl_host", "nccl_pid", "nccl_dev", "syslog_host")


def strip(*lines: str | None) -> pl.DataFrame:
    return strip_decorations(pl.LazyFrame({"raw": list(lines)}, schema={"raw": pl.String})).collect()


def row(line: str) -> dict:
    return strip(line).row(0, named=True)


# (raw line, message left (None: the whole line), fields expected; public fields not listed must be null, and so
# must the stamp parts of every form not listed)
CASES = [
    # syslog, with and without host, with the embedded dmesg stamp
    (
        "May 15 23:09:30 host kernel: [  518.053407] oom_reaper: reaped process 15784 (python3), now anon-rss:0kB",
        "oom_reaper: reaped process 15784 (python3), now anon-rss:0kB",
        {"syslog_host": "host", "_sy_mon": "May", "_sy_day": "15", "_sy_time": "23:09:30", "_mono": "518.053407"},
    ),
    (
        "May 18 19:02:39 kernel: NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:2b:00): 79, GPU has fallen off the bus.",
        {"_sy_mon": "May", "_sy_day": "18", "_sy_time": "19:02:39"},
    ),
    (
        "Nov 22 18:29:55 hostname kernel: [  966.503025] NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask 00000120",
        "NVRM: Xid (0000:01:00): 31, Ch 0000000b, engmask 00000120",
        {"syslog_host": "hostname", "_sy_mon": "Nov", "_sy_day": "22", "_mono": "966.503025"},
    ),
    (
        "Sep 18 20:58:08 yuri-notebook kernel: [ 1936.510073] NVRM: GPU at 0000:01:00.0 has fallen off the bus.",
        "NVRM: GPU at 0000:01:00.0 has fallen off the bus.",
        {"syslog_host": "yuri-notebook", "_sy_mon": "Sep", "_mono": "1936.510073"},
    ),
    (  # single-digit day, space padded; a non-kernel tag keeps its place in the message
        "Dec  3 07:00:01 gpu-node-7.cluster slurmd[1234]: error: Node configuration differs",
        "slurmd[1234]: error: Node configuration differs",
        {"syslog_host": "gpu-node-7.cluster", "_sy_mon": "Dec", "_sy_day": "3", "_sy_time": "07:00:01"},
    ),
    (  # journalctl short-precise
        "Jan 21 04:41:44.285060 node-3 kernel: NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>'",
        "NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>'",
        {"syslog_host": "node-3", "_sy_frac": "285060"},
    ),
    # kernel tag without a stamp
    (
        "ny2g1r12hh2 kernel: mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient power",
        "mlx5_core 0000:5c:00.0: mlx5_pcie_event:299:(pid 268269): Detected insufficient power",
        {"syslog_host": "ny2g1r12hh2"},
    ),
    (
        "kernel: NVRM: Xid (PCI:0000:c1:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 1",
        "NVRM: Xid (PCI:0000:c1:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 1",
        {},
    ),
    # journal short-iso
    (
        "2025-01-21T04:41:44+0000 host kernel: NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>'",
        "NVRM: Xid (PCI:0000:38:00): 13, pid='<unknown>'",
        {"syslog_host": "host", "_iso_date": "2025-01-21", "_iso_time": "04:41:44", "_iso_off": "+0000"},
    ),
    # dmesg --decode --time-format=iso
    (
        "kern  :warn  : 2025-01-21T04:41:44,285060+00:00 pt_main_thread[2536443]: segfault at 7f797fe00000 ip "
        "00007f7c7ac69996 sp 00007f7c12fd7c30 error 4 in libnccl.so.2[7f7c7ac00000+d3d3000]",
        "pt_main_thread[2536443]: segfault at 7f797fe00000 ip 00007f7c7ac69996 sp 00007f7c12fd7c30 error 4 in "
        "libnccl.so.2[7f7c7ac00000+d3d3000]",
        {"_iso_date": "2025-01-21", "_iso_time": "04:41:44", "_iso_frac": "285060", "_iso_off": "+00:00"},
    ),
    # Talos remote syslog
    (
        "192.168.11.119: kern: warning: [2026-04-22T21:27:51.288830314Z]: NVRM: Xid (PCI:0000:01:00): 79",
        "NVRM: Xid (PCI:0000:01:00): 79",
        {"syslog_host": "192.168.11.119", "_iso_frac": "288830314", "_iso_off": "Z"},
    ),
    # `dmesg -r`: the raw level before the since-boot stamp (leptonai/gpud#997)
    (
        "<0>[2315424.098863] Kernel panic - not syncing: hung_task: blocked tasks",
        "Kernel panic - not syncing: hung_task: blocked tasks",
        {"_mono": "2315424.098863"},
    ),
    # Megatron's progress line keeps its leading space before the stamp, also after a padded srun label
    # (the line of the Megatron-LM pretraining log quoted in epfLLM/Megatron-LLM#11, with the stamp Megatron-LM's
    # training_log prints before it)
    (
        "23:  [2024-08-01 09:44:55] iteration      122/  250000 | consumed samples:       124928 | lm loss: 2.504220E+00 |",
        "iteration      122/  250000 | consumed samples:       124928 | lm loss: 2.504220E+00 |",
        {"srun_label": 23, "_py_date": "2024-08-01", "_py_time": "09:44:55"},
    ),
    # raw /dev/kmsg
    ("6,3964,206764307,-;nvidia-nvswitch2: open (major=510)", "nvidia-nvswitch2: open (major=510)", {"_kmsg_us": "206764307"}),
    # dmesg monotonic, caller tag, delta, -T
    (
        "[6781741.548768] NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        "NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
        {"_mono": "6781741.548768"},
    ),
    (
        "[111111111.111] nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV",
        "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV",
        {"_mono": "111111111.111"},
    ),
    (
        "[ 130.456250] [ T1946] NVRM: Xid (PCI:0000:2b:00): 31, pid=1942, name=llama-bench, channel 0x00000002",
        "NVRM: Xid (PCI:0000:2b:00): 31, pid=1942, name=llama-bench, channel 0x00000002",
        {"_mono": "130.456250"},
    ),
    ("[    5.123456] [    C3] smpboot: CPU 3 is now offline", "smpboot: CPU 3 is now offline", {"_mono": "5.123456"}),
    (
        "[  +0.000844] nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)",
        "nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)",
        {"_delta": "+", "_mono": "0.000844"},
    ),
    (
        "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s",
        "NVRM: Xid (PCI:0000:9b:00): 119, pid=2024380, name=nvidia-smi, Timeout after 6s",
        {"_dt_mon": "Feb", "_dt_day": "23", "_dt_time": "16:24:18", "_dt_year": "2025"},
    ),
    # application stamps
    (
        "[2023-04-14 13:11:27,879] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 13266",
        "[INFO] [launch.py:428:sigkill_handler] Killing subprocess 13266",
        {"_py_date": "2023-04-14", "_py_time": "13:11:27", "_py_frac": "879"},
    ),
    (
        "[2026-03-13 22:26:02] host-01.example.com:XXXXXX [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp failed "
        "with 110 Connection timed out, on dev mlx_x:1, curr state INIT, next state RTR",
        "host-01.example.com:XXXXXX [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp failed with 110 Connection "
        "timed out, on dev mlx_x:1, curr state INIT, next state RTR",
        {"nccl_host": "host-01.example.com", "nccl_pid": "XXXXXX", "nccl_dev": 5, "_py_time": "22:26:02"},
    ),
    (
        "[Jul 23 2024 07:53:55] [ERROR] [tid 841] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci bus id",
        "[ERROR] [tid 841] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch pci bus id",
        {"_fm_mon": "Jul", "_fm_day": "23", "_fm_year": "2024", "_fm_time": "07:53:55"},
    ),
    # PyTorch rank prefix and glog
    (
        "[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000)",
        "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, "
        "NumelIn=466119168, NumelOut=466119168, Timeout(ms)=600000)",
        {"rank_prefix": 0, "_gl_md": "321", "_gl_time": "02:07:08", "_gl_frac": "408271257"},
    ),
    (
        "[rank1]:[E626 06:24:44.906457629 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 1] Exception",
        "[PG ID 0 PG GUID 0(default_pg) Rank 1] Exception",
        {"rank_prefix": 1, "_gl_md": "626"},
    ),
    (
        "3: [rank3]:[E321 02:07:08.4 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective operation timeout",
        "[Rank 3] Watchdog caught collective operation timeout",
        {"srun_label": 3, "rank_prefix": 3, "_gl_md": "321", "_gl_frac": "4"},
    ),
    (
        "E0318 13:21:42.765000 22421439703936 torch/distributed/elastic/multiprocessing/api.py:833] failed "
        "(exitcode: -6) local_rank: 0 (pid: 2310384) of binary: /home/sr5/user/sana_env/bin/python",
        "failed (exitcode: -6) local_rank: 0 (pid: 2310384) of binary: /home/sr5/user/sana_env/bin/python",
        {"_gl_md": "0318", "_gl_time": "13:21:42", "_gl_frac": "765000"},
    ),
    (
        "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508)",
        "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=469508)",
        {},
    ),
    ("[rank3]: Last error:", "Last error:", {"rank_prefix": 3}),
    ("[rank3]: NET/OFI Request completed with error. RC: 113.", "NET/OFI Request completed with error. RC: 113.", {"rank_prefix": 3}),
    # srun --label, padded to the widest task id
    ("0: Traceback (most recent call last):", "Traceback (most recent call last):", {"srun_label": 0}),
    (" 7: RuntimeError: CUDA error: an illegal memory access was encountered",
     "RuntimeError: CUDA error: an illegal memory access was encountered", {"srun_label": 7}),
    ("12: [rank12]: Last error:", "Last error:", {"srun_label": 12, "rank_prefix": 12}),
    ("4:", "", {"srun_label": 4}),
    # Open MPI --tag-output (horovod#3752, horovod#3929), Horovod's Gloo launcher (pytorch/ignite#3466): the rank;
    # what follows the ':' is kept whole (a traceback's indentation)
    ("[1,1]<stdout>:slave1:126624:126758 [1] misc/argcheck.cc:39 NCCL WARN Broadcast : invalid root 0 (root should be "
     "in the 0..-1 range)",
     "slave1:126624:126758 [1] misc/argcheck.cc:39 NCCL WARN Broadcast : invalid root 0 (root should be in the 0..-1 "
     "range)",
     {"rank_prefix": 1, "nccl_host": "slave1", "nccl_pid": "126624", "nccl_dev": 1}),
    ('[1,1]<stderr>:  File "/usr/local/lib/python3.8/dist-packages/horovod/torch/mpi_ops.py", line 1285, in synchronize',
     '  File "/usr/local/lib/python3.8/dist-packages/horovod/torch/mpi_ops.py", line 1285, in synchronize',
     {"rank_prefix": 1}),
    ("[1]<stderr>:RuntimeError: ncclCommInitRank failed: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
     "RuntimeError: ncclCommInitRank failed: unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
     {"rank_prefix": 1}),
    # torchrun --tee (pytorch/pytorch#75087): the local rank
    ("[default3]:Fatal Python error: Segmentation fault", "Fatal Python error: Segmentation fault",
     {"local_rank_prefix": 3}),
    ("[default3]:python: src/psm2_nccl_net.c:756: mq_progress_loop: Assertion `r->used' failed.",
     "python: src/psm2_nccl_net.c:756: mq_progress_loop: Assertion `r->used' failed.", {"local_rank_prefix": 3}),
    # NCCL prefix: parsed, not cut
    (
        "kp-ddp-worker-0:3468:3905 [4] ib_plugin.c:1615 NCCL WARN NET/IB : Got completion from peer "
        "10.216.210.236<54862> with status=12 opcode=0 len=0 vendor err 129 (Recv)",
        None,
        {"nccl_host": "kp-ddp-worker-0", "nccl_pid": "3468", "nccl_dev": 4},
    ),
    ("node-0:3986589:3987377 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]", None,
     {"nccl_host": "node-0", "nccl_pid": "3986589", "nccl_dev": 0}),
    ("<cluster_name>:920:1145 [1] NCCL INFO Channel 04/0 : 9[1] -> 10[2] via P2P/IPC/read", None,
     {"nccl_host": "<cluster_name>", "nccl_pid": "920", "nccl_dev": 1}),
    ("0: a100-st-p4d24xlarge-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv failed : Broken pipe",
     "a100-st-p4d24xlarge-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv failed : Broken pipe",
     {"srun_label": 0, "nccl_host": "a100-st-p4d24xlarge-22", "nccl_pid": "183006", "nccl_dev": 1}),
    # clocks inside the message: read, not cut
    ("slurmstepd: error: *** JOB 867816 ON c0700a-s1 CANCELLED AT 2021-05-11T12:06:17 DUE TO TIME LIMIT ***", None,
     {"_sl_date": "2021-05-11", "_sl_time": "12:06:17"}),
    ("slurmstepd: error: *** STEP 32233190.0 ON nid01934 CANCELLED AT 2020-07-03T02:59:56 DUE TO TIME LIMIT ***", None,
     {"_sl_date": "2020-07-03", "_sl_time": "02:59:56"}),
    ("error: *** STEP 52222788.0 ON nid002888 CANCELLED AT 2026-04-29T23:36:37 DUE TO TASK FAILURE ***", None,
     {"_sl_date": "2026-04-29", "_sl_time": "23:36:37"}),
    ("slurmstepd: error: *** JOB 123 CANCELLED AT 2021-05-11T12:06:17 ***", None, {"_sl_date": "2021-05-11"}),
    ("  time      : 2023-06-14_22:36:10", None, {"_tr_date": "2023-06-14", "_tr_time": "22:36:10"}),
    # nothing to strip
    ("NVRM: Xid (PCI:0000:01:00): 13, Graphics SM Warp Exception on (GPC 1, TPC 0): Out Of Range Address", None, {}),
    ("NCCL version 2.18.1+cuda12.1", None, {}),
    ("misc/ibvwrap.cc:187 NCCL WARN Call to ibv_modify_qp failed with error Network is unreachable", None, {}),
    ("srun: error: nid01934: tasks 2,4-5,7: Terminated", None, {}),
    ("12:30 is not an srun label", None, {}),
    ("Xid errors on instance: ip-26-0-146-100, Error: May 19 07:08:57 ip-26-0-146-100 kernel: [680111.646286] NVRM: Xid",
     None, {}),
    ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ", None, {}),
    ("[1]:", None, {}),
    ("[1,2] <stdout>: not a tag", None, {}),
    ("[trainer0]:a role other than torchrun's default", None, {}),
    ("x1000c0s6b0n0: seed=42,", None, {}),  # a pdsh host only when it names a node (test_pdsh_host_*)
    ("    Remapped Rows", None, {}),
]


@pytest.mark.parametrize("raw, msg, fields", CASES, ids=[c[0][:60] for c in CASES])
def test_sample_lines(raw, msg, fields):
    got = row(raw)
    assert got["msg"] == (raw if msg is None else msg)
    forms = {name.split("_")[1] for name in fields if name.startswith("_")}
    for name in (*PUBLIC[1:], *STAMP_COLUMNS):
        if name in fields or not name.startswith("_") or name.split("_")[1] not in forms:
            assert got[name] == fields.get(name), name


def test_output_schema():
    frame = strip("0: x")
    assert frame.schema["srun_label"] == pl.Int32
    assert frame.schema["rank_prefix"] == pl.Int32
    assert frame.schema["nccl_dev"] == pl.Int32
    for name in ("msg", "nccl_host", "nccl_pid", "syslog_host", *STAMP_COLUMNS):
        assert frame.schema[name] == pl.String, name
    assert set(frame.columns) == {"raw", *PUBLIC, *STAMP_COLUMNS}


def test_pdsh_host_is_cut_only_when_it_names_a_node():
    """DeepSpeed's pdsh launcher (deepspeedai/DeepSpeed#3969): "host: " before each line; a line starting with another
    word and ": " keeps it."""
    lines = ["x1000c0s6b0n0: seed=42,", "X1000C0S6B0N0: [rank3]: x", "error: *** JOB 1 ON x CANCELLED AT 2026-11-29T01:00:00",
             "Traceback: x", "3: y", "x1000c0s6b0n0:12:13 [0] NCCL INFO z"]
    frame = strip_decorations(pl.LazyFrame({"raw": lines}), ["x1000c0s6b0n0", "node-02"]).collect()
    assert frame.get_column("launcher_host").to_list() == ["x1000c0s6b0n0", "X1000C0S6B0N0", None, None, None, None]
    assert frame.get_column("msg").to_list() == ["seed=42,", "x", *lines[2:4], "y", lines[5]]
    assert frame.get_column("rank_prefix").to_list() == [None, 3, None, None, None, None]
    assert frame.get_column("srun_label").to_list() == [None, None, None, None, 3, None]
    assert frame.get_column("_sl_date").to_list()[2] == "2026-11-29"
    assert frame.get_column("nccl_host").to_list()[5] == "x1000c0s6b0n0"


def test_pdsh_host_keeps_the_column_order():
    with_hosts = strip_decorations(pl.LazyFrame(schema={"raw": pl.String}), ["node-01"]).collect_schema()
    assert with_hosts == strip_decorations(pl.LazyFrame(schema={"raw": pl.String})).collect_schema()


def test_other_columns_pass_through():
    frame = strip_decorations(pl.LazyFrame({"raw": ["0: x"], "line": [7]})).collect()
    assert frame.get_column("line").to_list() == [7]


def test_mixed_batch_keeps_line_order_and_fields_per_line():
    frame = strip(
        "May 18 19:02:39 node-1 kernel: [  100.000000] NVRM: one",
        "node-1:1:2 [3] NCCL INFO two",
        "[rank5]:[W1129 01:02:03.456789 foo.cpp:1] three",
        "four",
    )
    assert frame.get_column("msg").to_list() == ["NVRM: one", "node-1:1:2 [3] NCCL INFO two", "three", "four"]
    assert frame.get_column("syslog_host").to_list() == ["node-1", None, None, None]
    assert frame.get_column("nccl_dev").to_list() == [None, 3, None, None]
    assert frame.get_column("rank_prefix").to_list() == [None, None, 5, None]
    assert frame.get_column("_mono").to_list() == ["100.000000", None, None, None]


@pytest.mark.parametrize(
    "raw", ["\x00\x01\ufffd", "", " ", "[", "[rank", "May", "0", "é" * 10, "x" * 70_000, "[ " * 35_000, "9" * 70_000]
)
def test_garbage_does_not_raise(raw):
    got = row(raw)
    assert got["msg"] == raw


def test_null_raw_gives_null_message():
    assert row(None)["msg"] is None


def test_non_ascii_after_a_decoration_is_kept_whole():
    assert row("[rank1]: é ü 漢字")["msg"] == "é ü 漢字"
    assert row("May 18 19:02:39 h kernel: ∆ NVRM")["msg"] == "∆ NVRM"
