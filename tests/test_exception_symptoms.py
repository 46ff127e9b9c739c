"""The exception texts python_exception leaves aside come from the message catalogue: each symptom entry's format string,
as written in its emitter's source, becomes a pattern that matches what it prints and nothing wider."""
import re

import pytest

from firstfault.rules_sql.exception_symptoms import exception_symptom_patterns, format_pattern
from firstfault.transforms.messages import load_catalogue


@pytest.mark.parametrize("fmt, matches, misses", [
    ('"DataLoader worker (pid " << worker_pid << ") exited " << "unexpectedly with exit code " << status << ". "',
     "DataLoader worker (pid 4051) exited unexpectedly with exit code 1. ", "DataLoader worker (pid 4051) is killed"),
    ('"Timed out after ", timeout.count(), " seconds waiting for clients. ", joined, "/", n, " clients joined."',
     "Timed out after 901 seconds waiting for clients. 2/4 clients joined.", "Timed out after 901 seconds"),
    ("'DataLoader worker (pid(s) {}) exited unexpectedly'.format(pids_str)",
     "DataLoader worker (pid(s) 6662, 6663) exited unexpectedly", "DataLoader worker (pid 6662) exited"),
    ('f"Process {os.getpid()} got signal: {sigval}"', "Process 3312 got signal: 15", "Process 3312 exited"),
    ("Detected %\"PRIu64\" oom_kill event%s in %ps.", "Detected 1 oom_kill event in StepId=4.0.", "Detected oom"),
])
def test_a_format_string_becomes_the_pattern_of_what_it_prints(fmt, matches, misses):
    pattern = format_pattern(fmt)
    assert re.search(pattern, matches), pattern
    assert not re.search(pattern, misses), pattern


def test_every_symptom_exception_entry_matches_its_own_examples_and_values_decide_the_rest():
    messages = load_catalogue()
    patterns = dict(exception_symptom_patterns(messages))
    for m in messages:
        if m.id in patterns:
            assert all(re.search(patterns[m.id], x.lines[-1]) for x in m.examples), m.id
    # a worker killed by SIGKILL is a symptom, one that crashed is the cause: the format alone cannot tell them apart
    assert "pytorch.dataloader.worker_killed_by_signal" not in patterns
    assert "pytorch.elastic.signal_exception" in patterns
