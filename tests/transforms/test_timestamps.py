"""parse_timestamps (UTC conversion, year inference, ts_quality), anchor_file_clock (boot anchoring, inheritance) and
anchor_files (the same for many files at once)."""
from datetime import datetime, timedelta, timezone

import polars as pl
import pytest

from firstfault.transforms.decorations import strip_decorations
from firstfault.transforms.timestamps import FileClock, anchor_file_clock, anchor_files, parse_timestamps

MAY_2025 = (datetime(2025, 5, 18, 18), datetime(2025, 5, 18, 20))


def parse(*lines: str, tz: str = "UTC", window: tuple[datetime, datetime] = MAY_2025) -> pl.DataFrame:
    frame = pl.LazyFrame({"raw": list(lines), "line": range(1, len(lines) + 1)}, schema={"raw": pl.String, "line": pl.Int64})
    return parse_timestamps(strip_decorations(frame), tz=tz, window_start=window[0], window_end=window[1]).collect()


def stamp(line: str, **kwargs) -> tuple[datetime | None, str]:
    got = parse(line, **kwargs).row(0, named=True)
    return got["ts"], got["ts_quality"]


# --- zoned stamps are exact whatever the attempt's zone ------------------------------------------------------------


@pytest.mark.parametrize(
    "line, expected",
    [
        ("kern  :warn  : 2025-01-21T04:41:44,285060+00:00 pt_main_thread[2536443]: segfault at 7f797fe00000",
         datetime(2025, 1, 21, 4, 41, 44, 285060)),
        ("2025-01-21T04:41:44+0000 host kernel: NVRM: Xid", datetime(2025, 1, 21, 4, 41, 44)),
        ("192.168.11.119: kern: warning: [2026-04-22T21:27:51.288830314Z]: NVRM: Xid",
         datetime(2026, 4, 22, 21, 27, 51, 288830)),
        ("2025-01-21T04:41:44.5-05:00 host kernel: x", datetime(2025, 1, 21, 9, 41, 44, 500000)),
        ("2025-01-21T04:41:44+05:30 host kernel: x", datetime(2025, 1, 20, 23, 11, 44)),
    ],
)
@pytest.mark.parametrize("tz", ["UTC", "America/New_York"])
def test_zoned_stamps_are_exact(line, expected, tz):
    assert stamp(line, tz=tz) == (expected, "exact")


# --- zone-less stamps are local time of the attempt -----------------------------------------------------------------


@pytest.mark.parametrize(
    "line, wall, new_york_offset_h",
    [
        ("[Sun Feb 23 16:24:18 2025] NVRM: GPU at PCI:0000:9b:00", datetime(2025, 2, 23, 16, 24, 18), 5),  # EST
        ("[Sun Feb  2 16:24:18 2025] NVRM: GPU at PCI:0000:9b:00", datetime(2025, 2, 2, 16, 24, 18), 5),
        ("[2023-04-14 13:11:27,879] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 13266",
         datetime(2023, 4, 14, 13, 11, 27, 879000), 4),  # EDT
        ("[2026-03-13 22:26:02] host-01.example.com:XXXXXX [5] ibvwrap.c:262 NCCL WARN Call to ibv_modify_qp failed",
         datetime(2026, 3, 13, 22, 26, 2), 4),
        ("[Jul 23 2024 07:53:55] [ERROR] [tid 841] detected NVSwitch fatal error 20034 on fid 0",
         datetime(2024, 7, 23, 7, 53, 55), 4),
        ("slurmstepd: error: *** JOB 867816 ON c0700a-s1 CANCELLED AT 2021-05-11T12:06:17 DUE TO TIME LIMIT ***",
         datetime(2021, 5, 11, 12, 6, 17), 4),
        ("  time      : 2023-06-14_22:36:10", datetime(2023, 6, 14, 22, 36, 10), 4),
    ],
)
def test_local_stamps_convert_from_the_attempt_zone(line, wall, new_york_offset_h):
    assert stamp(line, tz="UTC") == (wall, "local")
    assert stamp(line, tz="America/New_York") == (wall + timedelta(hours=new_york_offset_h), "local")


def test_dst_gap_and_overlap():
    # 02:30 does not exist in Berlin on 2024-03-31: read as if the clock had moved on (03:30 CEST = 01:30 UTC)
    assert stamp("[2024-03-31 02:30:00] x", tz="Europe/Berlin")[0] == datetime(2024, 3, 31, 1, 30)
    # 02:30 happens twice on 2024-10-27: the earlier one (CEST)
    assert stamp("[2024-10-27 02:30:00] x", tz="Europe/Berlin")[0] == datetime(2024, 10, 27, 0, 30)


# --- year-less stamps: syslog and glog ------------------------------------------------------------------------------


def test_syslog_in_the_window_year():
    assert stamp("May 18 19:02:39 host kernel: NVRM: Xid") == (datetime(2025, 5, 18, 19, 2, 39), "year_inferred")
    assert stamp("May 18 19:02:39 host kernel: NVRM: Xid", tz="America/New_York")[0] == datetime(2025, 5, 18, 23, 2, 39)


@pytest.mark.parametrize(
    "line, window, expected",
    [
        # a Dec 31 line of an attempt that starts on Jan 1 is from the previous year
        ("Dec 31 23:59:58 node-1 kernel: NVRM: Xid", (datetime(2025, 1, 1, 0, 10), datetime(2025, 1, 1, 2)),
         datetime(2024, 12, 31, 23, 59, 58)),
        ("[rank0]:[E1231 23:59:59.123456789 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught",
         (datetime(2025, 1, 1, 0, 10), datetime(2025, 1, 1, 2)), datetime(2024, 12, 31, 23, 59, 59, 123456)),
        # a Jan 1 line of an attempt that starts on Dec 31 is from the next year
        ("Jan  1 00:00:05 node-1 kernel: NVRM: Xid", (datetime(2024, 12, 31, 23), datetime(2024, 12, 31, 23, 50)),
         datetime(2025, 1, 1, 0, 0, 5)),
        ("E0101 00:00:05.000001 123 torch/distributed/elastic/multiprocessing/api.py:833] failed",
         (datetime(2024, 12, 31, 23), datetime(2024, 12, 31, 23, 50)), datetime(2025, 1, 1, 0, 0, 5, 1)),
        # months away: still the nearest year
        ("Nov 22 18:29:55 hostname kernel: x", MAY_2025, datetime(2024, 11, 22, 18, 29, 55)),
        ("Sep 19 16:18:02 bubz kernel: x", MAY_2025, datetime(2025, 9, 19, 16, 18, 2)),
        # Feb 29 exists only in the leap year among the candidates
        ("Feb 29 12:00:00 h kernel: x", (datetime(2025, 3, 1), datetime(2025, 3, 2)), datetime(2024, 2, 29, 12)),
    ],
)
def test_year_inference(line, window, expected):
    assert stamp(line, window=window) == (expected, "year_inferred")


def test_year_inference_uses_the_local_window():
    # 2025-01-01 03:00 UTC is still Dec 31 in New York: a "Dec 31 22:30" line is from 2024
    window = (datetime(2025, 1, 1, 3), datetime(2025, 1, 1, 5))
    assert stamp("Dec 31 22:30:00 node-1 kernel: x", tz="America/New_York", window=window)[0] == datetime(2025, 1, 1, 3, 30)


def test_feb_29_without_a_leap_year_candidate_has_no_stamp():
    assert stamp("Feb 29 12:00:00 h kernel: x", window=(datetime(2022, 6, 1), datetime(2022, 6, 2))) == (None, "none")


def test_aware_window_bounds():
    window = (datetime(2025, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))), datetime(2025, 1, 1, 2, tzinfo=timezone.utc))
    assert stamp("Dec 31 23:59:58 node-1 kernel: x", window=window)[0] == datetime(2024, 12, 31, 23, 59, 58)


@pytest.mark.parametrize(
    "line, expected",
    [
        # PyTorch does not zero-pad the month: the last two digits are the day
        ("[rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] x", datetime(2025, 3, 21, 2, 7, 8, 408271)),
        ("[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] x", datetime(2024, 12, 6, 18, 44, 12, 715298)),
        ("[rank1]:[E626 06:24:44.903881913 ProcessGroupNCCL.cpp:616] x", datetime(2025, 6, 26, 6, 24, 44, 903881)),
        ("[rank7]:[E816 01:45:40.183009389 ProcessGroupNCCL.cpp:607] x", datetime(2025, 8, 16, 1, 45, 40, 183009)),
        # plain glog: zero-padded month, 6 fractional digits, thread id
        ("E0318 13:21:42.765000 22421439703936 torch/distributed/elastic/multiprocessing/api.py:833] failed",
         datetime(2025, 3, 18, 13, 21, 42, 765000)),
        ("I1129 01:02:03.456789  1234 foo.cc:12] bar", datetime(2024, 11, 29, 1, 2, 3, 456789)),
        ("3: [rank3]:[E321 02:07:08.4 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog", datetime(2025, 3, 21, 2, 7, 8, 400000)),
    ],
)
def test_glog_month_forms(line, expected):
    assert stamp(line) == (expected, "year_inferred")


def test_impossible_glog_date_has_no_stamp():
    assert stamp("[rank0]:[E1399 02:07:08.408271257 ProcessGroupNCCL.cpp:607] x") == (None, "none")
    assert stamp("[rank0]:[E231 02:07:08.408271257 ProcessGroupNCCL.cpp:607] x") == (None, "none")


# --- monotonic clocks -----------------------------------------------------------------------------------------------


def test_monotonic_only_lines():
    frame = parse(
        "[ 5107.644336] NVRM: Xid (PCI:0000:2b:00): 31",
        "[ 130.456250] [ T1946] NVRM: Xid (PCI:0000:2b:00): 31",
        "6,3964,206764307,-;nvidia-nvswitch2: open (major=510)",
        "[  +0.000844] nvidia 0000:03:00.0: AER: can't recover (no error_detected callback)",
    )
    assert frame.get_column("ts").to_list() == [None] * 4
    assert frame.get_column("ts_quality").to_list() == ["monotonic"] * 4
    assert frame.get_column("mono_s").to_list() == [5107.644336, 130.45625, 206.764307, None]


def test_dmesg_human_minute_stamp_and_show_delta_forms():
    frame = parse(
        "[May18 19:02] NVRM: Xid (PCI:0000:2b:00): 79",
        "[  +0.000844] NVRM: GPU has fallen off the bus.",
        "[  966.503025 <    0.000844>] NVRM: Xid 79",  # dmesg -d: the bracket's first number is since boot
    )
    rows = frame.select("ts", "ts_quality", "mono_s", "chain_s").rows()
    assert rows == [
        (datetime(2025, 5, 18, 19, 2), "year_inferred", None, 0.0),
        (None, "monotonic", None, 0.000844),
        (None, "monotonic", 966.503025, None),
    ]


def test_syslog_header_wins_over_the_embedded_dmesg_stamp():
    got = parse("Nov 22 18:29:55 hostname kernel: [  966.503025] NVRM: Xid").row(0, named=True)
    assert (got["ts"], got["ts_quality"], got["mono_s"]) == (datetime(2024, 11, 22, 18, 29, 55), "year_inferred", 966.503025)


@pytest.mark.parametrize(
    "line",
    ["Traceback (most recent call last):", "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught", "NCCL version 2.18.1",
     "node-0:3986589:3987377 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [RO]", "[rank3]: Last error:", ""],
)
def test_lines_without_stamp(line):
    got = parse(line).row(0, named=True)
    assert (got["ts"], got["ts_quality"], got["mono_s"]) == (None, "none", None)


def test_schema_and_no_internal_columns():
    frame = parse("May 18 19:02:39 host kernel: x", "y")
    assert frame.schema["ts"] == pl.Datetime("us")
    assert frame.schema["ts_quality"] == pl.String
    assert frame.schema["mono_s"] == pl.Float64
    assert not [c for c in frame.columns if c.startswith("_")]


@pytest.mark.parametrize("raw", ["\x00\x01\ufffd", "", "x" * 70_000, "[rank0]:[E" + "9" * 70_000, "May 99 99:99:99 x"])
def test_garbage_does_not_raise(raw):
    got = parse(raw, tz="Europe/Berlin").row(0, named=True)
    assert got["ts"] is None and got["ts_quality"] == "none"


def test_empty_frame():
    frame = parse_timestamps(
        strip_decorations(pl.LazyFrame(schema={"raw": pl.String})), tz="UTC", window_start=MAY_2025[0], window_end=MAY_2025[1]
    ).collect()
    assert frame.height == 0 and {"ts", "ts_quality", "mono_s"} <= set(frame.columns)


# --- anchor_file_clock ----------------------------------------------------------------------------------------------


def anchored(lines: list[str], clock: FileClock, first_line: int = 1) -> tuple[pl.DataFrame, FileClock]:
    frame = parse(*lines).with_columns(line=pl.int_range(first_line, first_line + len(lines), dtype=pl.Int64))
    return anchor_file_clock(frame, clock)


def test_boot_time_from_a_syslog_line_anchors_dmesg_stamps_across_batches():
    first, clock = anchored(
        ["May 18 19:02:40 node-1 kernel: [  100.000000] NVRM: GPU at PCI:0000:2b:00", "[  150.500000] NVRM: Xid 79"],
        FileClock(),
    )
    boot = datetime(2025, 5, 18, 19, 1)
    assert clock.boot_time == boot
    assert first.get_column("ts").to_list() == [datetime(2025, 5, 18, 19, 2, 40), boot + timedelta(seconds=150.5)]
    assert first.get_column("ts_quality").to_list() == ["year_inferred", "boot_anchored"]

    second, clock = anchored(["[  200.000001] NVRM: Xid 79", "NVRM: GPU has fallen off the bus."], clock, first_line=3)
    assert second.get_column("ts").to_list() == [boot + timedelta(seconds=200, microseconds=1)] * 2
    assert second.get_column("ts_quality").to_list() == ["boot_anchored", "inherited"]
    assert clock == FileClock(boot_time=boot, last_ts=boot + timedelta(seconds=200, microseconds=1), last_mono=200.000001)


def test_boot_time_is_the_median_of_all_pairs():
    _, clock = anchored(
        [
            "May 18 19:02:40 n kernel: [  100.000000] a",
            "May 18 19:02:41 n kernel: [  101.000000] b",
            "May 18 19:09:00 n kernel: [  102.000000] c",  # a clock jump must not move the boot time
        ],
        FileClock(),
    )
    assert clock.boot_time == datetime(2025, 5, 18, 19, 1)


def test_given_boot_time_is_used_and_may_be_aware():
    boot = datetime(2025, 5, 18, 21, 0, tzinfo=timezone(timedelta(hours=2)))
    frame, clock = anchored(["[   10.000000] a", "6,1,20000000,-;b"], FileClock(boot_time=boot))
    assert frame.get_column("ts").to_list() == [datetime(2025, 5, 18, 19, 0, 10), datetime(2025, 5, 18, 19, 0, 20)]
    assert frame.get_column("ts_quality").to_list() == ["boot_anchored", "boot_anchored"]
    assert clock.boot_time == datetime(2025, 5, 18, 19)


def test_monotonic_without_boot_time_stays_monotonic():
    frame, clock = anchored(["[   10.000000] a", "b"], FileClock())
    assert frame.get_column("ts").to_list() == [None, None]
    assert frame.get_column("ts_quality").to_list() == ["monotonic", "none"]
    assert clock == FileClock(last_mono=10.0)


def test_inherited_stamps_and_lines_before_any_stamp():
    frame, clock = anchored(
        ["Traceback (most recent call last):", "[2025-05-18 19:00:00,000] [ERROR] boom", "  File x", "[  +0.1] delta",
         "RuntimeError: y"],
        FileClock(),
    )
    assert frame.get_column("ts").to_list() == [None, datetime(2025, 5, 18, 19), datetime(2025, 5, 18, 19), None,
                                                datetime(2025, 5, 18, 19)]
    assert frame.get_column("ts_quality").to_list() == ["none", "local", "inherited", "monotonic", "inherited"]
    assert clock.last_ts == datetime(2025, 5, 18, 19)

    frame, clock = anchored(["still the same traceback"], clock, first_line=6)
    assert frame.row(0, named=True)["ts"] == datetime(2025, 5, 18, 19)
    assert frame.row(0, named=True)["ts_quality"] == "inherited"
    assert clock.last_ts == datetime(2025, 5, 18, 19)


def test_last_ts_is_the_last_stamp_in_line_order():
    _, clock = anchored(["[2025-05-18 19:00:05] a", "[2025-05-18 19:00:01] b", "c"], FileClock())
    assert clock.last_ts == datetime(2025, 5, 18, 19, 0, 1)


def test_empty_batch_keeps_the_clock():
    clock = FileClock(boot_time=datetime(2025, 5, 18, 19), last_ts=datetime(2025, 5, 18, 19, 5))
    frame, after = anchored([], clock)
    assert frame.height == 0 and after == clock


def test_dmesg_human_deltas_chain_from_the_minute_stamp_across_batches():
    minute = datetime(2025, 5, 18, 19, 2)
    first, clock = anchored(["[May18 19:02] NVRM: Xid 79", "[  +0.500000] a", "[  +1.250000] b"], FileClock())
    assert first.get_column("ts").to_list() == [minute, minute + timedelta(seconds=0.5), minute + timedelta(seconds=1.75)]
    assert first.get_column("ts_quality").to_list() == ["year_inferred"] * 3
    assert clock.chain_ts == minute + timedelta(seconds=1.75)

    second, clock = anchored(["[  +0.250000] c", "no stamp"], clock, first_line=4)
    assert second.get_column("ts").to_list() == [minute + timedelta(seconds=2)] * 2
    assert second.get_column("ts_quality").to_list() == ["year_inferred", "inherited"]
    assert clock.chain_ts is None  # any other line ends the chain


def test_dmesg_human_deltas_outside_a_chain_keep_no_wall_time():
    frame, clock = anchored(["[  +0.500000] before any minute stamp", "[2025-05-18 19:00:00,000] app", "[  +0.1] x"], FileClock())
    assert frame.get_column("ts").to_list() == [None, datetime(2025, 5, 18, 19), None]
    assert frame.get_column("ts_quality").to_list() == ["monotonic", "local", "monotonic"]
    assert clock.chain_ts is None


def test_a_reboot_inside_a_kernel_log_starts_a_new_boot_time():
    first_boot, second_boot = datetime(2025, 5, 18, 19, 1), datetime(2025, 5, 18, 19, 30)
    frame, clock = anchored(
        [
            "May 18 19:02:40 n kernel: [  100.000000] before",
            "[  110.000000] before, no wall clock",
            "May 18 19:30:05 n kernel: [    5.000000] after the reboot",
            "[    6.500000] after, no wall clock",
        ],
        FileClock(),
    )
    assert frame.get_column("ts").to_list()[1::2] == [first_boot + timedelta(seconds=110), second_boot + timedelta(seconds=6.5)]
    assert clock.boot_time == second_boot and clock.last_mono == 6.5


def test_after_a_reboot_without_a_wall_clock_lines_stay_monotonic():
    boot = datetime(2025, 5, 18, 19)
    frame, clock = anchored(["[  100.000000] a"], FileClock(boot_time=boot))
    assert frame.get_column("ts").to_list() == [boot + timedelta(seconds=100)]
    # the reboot falls between two batches: the given boot time belonged to the earlier boot
    frame, clock = anchored(["[    2.000000] b", "[    3.000000] c"], clock, first_line=2)
    assert frame.get_column("ts").to_list() == [None, None]
    assert frame.get_column("ts_quality").to_list() == ["monotonic", "monotonic"]
    assert clock.boot_time is None


def test_printk_order_jitter_is_not_a_reboot():
    boot = datetime(2025, 5, 18, 19)
    frame, clock = anchored(["[  100.000500] a", "[  100.000100] b"], FileClock(boot_time=boot))
    assert frame.get_column("ts_quality").to_list() == ["boot_anchored"] * 2
    assert clock.boot_time == boot


# --- anchor_files: many files in one pass, the same as each file alone ----------------------------------------------

_BOOT = datetime(2025, 5, 18, 19)
# (the clock a file starts with, its lines in two batches)
_FILES = [
    (FileClock(), [["May 18 19:02:40 node-1 kernel: [  100.000000] NVRM: GPU at PCI:0000:2b:00", "[  150.500000] NVRM: Xid 79"],
                   ["[  200.000001] NVRM: Xid 79", "NVRM: GPU has fallen off the bus."]]),
    (FileClock(boot_time=datetime(2025, 5, 18, 21, 0, tzinfo=timezone(timedelta(hours=2)))), [["[   10.000000] a", "6,1,20000000,-;b"], []]),
    (FileClock(), [["[   10.000000] a", "b"], ["c"]]),
    (FileClock(), [["Traceback (most recent call last):", "[2025-05-18 19:00:00,000] [ERROR] boom", "  File x", "[  +0.1] d"],
                   ["still the same traceback"]]),
    (FileClock(), [["May 18 19:02:40 n kernel: [  100.000000] before", "[  110.000000] before, no wall clock",
                    "May 18 19:30:05 n kernel: [    5.000000] after the reboot", "[    6.500000] after"], ["[    2.000000] again"]]),
    (FileClock(boot_time=_BOOT), [["[  100.000000] a"], ["[    2.000000] b", "[    3.000000] c"]]),
    (FileClock(), [["[May18 19:02] NVRM: Xid 79", "[  +0.500000] a"], ["[  +0.250000] c", "no stamp"]]),
    (FileClock(last_ts=_BOOT, last_mono=50.0), [["plain line", "[   40.000000] below the last since-boot"], ["x"]]),
]


def test_anchor_files_gives_each_file_what_anchoring_it_alone_gives():
    clocks = {i: clock for i, (clock, _) in enumerate(_FILES)}
    alone = dict(clocks)
    first_line = {i: 1 for i in clocks}
    for batch in range(2):
        frames, expected = [], []
        for i, (_, batches) in enumerate(_FILES):
            lines = batches[batch]
            if not lines:
                continue
            frame = parse(*lines).with_columns(line=pl.int_range(first_line[i], first_line[i] + len(lines), dtype=pl.Int64),
                                               _file=pl.lit(i, pl.Int32))
            first_line[i] += len(lines)
            frames.append(frame)
            part, alone[i] = anchor_file_clock(frame, alone[i])
            expected.append(part)
        got, clocks = anchor_files(pl.concat(frames), clocks)
        assert got.to_dicts() == pl.concat(expected).to_dicts()
        assert clocks == alone


# the epoch an audit record or the RTC at boot prints, 1,000 s after a boot at 2025-05-18 19:01:00 UTC
BOOT_2025 = datetime(2025, 5, 18, 19, 1)
EPOCH_AT_1000 = int((BOOT_2025.replace(tzinfo=timezone.utc) + timedelta(seconds=1000)).timestamp())


@pytest.mark.parametrize("record", [
    f'[ 1000.000000] audit: type=1400 audit({EPOCH_AT_1000}.000:57): apparmor="STATUS" operation="profile_load" name="x" pid=1 comm="apparmor_parser"',
    f"[ 1000.000000] rtc_cmos 00:01: setting system clock to 2025-05-18T19:17:40 UTC ({EPOCH_AT_1000})",
])
def test_raw_dmesg_is_anchored_by_the_kernels_own_wall_time_records(record):
    frame, clock = anchored([record, "[ 1500.250000] NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus."], FileClock())
    assert clock.boot_time == BOOT_2025
    assert frame.get_column("ts").to_list() == [BOOT_2025 + timedelta(seconds=1000), BOOT_2025 + timedelta(seconds=1500.25)]
    assert frame.get_column("ts_quality").to_list() == ["exact", "boot_anchored"]


@pytest.mark.parametrize("record", [
    f"audit: type=1400 audit({EPOCH_AT_1000}.000:57): no seconds since boot on this line",  # nothing to anchor
    "[ 1000.000000] audit: type=1400 audit(17.000:57): an epoch too short to be one",
    f"[ 1000.000000] rtc_cmos 00:01: setting system clock to 2025-05-18T19:17:40 ({EPOCH_AT_1000})",  # not the RTC's words
])
def test_near_misses_of_the_kernels_wall_time_records_anchor_nothing(record):
    frame, clock = anchored([record, "[ 1500.250000] NVRM: Xid 79"], FileClock())
    assert clock.boot_time is None and frame.get_column("ts_quality").to_list()[1] == "monotonic"
