"""The Slurm connector without a cluster: hostlists, both `sacct --json` shapes and `--parsable2` (captured from a
real 22.05 cluster, 23.11 written in its documented shape), attempts, discovery, settings and errors. `sacct` and
`scontrol` are played by a small script that prints the fixtures and records how it was called."""
import json
import re
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import pytest

from firstfault.config import Config, SlurmSettings, load_config
from firstfault.connectors import slurm
from firstfault.connectors.base import save_context
from firstfault.connectors.hostlist import MAX_HOSTS, expand_hostlist
from firstfault.lake import Lake
from firstfault.connectors.registry import scheduler_connectors
from firstfault.connectors.static_context import load_static_context
from firstfault.errors import BadInput

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
CAPTURED_WORKDIR = "/tmp/cap"  # the work dir of the captured jobs; the fake scontrol moves it under tmp_path


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc)


# --- hostlists -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("expression, hosts", [
    ("node1", ["node1"]),
    ("gpu-[001-004,010]", ["gpu-001", "gpu-002", "gpu-003", "gpu-004", "gpu-010"]),
    ("a[1-2],b3", ["a1", "a2", "b3"]),
    ("n[8-11]", ["n8", "n9", "n10", "n11"]),
    ("n[08-11]", ["n08", "n09", "n10", "n11"]),
    ("n[098-101]", ["n098", "n099", "n100", "n101"]),
    ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
    ("gpu-[001-002],gpu-001,cpu[7]", ["gpu-001", "gpu-002", "cpu7"]),
    ("a1, a2  a3", ["a1", "a2", "a3"]),
    ("x[3,1-2]", ["x3", "x1", "x2"]),
    ("", []),
])
def test_hostlist_expands_like_scontrol_show_hostnames(expression, hosts):
    assert expand_hostlist(expression) == hosts


@pytest.mark.parametrize("expression, problem", [
    ("gpu-[001-004", "without ']'"),
    ("gpu-001]", "without '['"),
    ("gpu-[[1-2]]", "nested"),
    ("gpu-[4-1]", "backwards"),
    ("gpu-[a-b]", "not a number"),
    ("gpu-[]", "not a number"),
    (f"n[0-{MAX_HOSTS}]", "more than"),
    ("a[0-999]b[0-9999]", "more than"),
])
def test_hostlist_rejects_malformed_expressions(expression, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        expand_hostlist(expression)


# --- parsable2 -----------------------------------------------------------------------------------------------------

def test_parsable_traceback_job_steps_and_exit_codes():
    [run] = slurm.parse_parsable(fixture("sacct-22.05-traceback.txt"))
    assert (run.job_id, run.job_id_raw, run.name, run.cluster, run.user) == ("2", "2", "ff-traceback", "ci", "root")
    assert (run.state, run.exit_code, run.derived_exit_code, run.nodes) == ("FAILED", "1:0", "1:0", ("node1",))
    assert run.start == utc("2026-11-30T10:31:20") and run.end == utc("2026-11-30T10:31:20")
    assert [(s.step_id, s.name, s.state, s.exit_code) for s in run.steps] == [("batch", "batch", "FAILED", "1:0"), ("0", "python3", "FAILED", "1:0")]
    assert slurm.gpus_from_tres(run.tres) == (1, "H100")


def test_parsable_array_tasks_keep_their_ids_and_raw_ids():
    runs = slurm.parse_parsable(fixture("sacct-22.05-array.txt"))
    assert [(r.job_id, r.job_id_raw, r.array_ids, r.exit_code) for r in runs] == [
        ("3_1", "4", ("3", "1"), "1:0"), ("3_2", "3", ("3", "2"), "2:0")]


def test_parsable_requeued_job_has_one_run_per_start_with_its_own_steps():
    first, second = slurm.parse_parsable(fixture("sacct-22.05-requeue.txt"))
    assert (first.state, second.state) == ("REQUEUED", "COMPLETED")
    assert [s.exit_code for s in first.steps] == ["0:15", "0:15"] and [s.name for s in second.steps] == ["batch", "echo"]
    assert second.derived_exit_code == "0:15" and second.reason == "BeginTime"


def test_parsable_timeout_and_never_started_het_components():
    [timeout] = slurm.parse_parsable(fixture("sacct-22.05-timeout.txt"))
    assert timeout.state == "TIMEOUT" and slurm.main_step(timeout.steps).state == "CANCELLED"
    assert slurm.gpus_from_tres(timeout.tres) == (2, "H100")
    het = slurm.parse_parsable(fixture("sacct-22.05-het-cancelled.txt"))
    assert [(r.job_id, r.job_id_raw, r.state, r.state_text, r.start, r.nodes) for r in het] == [
        ("5+0", "5", "CANCELLED", "CANCELLED by 0", None, ()), ("5+1", "6", "CANCELLED", "CANCELLED by 0", None, ())]


def test_parsable_het_job_on_a_multi_range_hostlist():
    leader, other = slurm.parse_parsable(fixture("sacct-het-multinode.txt"))
    assert (leader.job_id, leader.job_id_raw, other.job_id, other.job_id_raw) == ("8100+0", "8100", "8100+1", "8101")
    assert len(leader.nodes) == 16 and leader.nodes[:5] == ("gpu-001", "gpu-002", "gpu-003", "gpu-004", "gpu-010")
    assert leader.nodes[-1] == "gpu-030" and slurm.gpus_from_tres(leader.tres) == (128, None)
    assert slurm.main_step(leader.steps).step_id == "1"  # .0 completed, .1 was killed
    assert (leader.stdout, leader.stderr) == ("out/%x-%j.out", "out/%x-%j.err")


@pytest.mark.parametrize("text, problem", [
    ("1|2|3\n", "no header line"),
    ("JobID|State\n1|FAILED|x\n", "3 fields, the header 2"),
    ("JobID|Start\n1|30/11/2026\n", "not ISO 8601"),
    ("JobID|NodeList\n1|gpu-[1-\n", "without ']'"),
])
def test_parsable_garbage_is_a_clear_error(text, problem):
    with pytest.raises(slurm.SlurmError, match=re.escape(problem)):
        slurm.parse_parsable(text)


# --- JSON ----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["traceback", "array", "timeout", "requeue", "het-cancelled"])
def test_json_22_05_reads_like_text_once_exit_codes_come_from_text(name):
    runs, trusted = slurm.parse_json(fixture(f"sacct-22.05-{name}.json"))
    text = slurm.parse_parsable(fixture(f"sacct-22.05-{name}.txt"))
    assert not trusted
    merged = {r.job_id_raw + r.state: r for r in slurm.merge_exit_codes(runs, text)}
    for expected in text:
        got = merged[expected.job_id_raw + expected.state]
        # the JSON prints the state without "by <uid>"; everything else must agree
        assert replace(got, state_text=expected.state_text) == expected


def test_json_22_05_exit_code_bug_is_real_and_worked_around():
    [run], _ = slurm.parse_json(fixture("sacct-22.05-traceback.json"))
    assert run.exit_code == "0:0" and run.steps[1].exit_code == "0:0"  # the serializer's SUCCESS/0 for exit 1
    [fixed] = slurm.merge_exit_codes([run], slurm.parse_parsable(fixture("sacct-22.05-traceback.txt")))
    assert fixed.exit_code == "1:0" and [s.exit_code for s in fixed.steps] == ["1:0", "1:0"]
    [requeued, _], _ = slurm.parse_json(fixture("sacct-22.05-requeue.json"))
    assert [s.exit_code for s in requeued.steps] == ["0:15", "0:15"]  # signals are printed right


def test_json_23_11_shape():
    runs, trusted = slurm.parse_json(fixture("sacct-23.11.json"))
    assert trusted
    by_id = {}
    for r in runs:
        by_id.setdefault(r.job_id, []).append(r)
    [array] = by_id["4242_7"]
    assert (array.job_id_raw, array.state, array.exit_code, array.nodes) == ("4250", "FAILED", "1:0", ("gpu-001", "gpu-002"))
    assert slurm.gpus_from_tres(array.tres) == (16, "H100") and array.cluster == "polaris"
    assert [(s.step_id, s.state, s.exit_code) for s in array.steps] == [("batch", "FAILED", "1:0"), ("0", "FAILED", "1:0")]
    assert array.start == datetime.fromtimestamp(1796000100, timezone.utc)
    [het0], [het1] = by_id["5000+0"], by_id["5000+1"]
    assert (het0.state, het0.exit_code, het0.nodes, het1.job_id_raw, het1.nodes) == ("NODE_FAIL", "0:9", ("gpu-009", "gpu-010"), "5001", ("cpu01",))
    assert slurm.gpus_from_tres(het0.tres) == (16, None)
    timed_out, requeued = by_id["6000"]
    assert (timed_out.state, requeued.state, timed_out.derived_exit_code) == ("TIMEOUT", "REQUEUED", "0:15")
    assert slurm.gpus_from_tres(requeued.tres) == (16, "A100")
    [pending] = by_id["7000"]
    assert pending.start is None and pending.nodes == ()


@pytest.mark.parametrize("text, problem", [("not json", "not JSON"), ('{"meta": {}}', "no `jobs` list")])
def test_json_garbage_is_a_clear_error(text, problem):
    with pytest.raises(slurm.SlurmError, match=problem):
        slurm.parse_json(text)


# --- output files --------------------------------------------------------------------------------------------------

def test_output_patterns_expand_like_slurm():
    runs, _ = slurm.parse_json(fixture("sacct-23.11.json"))
    array = runs[0]
    expand = slurm.expand_output_pattern
    assert expand("%x-%A_%a.out", array) == "pretrain-4242_7.out"
    assert expand("/s/%u/%j-%3a-%b.%N.log", array) == "/s/alice/4250-007-7.gpu-001.log"
    assert expand("%J %s %n %t 100%% %4j %q", array) == "4250.batch batch 0 0 100% 4250 %q"
    assert expand("lit\\%j.out", array) == "lit%j.out"
    plain = slurm.parse_parsable(fixture("sacct-22.05-timeout.txt"))[0]
    assert expand("slurm-%A_%a.out", plain) == "slurm-9_4294967294.out"  # %a outside an array: Slurm's NO_VAL
    assert expand("%12j", plain) == "0000000009"  # padding stops at 10 digits


def test_scontrol_lines_by_raw_job_id():
    jobs = slurm.parse_scontrol(fixture("scontrol-22.05-array.txt"))
    assert jobs["4"]["StdOut"] == "/tmp/cap/arr-3_1.out" and jobs["3"]["ArrayTaskId"] == "2"
    assert jobs["4"]["AllocNode:Sid"] == "localhost:24015" and jobs["4"]["Command"] == "/tmp/cap/arr.sbatch"


# --- the connector through a fake sacct/scontrol ------------------------------------------------------------------

class FakeSlurm:
    """`sacct` and `scontrol` as one script: it prints the outputs it was given and records every call."""

    def __init__(self, root: Path, **outputs):
        self.root = root
        self.spec = root / "fake-slurm.json"
        self.calls_file = root / "calls.jsonl"
        spec = {"helpformat": fixture("sacct-22.05-helpformat.txt"), "text": "", "json": "", "listing": "",
                "scontrol": None, "exit": 0, "stderr": "", "sleep": 0, "calls": str(self.calls_file)}
        spec.update(outputs)
        self.spec.write_text(json.dumps(spec))
        script = (f"#!{sys.executable}\n"
                  "import json, os, sys, time\n"
                  f"spec = json.load(open({str(self.spec)!r}))\n"
                  "tool, args = os.path.basename(sys.argv[0]), sys.argv[1:]\n"
                  "with open(spec['calls'], 'a') as f:\n"
                  "    f.write(json.dumps({'tool': tool, 'args': args, 'tz': os.environ.get('TZ')}) + '\\n')\n"
                  "time.sleep(spec['sleep'])\n"
                  "if tool == 'scontrol':\n"
                  "    if spec['scontrol'] is None:\n"
                  "        sys.exit('slurm_load_jobs error: Invalid job id specified')\n"
                  "    print(spec['scontrol'], end='')\n"
                  "    sys.exit(0)\n"
                  "if spec['exit']:\n"
                  "    sys.stderr.write(spec['stderr'])\n"
                  "    sys.exit(spec['exit'])\n"
                  "key = 'helpformat' if '--helpformat' in args else 'json' if '--json' in args else 'listing' if '-X' in args else 'text'\n"
                  "print(spec[key], end='')\n")
        for tool in ("sacct", "scontrol"):
            path = root / tool
            path.write_text(script)
            path.chmod(0o755)

    def settings(self, **kw) -> SlurmSettings:
        return SlurmSettings(enabled=True, sacct=str(self.root / "sacct"), scontrol=str(self.root / "scontrol"), **kw)

    def calls(self, tool="sacct") -> list[list[str]]:
        lines = self.calls_file.read_text().splitlines() if self.calls_file.exists() else []
        return [c["args"] for c in map(json.loads, lines) if c["tool"] == tool and "--helpformat" not in c["args"]]

    def timezones(self) -> set:
        return {json.loads(line)["tz"] for line in self.calls_file.read_text().splitlines()}


def connector(fake: FakeSlurm, **kw) -> slurm.SlurmConnector:
    return slurm.from_config(Config(slurm=fake.settings(**kw)))


def test_resolve_requeued_job_gives_attempts_by_start_order(tmp_path):
    fake = FakeSlurm(tmp_path, text=fixture("sacct-22.05-requeue.txt"))
    logs = {"syslog": "/var/log/nodes/{node}.log", "applog": "/shared/{cluster}/{user}/{job_id}-{attempt}-{job_name}/*.log"}
    first, second = connector(fake, logs=logs).resolve("11")
    assert (first.attempt_id, first.state, first.exit_code) == ("ci/11/0", "REQUEUED", "0:0")
    assert (second.attempt_id, second.state, second.exit_code) == ("ci/11/1", "COMPLETED", "0:0")
    assert first.start < second.start and second.nodes == ("node1",) and second.timezone == "UTC"
    assert [(s.source, s.path) for s in second.logs] == [
        ("applog", "/shared/ci/root/11-1-ff-requeue/*.log"), ("syslog", "/var/log/nodes/{node}.log")]
    assert second.scheduler["ref"] == "11:1" and second.scheduler["reason"] == "BeginTime"
    assert second.scheduler["steps"] == [{"id": "batch", "name": "batch", "state": "COMPLETED", "exit_code": "0:0"},
                                         {"id": "0", "name": "echo", "state": "COMPLETED", "exit_code": "0:0"}]
    assert (first.scheduler["step"], first.scheduler["step_state"], first.scheduler["step_exit_code"]) == ("0", "CANCELLED", "0:15")
    assert "stdout" not in first.scheduler  # scontrol no longer knows it, no slurm-11.out: no output file
    assert fake.calls() == [["--allusers", "--duplicates", "--parsable2", f"--format={','.join(slurm.FIELDS)}", "-j", "11"]]
    assert fake.timezones() == {"UTC"}
    assert [c.attempt_id for c in connector(fake).resolve("11:1")] == ["ci/11/1"]


def test_resolve_takes_output_files_from_scontrol_and_gpus_from_tres(tmp_path):
    scontrol = fixture("scontrol-22.05-traceback.txt").replace(CAPTURED_WORKDIR, str(tmp_path))
    fake = FakeSlurm(tmp_path, text=fixture("sacct-22.05-traceback.txt"), scontrol=scontrol)
    [ctx] = connector(fake, cluster="ci").resolve("2")
    assert [(s.source, s.path) for s in ctx.logs] == [("applog", f"{tmp_path}/ff-traceback-2.out")]
    assert (ctx.gpu_model, ctx.gpus_per_node, ctx.scheduler["output_files_from"]) == ("H100", 1, "scontrol")
    assert fake.calls("scontrol") == [["--oneliner", "-M", "ci", "show", "job", "2"]]
    assert fake.calls()[0][:4] == ["--allusers", "--duplicates", "-M", "ci"]


def test_resolve_falls_back_to_slurms_default_output_file_when_it_exists(tmp_path):
    text = fixture("sacct-22.05-array.txt").replace(CAPTURED_WORKDIR, str(tmp_path))
    (tmp_path / "slurm-3_2.out").write_text("task 2\n")
    fake = FakeSlurm(tmp_path, text=text)
    task1, task2 = connector(fake, gpus_per_node=4, gpu_model="L40S").resolve("3")
    assert (task1.workload_id, task1.logs, task1.gpus_per_node, task1.gpu_model) == ("3_1", (), 4, "L40S")
    assert [s.path for s in task2.logs] == [f"{tmp_path}/slurm-3_2.out"] and task2.scheduler["output_files_from"] == "default"


def test_resolve_23_11_json_expands_sacct_output_patterns(tmp_path):
    fake = FakeSlurm(tmp_path, json=fixture("sacct-23.11.json"))
    contexts = connector(fake, json=True).resolve("4242_7") + connector(fake, json=True).resolve("5000")
    array, het0, het1 = contexts
    assert (array.attempt_id, array.gpu_model, array.gpus_per_node, array.exit_code) == ("polaris/4242_7/0", "H100", 8, "1:0")
    assert [s.path for s in array.logs] == ["/home/alice/train/logs/pretrain-4242_7.out", "/shared/logs/pretrain-4242_007.err"]
    assert (het0.attempt_id, het0.state, het0.nodes, het0.gpus_per_node) == ("polaris/5000+0/0", "NODE_FAIL", ("gpu-009", "gpu-010"), 8)
    assert [s.path for s in het0.logs] == ["/home/alice/train/slurm-5000.out"] and het1.workload_id == "5000+1"
    assert all("--parsable2" not in c for c in fake.calls())  # 23.11 exit codes are right: no text query


def test_resolve_22_05_json_takes_exit_codes_from_text(tmp_path):
    fake = FakeSlurm(tmp_path, json=fixture("sacct-22.05-traceback.json"), text=fixture("sacct-22.05-traceback.txt"))
    [ctx] = connector(fake, json=True).resolve("2")
    assert ctx.exit_code == "1:0" and ctx.scheduler["step_exit_code"] == "1:0"
    assert [c[2] for c in fake.calls()] == ["--json", "--parsable2"]


def test_requeue_order_is_start_order_not_listing_order(tmp_path):
    fake = FakeSlurm(tmp_path, json=fixture("sacct-23.11.json"))
    first, second = connector(fake, json=True).resolve("6000")
    assert (first.state, first.nodes, second.state, second.nodes) == ("REQUEUED", ("gpu-004", "gpu-005"), "TIMEOUT", ("gpu-003",))
    assert (first.gpu_model, second.gpu_model) == ("A100", "A100") and [s.path for s in second.logs] == ["/scratch/alice/6000.log"]


@pytest.mark.parametrize("ref, problem", [
    ("abc", r"is not JOBID\[:ATTEMPT\]"),
    ("11:x", r"is not JOBID\[:ATTEMPT\]"),
    ("11:7", r"no attempt 7 \(attempts: 11:0, 11:1\)"),
])
def test_resolve_bad_refs_are_bad_input(tmp_path, ref, problem):
    fake = FakeSlurm(tmp_path, text=fixture("sacct-22.05-requeue.txt"))
    with pytest.raises(BadInput, match=problem) as e:
        connector(fake).resolve(ref)
    assert (e.value.file, e.value.field) == ("--slurm", "slurm")


def test_resolve_unknown_and_unstarted_jobs(tmp_path):
    empty = FakeSlurm(tmp_path, text=fixture("sacct-22.05-traceback.txt").splitlines()[0] + "\n")
    with pytest.raises(BadInput, match="job 99 is not in the Slurm accounting records of cluster ci"):
        connector(empty, cluster="ci").resolve("99")
    pending = FakeSlurm(tmp_path, text=fixture("sacct-22.05-het-cancelled.txt"))
    with pytest.raises(BadInput, match=r"job 5\+0 has not started \(state CANCELLED by 0\)"):
        connector(pending).resolve("5+0")


def test_sacct_failures_are_bad_input_for_resolve_and_errors_for_discover(tmp_path):
    failing = FakeSlurm(tmp_path, exit=1, stderr="sacct: error: Problem talking to the database: Connection refused\n")
    with pytest.raises(BadInput, match=r"failed \(exit 1\): sacct: error: Problem talking to the database"):
        connector(failing).resolve("1")
    with pytest.raises(slurm.SlurmError, match="Connection refused"):
        connector(failing).discover(utc("2026-11-30T00:00:00"), utc("2026-12-01T00:00:00"))
    missing = slurm.SlurmConnector(SlurmSettings(enabled=True, sacct=str(tmp_path / "no-such-sacct")))
    with pytest.raises(BadInput, match=r"not found \(install the Slurm client or set \[slurm\] sacct"):
        missing.resolve("1")
    (tmp_path / "slow").mkdir()
    slow = FakeSlurm(tmp_path / "slow", sleep=5)
    with pytest.raises(BadInput, match=r"gave no answer within 0.5 s \(\[slurm\] timeout_s\)"):
        connector(slow, timeout_s=0.5).resolve("1")


def test_discover_reads_whole_jobs_then_keeps_attempts_that_ended_in_the_window(tmp_path):
    listing = ("JobID|JobIDRaw|End\n"
               "6000|6000|2026-11-29T12:00:00\n"          # attempt 1 ended in the window, attempt 0 before it
               "4242_7|4250|2026-11-29T00:00:00\n"        # on the window's start: in
               "9999|9999|2026-11-30T00:00:00\n")         # on the window's end: out
    text = "\n".join(["JobID|JobIDRaw|JobName|Cluster|NodeList|State|ExitCode|Start|End",
                      "4242_7|4250|pretrain|polaris|gpu-[001-002]|FAILED|1:0|2026-11-28T23:50:00|2026-11-29T00:00:00",
                      "4242_7.0|4250.0|python|polaris|gpu-[001-002]|FAILED|1:0|2026-11-28T23:50:00|2026-11-29T00:00:00",
                      "6000|6000|finetune|polaris|gpu-[004-005]|REQUEUED|0:0|2026-11-28T20:00:00|2026-11-28T23:00:00",
                      "6000|6000|finetune|polaris|gpu-003|TIMEOUT|0:0|2026-11-29T02:00:00|2026-11-29T12:00:00"]) + "\n"
    fake = FakeSlurm(tmp_path, listing=listing, text=text)
    found = connector(fake, partitions=("gpu", "gpu-long")).discover(utc("2026-11-29T00:00:00"), utc("2026-11-30T00:00:00"))
    assert [(c.attempt_id, c.state) for c in found] == [("polaris/4242_7/0", "FAILED"), ("polaris/6000/1", "TIMEOUT")]
    listing_call, jobs_call = fake.calls()
    assert listing_call[-8:] == ["-X", "-S", "2026-11-29T00:00:00", "-E", "2026-11-30T00:00:00",
                                 f"--state={slurm.ENDED_STATES}", "-r", "gpu,gpu-long"]
    assert jobs_call[-2:] == ["-j", "4242_7,6000"]
    assert fake.calls("scontrol") == [["--oneliner", "show", "job"]]


def test_discover_with_nothing_ended_asks_nothing_more(tmp_path):
    fake = FakeSlurm(tmp_path, listing="JobID|JobIDRaw|End\n")
    assert connector(fake).discover(utc("2026-11-29T00:00:00"), utc("2026-11-30T00:00:00")) == []
    assert len(fake.calls()) == 1 and fake.calls("scontrol") == []


# --- settings, registry, static context round trip ----------------------------------------------------------------

def test_settings_from_toml_and_registry(tmp_path):
    path = tmp_path / "firstfault.toml"
    path.write_text('[slurm]\nenabled = true\ncluster = "polaris"\ntimeout_s = 30\njson = true\npartitions = ["gpu"]\n'
                    'logs = {applog = "/shared/logs/{job_id}/*.log", syslog = "/var/log/nodes/{node}.log"}\n')
    config = load_config(str(path))
    assert config.slurm == SlurmSettings(enabled=True, cluster="polaris", timeout_s=30.0, json=True, partitions=("gpu",),
                                         logs={"applog": "/shared/logs/{job_id}/*.log", "syslog": "/var/log/nodes/{node}.log"})
    assert isinstance(scheduler_connectors(config)["slurm"], slurm.SlurmConnector)
    assert "slurm" not in scheduler_connectors(Config())  # a sacct on PATH alone does not turn it on
    path.write_text("[slurm]\nenabled = 1\n")
    with pytest.raises(BadInput, match="slurm.enabled"):
        load_config(str(path))


@pytest.mark.parametrize("settings, field, problem", [
    ({"logs": {"applog": "/x/{jobid}.log"}}, "slurm.logs.applog", r"unknown placeholder \{jobid\}"),
    ({"logs": {"applog": ""}}, "slurm.logs.applog", "must be a path template"),
    ({"timezone": "Mars/Olympus"}, "slurm.timezone", "unknown time zone"),
    ({"timeout_s": 0.0}, "slurm.timeout_s", "must be > 0"),
    ({"gpus_per_node": 0}, "slurm.gpus_per_node", "must be >= 1"),
])
def test_settings_the_connector_cannot_use_are_bad_input(settings, field, problem):
    with pytest.raises(BadInput, match=problem) as e:
        slurm.from_config(Config(slurm=SlurmSettings(enabled=True, **settings)))
    assert e.value.field == field


def test_context_round_trips_through_the_lake(tmp_path):
    fake = FakeSlurm(tmp_path, json=fixture("sacct-23.11.json"))
    [ctx] = connector(fake, json=True, logs={"syslog": "/var/log/nodes/{node}.log"}, timezone="Europe/Zurich").resolve("4242_7")
    again = load_static_context(save_context(Lake(str(tmp_path / "lake")), ctx))
    assert replace(again, base_uri=ctx.base_uri, spec_uri=ctx.spec_uri) == ctx
    assert again.scheduler == ctx.scheduler and again.timezone == "Europe/Zurich"
    assert [(s.source, s.path) for s in again.logs][-1] == ("syslog", "/var/log/nodes/{node}.log")


def test_nightly_records_an_unreachable_slurm_as_a_failure_row(tmp_path):
    from datetime import date

    from firstfault.nightly import plan_nights

    fake = FakeSlurm(tmp_path, exit=1, stderr="sacct: error: slurmdbd: Connection refused\n")
    config = Config(slurm=fake.settings())
    config = replace(config, lake=replace(config.lake, root=str(tmp_path / "lake")),
                     warehouse=replace(config.warehouse, path=str(tmp_path / "wh.duckdb")))
    [plan] = plan_nights(config, [date(2026, 11, 29)])
    assert plan.found == 0
    [failure] = plan.failures
    assert (failure["spec_uri"], failure["stage"]) == ("slurm", "discover")
    assert failure["error"].startswith("SlurmError: `") and failure["error"].endswith(
        "failed (exit 1): sacct: error: slurmdbd: Connection refused")
