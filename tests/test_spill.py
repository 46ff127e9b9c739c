import polars as pl

from firstfault.spill import SpillingFrames

SCHEMA = {"line": pl.Int64(), "raw": pl.String()}


def frame(start: int, n: int) -> pl.DataFrame:
    return pl.DataFrame({"line": range(start, start + n), "raw": [f"line {i} " + "x" * 50 for i in range(start, start + n)]},
                        schema=SCHEMA)


def test_frames_past_the_budget_spill_to_disk_and_come_back_in_order():
    held = SpillingFrames(SCHEMA, memory_bytes=10_000)
    for k in range(20):
        held.add(frame(k * 100, 100))
    assert held._writer is not None  # spilled
    assert held._held <= 10_000 + frame(0, 100).estimated_size()
    out = pl.concat(held.frames())
    assert out["line"].to_list() == list(range(2000))
    assert pl.concat(held.frames()).equals(out)  # a second call (per-attempt retry) sees the same rows


def test_small_collections_stay_in_memory_and_empty_frames_are_ignored():
    held = SpillingFrames(SCHEMA, memory_bytes=1 << 20)
    held.add(frame(0, 0))
    held.add(frame(0, 3))
    assert held._writer is None
    assert pl.concat(held.frames())["line"].to_list() == [0, 1, 2]
