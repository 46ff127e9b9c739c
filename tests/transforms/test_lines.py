from firstfault.transforms.lines import repair_utf8, split_lines


def test_split_keeps_physical_line_numbers_and_counts_bad_lines():
    chunk = b"a\r\nb \xff\xfe x\n\x00binary\n" + b"z" * 100 + b"\n\nlast"
    frame, stats = split_lines(chunk, 10, 50)
    assert frame["line"].to_list() == [10, 11, 13, 14, 15]
    assert frame["raw"].to_list()[0] == "a"
    assert frame["raw"][1] == "b \ufffd\ufffd x"
    assert len(frame["raw"][2]) == 50
    assert (stats.lines, stats.malformed, stats.binary, stats.truncated) == (6, 1, 1, 1)


def test_empty_chunk():
    frame, stats = split_lines(b"", 1, 10)
    assert frame.height == 0 and stats.lines == 0


def test_repair_many_errors_stays_valid():
    data = bytes(range(256)) * 100
    fixed, patches = repair_utf8(data)
    fixed.decode("utf-8")
    assert patches > 0
