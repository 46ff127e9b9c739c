"""firstfault.toml (docs/DESIGN.md §5): every key optional, unknown keys rejected with file and key."""
from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from firstfault.errors import BadInput


@dataclass(frozen=True)
class AttributionSettings:
    skew_tolerance_s: float = 2.0
    lookback_s: float = 1800.0
    grace_s: float = 300.0
    ambiguity_margin: float = 0.1
    late_penalty: float = 0.5
    corroboration_bonus: float = 0.05
    # the cause model (docs/DESIGN.md §4.2)
    survived_s: float = 300.0           # training progressed this long after a cause: it did not end the job
    inadmissible_penalty: float = 0.25  # score factor of a survived cause, or an advisory one nothing witnessed
    witness_ratio: float = 3.0          # a contender named by this many times more peers than any other decides
    min_witnesses: int = 3              # ... when at least this many peers name it
    kill_wait_s: float = 30.0           # the scheduler's end state (no line): its signal came up to this long before the end
    gpu_history_days: float = 14.0      # an "application or GPU" Xid on one GPU in other workloads this recently: hardware
    # history-aware actions (docs/DESIGN.md §4.3); budgets are counted since the workload last made progress
    max_restarts: int = 3           # failed attempts without progress after which the action is `stop`
    same_root_limit: int = 2        # the same root this many times without progress in between -> `stop`
    confirmation_retries: int = 1   # plain restarts granted to a root that cannot be localised (NVL72 peer, `group`)


@dataclass(frozen=True)
class LandingSettings:
    batch_bytes: int = 16 * 1024 * 1024  # ~7x its size while normalised: ~600 MB peak with two in flight
    units_in_flight: int = 2  # the next unit is normalised on the other core while one is written
    max_line_bytes: int = 64 * 1024
    batch_lines: int = 256 * 1024  # a unit's rows, whatever its bytes: 16 MB of empty lines would be 16 M rows
    workers: int = 0  # processes landing attempts in parallel; 0 = one per core when the input is big
    part_bytes: int = 128 * 1024 * 1024  # an application log bigger than this is landed in parts by one process per core
    max_glob_files: int = 20_000  # a path pattern of a context matching more files is reported (error) and not read
    glob_seconds: float = 20.0  # an attempt's log (metrics, dump) patterns not expanded by then are reported and not read


@dataclass(frozen=True)
class LakeSettings:
    root: str = "./lake"
    # object-store lakes (s3://bucket/prefix); empty = the usual AWS env vars / credential chain
    endpoint_url: str = ""
    key: str = ""
    secret: str = ""
    region: str = ""

    def storage_options(self) -> dict:
        """fsspec storage options for the lake root (s3fs keys); {} for local lakes."""
        if not self.root.startswith(("s3://", "s3a://")):
            return {}
        opts: dict = {}
        if self.key:
            opts["key"] = self.key
        if self.secret:
            opts["secret"] = self.secret
        client = {k: v for k, v in (("endpoint_url", self.endpoint_url), ("region_name", self.region)) if v}
        if client:
            opts["client_kwargs"] = client
        return opts


@dataclass(frozen=True)
class WarehouseSettings:
    path: str = "./firstfault.duckdb"


@dataclass(frozen=True)
class RuleSettings:
    dirs: tuple[str, ...] = ()  # site rule folders (*.sql, *.py rules and their fixture *.yaml), after the built-ins


@dataclass(frozen=True)
class PatternSettings:
    dirs: tuple[str, ...] = ()  # site extraction pattern folders (*.yaml), merged after the built-in patterns


@dataclass(frozen=True)
class CatalogSettings:
    paths: tuple[str, ...] = ()  # fsspec globs of static contexts the nightly run discovers (relative: to the config file)


@dataclass(frozen=True)
class ScheduleSettings:
    cron: str = "0 2 * * *"  # `firstfault serve`: when the nightly deployment runs (UTC)
    shards: int = 0          # shard tasks per night; 0 = automatic


@dataclass(frozen=True)
class FleetSettings:
    # fleet aggregates (warehouse/fleet.sql, warehouse/fleet.py); windows end at the run day (UTC)
    short_window_days: int = 7       # node_offenders *_7d columns
    long_window_days: int = 30       # node_offenders *_30d columns, port_hotspots window
    drain_count: int = 2             # hardware attributions on one node/GPU within drain_window_days -> `drain`
    drain_window_days: int = 14
    xid_repeat_count: int = 2        # the same Xid on the same GPU in this many attempts (long window) -> `hardware_inspection`
    xid_repeat_exempt: str = "94"    # comma-separated Xids that never escalate to inspection (94: contained ECC)
    watch_count: int = 1             # attributed failures (long window) -> `watch`
    incident_min_attempts: int = 2   # attempts implicating the same node/GPU/port on one UTC day -> an incident
    nic_min_peers: int = 2           # counterparts of one NIC for a `nic` finding (fewer: the edge/link)
    switch_min_nodes: int = 2        # implicated nodes under one switch (port) for a `switch` finding
    topology: str = ""               # YAML/CSV node -> leaf switch, switch port (relative: to the config file)


@dataclass(frozen=True)
class RemoteSettings:
    """What every HTTP connector section shares (connectors/http.py). Secrets are read from the config or from the
    environment variable named by *_env, and are never logged."""
    url: str = ""                 # empty = the connector is off
    timeout_s: float = 30.0       # per request (connect + read)
    retries: int = 3              # extra tries on a transient error (timeout, connection error, 429, 5xx); never on other 4xx
    backoff_s: float = 0.5        # first back-off; doubles per retry
    token: str = ""               # bearer token ...
    token_env: str = ""           # ... or the name of the variable holding it
    token_file: str = ""          # ... or a file holding it (a Kubernetes service-account token)
    username: str = ""            # basic auth
    password_env: str = ""        # variable holding the basic-auth password
    ca_file: str = ""             # PEM bundle to verify the server with
    cert_file: str = ""           # client certificate (mutual TLS) ...
    key_file: str = ""            # ... and its key
    insecure_skip_verify: bool = False


@dataclass(frozen=True)
class KubernetesSettings(RemoteSettings):
    """The Kubernetes API (`url` = https://APISERVER): Kueue/JobSet/Pod objects and pod logs. In a pod, point
    `token_file` and `ca_file` at /var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt}."""
    gpu_label: str = "nvidia.com/gpu.product"  # node label naming the GPU model


@dataclass(frozen=True)
class KueueSettings:
    """The Kueue scheduler connector (connectors/kueue.py): from captured `kubectl get ... -o json` documents when
    `documents` names a folder, else from the API of [kubernetes] when its `url` is set."""
    documents: str = ""               # folder of captured Workload/JobSet/Job/Pod/Node documents (relative: to the config file)
    cluster: str = "default"          # the `cluster` part of attempt ids
    namespaces: tuple[str, ...] = ()  # where `discover` (nightly) looks for Workloads; empty = every namespace


@dataclass(frozen=True)
class LokiSettings(RemoteSettings):
    """Loki (`url` = http://LOKI:3100): the logs of an attempt's nodes over its window (connectors/loki.py)."""
    node_label: str = "host"      # the stream label that names the node
    # source name -> LogQL stream selector without the node matcher, e.g. {syslog = '{job="syslog"}'}
    streams: dict = field(default_factory=dict)
    limit: int = 5000             # entries per request; at most the server's max_entries_limit_per_query
    lookback_s: float = 1800.0    # fetched this long before the attempt's start ...
    grace_s: float = 300.0        # ... and after its end
    org_id: str = ""              # X-Scope-OrgID of a multi-tenant Loki


@dataclass(frozen=True)
class PrometheusSettings(RemoteSettings):
    """Prometheus (`url` = http://PROMETHEUS:9090): DCGM and InfiniBand series of an attempt's nodes over its window,
    staged as metrics CSV (connectors/prometheus.py)."""
    host_label: str = "instance"      # the label naming the node where a query says `{nodes}` (`{nodes:LABEL}` names another)
    host_regex: str = r"^([^:]+)"     # its first group is the node name (default: the label value without `:9100`)
    # metric name -> PromQL with a `{nodes}` matcher; merged over the built-in DCGM/InfiniBand queries, "" drops one
    queries: dict = field(default_factory=dict)
    step_s: float = 0.0               # query resolution; 0 = from the window (<= 11,000 points, >= scrape_interval_s)
    scrape_interval_s: float = 15.0   # no finer step than the exporters are scraped at
    lookback_s: float = 1800.0        # fetched this long before the attempt's start (counters need a baseline) ...
    grace_s: float = 300.0            # ... and after its end


@dataclass(frozen=True)
class SlurmSettings:
    """The Slurm scheduler connector (connectors/slurm.py): `attribute --slurm` and nightly discovery through `sacct`
    (and `scontrol`, for the output files of jobs the controller still holds). Off unless `enabled`."""
    enabled: bool = False     # a Slurm client on PATH alone never turns it on (nightly runs would start querying sacct)
    sacct: str = "sacct"      # command name or path
    scontrol: str = "scontrol"
    cluster: str = ""         # `sacct -M CLUSTER` (empty = the local cluster)
    timeout_s: float = 60.0   # per sacct/scontrol call
    json: bool = False        # read `sacct --json` instead of --parsable2 (exit codes still from text on 21.08-22.05)
    partitions: tuple[str, ...] = ()  # nightly discovery only in these partitions (empty = all)
    # source -> path template with {job_id} {job_id_raw} {job_name} {cluster} {user} {attempt} {workdir}; {node} stays
    logs: dict = field(default_factory=dict)
    gpus_per_node: int = 8    # when accounting records no gres/gpu TRES (AccountingStorageTRES without gres/gpu)
    gpu_model: str = ""       # ... and no GPU type
    timezone: str = "UTC"     # zone of job-output stamps without one (Slurm prints the cluster's local time)


@dataclass(frozen=True)
class ApiSettings:
    """`firstfault api` (firstfault/api.py): who may call it, what a request may name, how much work it may ask for.
    Limits are at least 4x the benchmarked sizes (docs/performance.md), so a real attempt never meets them."""
    token_env: str = ""           # the variable holding the bearer token clients must send ...
    token_file: str = ""          # ... or a file holding it; without either the server starts only with --no-auth on loopback
    # folders (or URL prefixes such as s3://bucket/logs) request paths must resolve into; [] = no path specs at all
    allowed_roots: tuple[str, ...] = ()
    max_body_bytes: int = 4 * 1024 * 1024
    max_nodes: int = 1024
    max_ranks: int = 8192             # listed ranks, and nodes x gpus_per_node
    max_gpus_per_node: int = 64
    max_paths: int = 256              # entries of logs, metrics and flight_recorder together
    max_files_per_glob: int = 4096
    max_bytes_per_attempt: int = 8 * 1024 ** 3
    timeout_s: float = 900.0          # per request, waiting for the attribution lock included
    header_timeout_s: float = 10.0    # a connection that sends no whole request head within this is closed


@dataclass(frozen=True)
class AutomationSettings:
    """`firstfault epilog` (Slurm's EpilogSlurmctld) queues failed jobs; `firstfault worker` attributes them
    (connectors/slurm_epilog.py, firstfault/worker.py, docs/automation.md)."""
    spool_dir: str = "./spool"        # the epilog writes here (SlurmUser must be able to), the worker takes from here
    queue_all: bool = False           # also queue jobs that ended with exit code 0:0 and derived exit code 0
    settle_s: float = 30.0            # wait after the job's end so late log lines and the accounting record are written
    poll_s: float = 2.0               # how often the worker looks at the spool
    retry_s: float = 30.0             # wait before the next try while the job is not final in accounting or a log is missing
    give_up_s: float = 600.0          # after this long since the epilog the last verdict stands (no verdict: set aside)
    outputs: tuple[str, ...] = ()     # verdict copies besides the warehouse: sqlite:PATH, jsonl:PATH
    report_url: str = ""              # base URL of `firstfault report` pages, linked from the chat text


@dataclass(frozen=True)
class WebhookSettings(RemoteSettings):
    """A verdict sink: each verdict the worker makes is POSTed to `url` as {"text": ..., "verdict": {...}}."""


@dataclass(frozen=True)
class ActionSettings:
    """Turning `drain_node` recommendations into drains (Slurm) and cordons (Kubernetes) within a budget
    (warehouse/actions.py). Off unless `enabled`; `dry_run` only records what would be done."""
    enabled: bool = False
    dry_run: bool = True
    min_confidence: str = "high"      # low | medium | high
    max_nodes_per_hour: int = 1       # drains within any hour, over all attempts
    max_fraction: float = 0.1         # at most this share of the cluster's nodes drained by firstfault at once (rounded up)
    exclude: tuple[str, ...] = ()     # node names or shell patterns (gpu-0[1-4]) never drained


@dataclass(frozen=True)
class Config:
    lake: LakeSettings = field(default_factory=LakeSettings)
    warehouse: WarehouseSettings = field(default_factory=WarehouseSettings)
    attribution: AttributionSettings = field(default_factory=AttributionSettings)
    landing: LandingSettings = field(default_factory=LandingSettings)
    rules: RuleSettings = field(default_factory=RuleSettings)
    patterns: PatternSettings = field(default_factory=PatternSettings)
    catalog: CatalogSettings = field(default_factory=CatalogSettings)
    schedule: ScheduleSettings = field(default_factory=ScheduleSettings)
    fleet: FleetSettings = field(default_factory=FleetSettings)
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    kueue: KueueSettings = field(default_factory=KueueSettings)
    loki: LokiSettings = field(default_factory=LokiSettings)
    prometheus: PrometheusSettings = field(default_factory=PrometheusSettings)
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    api: ApiSettings = field(default_factory=ApiSettings)
    automation: AutomationSettings = field(default_factory=AutomationSettings)
    webhook: WebhookSettings = field(default_factory=WebhookSettings)
    actions: ActionSettings = field(default_factory=ActionSettings)
    plugins: dict = field(default_factory=dict)  # [plugins.NAME] tables, handed as they are to plug-in connectors


SECTIONS = {
    "lake": LakeSettings, "warehouse": WarehouseSettings, "attribution": AttributionSettings, "landing": LandingSettings,
    "rules": RuleSettings, "patterns": PatternSettings, "catalog": CatalogSettings, "schedule": ScheduleSettings,
    "fleet": FleetSettings, "kubernetes": KubernetesSettings, "kueue": KueueSettings, "loki": LokiSettings,
    "prometheus": PrometheusSettings, "slurm": SlurmSettings, "api": ApiSettings, "automation": AutomationSettings,
    "webhook": WebhookSettings, "actions": ActionSettings,
}


CONFIG_ENV = "FIRSTFAULT_CONFIG"
DEFAULT_CONFIG = "firstfault.toml"
DEMO_CONFIG_HEADER = "# written by `firstfault demo`"  # the first line of the config `firstfault demo` writes


def find_config(path: str | None) -> str | None:
    """The config file a command reads: `path` (--config), else $FIRSTFAULT_CONFIG, else ./firstfault.toml when it
    exists; None: no file, every setting at its default."""
    if path:
        return path
    if os.environ.get(CONFIG_ENV):
        return os.environ[CONFIG_ENV]
    return DEFAULT_CONFIG if Path(DEFAULT_CONFIG).exists() else None


def demo_configs() -> list[Path]:
    """The configs `firstfault demo` wrote in the folders of the current one (`firstfault-demo/firstfault.toml`)."""
    found = []
    for candidate in sorted(Path(".").glob(f"*/{DEFAULT_CONFIG}")):
        try:
            with candidate.open(encoding="utf-8") as f:
                if f.readline().startswith(DEMO_CONFIG_HEADER):
                    found.append(candidate)
        except (OSError, UnicodeDecodeError):  # not a config of the demo's
            continue
    return found


NO_CONFIG = f"no config file was read (none given with --config or {CONFIG_ENV}, no ./{DEFAULT_CONFIG})"


def load_config(path: str | None) -> Config:
    path = find_config(path)
    if path is None:
        return Config()
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise BadInput(path, None, "file not found") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise BadInput(path, None, f"not valid TOML: {e}") from None
    built = {}
    for name, value in doc.items():
        if name == "plugins":
            if not isinstance(value, dict) or not all(isinstance(v, dict) for v in value.values()):
                raise BadInput(path, "plugins", "must hold one table per plug-in: [plugins.NAME]")
            built[name] = value
            continue
        if name not in SECTIONS:
            raise BadInput(path, name, "unknown section")
        built[name] = _section(path, name, SECTIONS[name], value)
    base = Path(path).resolve().parent
    for name in ("rules", "patterns"):
        if name in built:
            built[name] = replace(built[name], dirs=_resolve_dirs(path, f"{name}.dirs", base, built[name].dirs))
    def relative_to_config(p: str) -> str:  # URLs, absolute and empty paths stay as they are
        return p if not p or "://" in p or Path(p).expanduser().is_absolute() else str(base / p)

    if "catalog" in built:
        built["catalog"] = replace(built["catalog"], paths=tuple(relative_to_config(p) for p in built["catalog"].paths))
    if "kueue" in built:
        built["kueue"] = replace(built["kueue"], documents=relative_to_config(built["kueue"].documents))
    if "fleet" in built:
        built["fleet"] = replace(built["fleet"], topology=relative_to_config(built["fleet"].topology))
    if "api" in built:
        built["api"] = replace(built["api"], token_file=relative_to_config(built["api"].token_file),
                               allowed_roots=tuple(relative_to_config(p) for p in built["api"].allowed_roots))
    return Config(**built)


def _resolve_dirs(path: str, key: str, base: Path, dirs: tuple[str, ...]) -> tuple[str, ...]:
    """Folders relative to the config file's folder; each must exist."""
    out = []
    for d in dirs:
        folder = Path(d).expanduser()
        folder = folder if folder.is_absolute() else base / folder
        if not folder.is_dir():
            raise BadInput(path, key, f"no such directory: {folder}")
        out.append(str(folder))
    return tuple(out)


def _section(path: str, name: str, cls, value):
    if not isinstance(value, dict):
        raise BadInput(path, name, "must be a table")
    known = {f.name: f for f in fields(cls)}
    kwargs = {}
    for key, v in value.items():
        if key not in known:
            raise BadInput(path, f"{name}.{key}", "unknown key")
        want = type(getattr(cls(), key))
        if want is dict:
            if not isinstance(v, dict) or not all(isinstance(x, (str, int, float, bool)) for x in v.values()):
                raise BadInput(path, f"{name}.{key}", "must be a table of plain values")
            kwargs[key] = dict(v)
            continue
        if want is tuple:
            if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
                raise BadInput(path, f"{name}.{key}", "must be a list of folder names")
            kwargs[key] = tuple(v)
            continue
        if want is float and isinstance(v, int) and not isinstance(v, bool):
            v = float(v)
        if not isinstance(v, want) or (isinstance(v, bool) and want is not bool):
            raise BadInput(path, f"{name}.{key}", f"must be {want.__name__}")
        kwargs[key] = v
    return cls(**kwargs)


def resolve_config(path: str | None, *, lake_root: str | None = None, warehouse_path: str | None = None) -> Config:
    """The config file with command-line overrides applied."""
    config = load_config(path)
    if lake_root:
        config = replace(config, lake=replace(config.lake, root=lake_root))
    if warehouse_path:
        config = replace(config, warehouse=WarehouseSettings(path=warehouse_path))
    return config
