import polars as pl

from firstfault.transforms.lines import LineStats, repair_utf8, split_chunks, split_lines


def test_split_keeps_physical_line_numbers_and_counts_bad_lines():
    chunk = b"a\r\nb \xff\xfe x\n\x00binary\n" + b"z" * 100 + b"\n\nlast"
    frame, stats = split_lines(chunk, 10, 50)
    assert frame["line"].to_list() == [10, 11, 12, 13, 14, 15]
    assert frame["raw"].to_list()[0] == "a"
    assert frame["raw"][1] == "b \ufffd\ufffd x"
    assert frame["raw"][2] == "binary"  # its NUL stripped
    assert len(frame["raw"][3]) == 50
    assert (stats.lines, stats.malformed, stats.binary, stats.truncated) == (6, 1, 1, 1)


def test_empty_chunk():
    frame, stats = split_lines(b"", 1, 10)
    assert frame.height == 0 and stats.lines == 0


def test_repair_many_errors_stays_valid():
    data = bytes(range(256)) * 100
    fixed, patches = repair_utf8(data)
    fixed.decode("utf-8")
    assert patches > 0


def test_chunks_split_together_as_each_alone():
    chunks = [b"a\nb\n", b"", b"no newline at the end", b"ok\nbin\x00ary\n" + b"x" * 50 + b"\n", b"last\r\n"]
    first_lines = [1, 1, 7, 20, 3]
    frame, stats = split_chunks(chunks, first_lines, 40)
    alone = [split_lines(c, f, 40) for c, f in zip(chunks, first_lines)]
    for position, (expected, expected_stats) in enumerate(alone):
        got = frame.filter(pl.col("_chunk") == position).drop("_chunk")
        assert got.to_dicts() == expected.to_dicts()
        assert stats[position] == expected_stats
    assert stats[3] == LineStats(lines=3, binary=1, truncated=1)


def test_a_mis_encoded_chunk_is_repaired_and_counted_on_its_own():
    frame, stats = split_chunks([b"good\n", b"bad \xff byte\n"], [1, 1], 100)
    assert frame.get_column("raw").to_list() == ["good", "bad \ufffd byte"]
    assert [s.malformed for s in stats] == [0, 1]


def test_lines_of_binary_junk_are_dropped_and_counted_apart():
    chunk = (b"text\n"
             b"\x01\x02\xff\x00junk\n"  # control bytes, invalid UTF-8 and a NUL: junk, counted only as junk
             b"caf\xe9 cr\xe8me\n"  # invalid UTF-8 alone is mis-encoded text: kept
             b"\x00\x00\n"  # NULs alone: an empty line, kept
             b"a tab\tan escape \x1b[0m and one bell\x07 in a long line\n")  # within 10 %: kept
    frame, stats = split_lines(chunk, 1, 1000)
    assert frame["line"].to_list() == [1, 3, 4, 5]
    assert frame["raw"][1] == "caf\ufffd cr\ufffdme"
    assert (stats.lines, stats.junk, stats.malformed, stats.binary, stats.truncated) == (5, 1, 1, 1, 0)
    frame, stats = split_chunks([b"ok\n", b"\x01\x02\n\x03\n"], [1, 1], 100)
    assert frame["raw"].to_list() == ["ok"] and [s.junk for s in stats] == [0, 2]
