"""Slurm task-list and host-list expansion (transforms/slurm_lists.py)."""

from __future__ import annotations

import pytest

from firstfault.transforms.slurm_lists import expand_hostlist, expand_task_list


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("0", [0]),
        ("289", [289]),
        ("2,4-5,7", [2, 4, 5, 7]),
        ("10-11", [10, 11]),
        ("1-3", [1, 2, 3]),
        ("[0-3]", [0, 1, 2, 3]),
        (" 1 , 3-4 ", [1, 3, 4]),
        ("", []),
    ],
)
def test_expand_task_list(spec, expected):
    assert expand_task_list(spec) == expected


def test_expand_task_list_kill_on_bad_exit_missing_task():
    # desihub/desispec#2744: task 58 is absent from the Terminated list -> it is the suspect
    tasks = expand_task_list("0-57,59-63")
    assert len(tasks) == 63
    assert set(range(64)) - set(tasks) == {58}


@pytest.mark.parametrize("spec", ["a-b", "5-3", "1,,x", "1-2-3"])
def test_expand_task_list_rejects_garbage(spec):
    with pytest.raises(ValueError):
        expand_task_list(spec)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("gpu-[001-004,010]", ["gpu-001", "gpu-002", "gpu-003", "gpu-004", "gpu-010"]),
        ("nid001277", ["nid001277"]),
        ("worker-1,worker-3", ["worker-1", "worker-3"]),
        ("n[8-11]", ["n8", "n9", "n10", "n11"]),
        ("n[08-11]", ["n08", "n09", "n10", "n11"]),
        ("a1,b[1-2]", ["a1", "b1", "b2"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
        ("SH-IDC1-10-140-24-95", ["SH-IDC1-10-140-24-95"]),
        ("", []),
    ],
)
def test_expand_hostlist(spec, expected):
    assert expand_hostlist(spec) == expected


@pytest.mark.parametrize("spec", ["gpu-[001-004", "gpu-001]", "n[a-b]", "n[3-1]"])
def test_expand_hostlist_rejects_garbage(spec):
    with pytest.raises(ValueError):
        expand_hostlist(spec)
