-- The firstfault warehouse: the verdicts, evidence, events and rule hits of every attributed attempt, and the runs
-- that loaded them. One DuckDB file, one writer at a time; every load replaces the rows of the attempts it carries, so
-- re-runs add nothing.

CREATE TABLE IF NOT EXISTS attributions (
    attempt_id        VARCHAR PRIMARY KEY,
    workload_id       VARCHAR NOT NULL,
    attempt           BIGINT NOT NULL,
    cluster           VARCHAR NOT NULL,
    state             VARCHAR,
    verdict           VARCHAR NOT NULL,          -- attributed | ambiguous | unattributed | not_failed
    domain            VARCHAR,
    subdomain         VARCHAR,
    root_cause        STRUCT(rule VARCHAR, event VARCHAR, code BIGINT, node VARCHAR, gpu VARCHAR, rank INTEGER, ts VARCHAR, summary VARCHAR),
    culprit_nodes     VARCHAR[],
    affected_nodes    VARCHAR[],
    symptoms          STRUCT(event VARCHAR, node VARCHAR, rank INTEGER, ts VARCHAR, summary VARCHAR, uri VARCHAR, line BIGINT)[],
    candidates        STRUCT(domain VARCHAR, subdomain VARCHAR, nodes VARCHAR[], score DOUBLE, rule VARCHAR)[],
    evidence          STRUCT(role VARCHAR, source VARCHAR, uri VARCHAR, line BIGINT, ts VARCHAR, text VARCHAR, locator VARCHAR, kinds VARCHAR[])[],
    quality           STRUCT(confidence VARCHAR, reasons VARCHAR[], sources_present VARCHAR[], sources_missing VARCHAR[], clock_skew_s DOUBLE),
    connector_reports STRUCT(connector VARCHAR, source VARCHAR, uri VARCHAR, status VARCHAR, rows BIGINT, reason VARCHAR)[],
    culprit_ranks     INTEGER[],
    granularity       VARCHAR,
    action            VARCHAR,
    rules_version     VARCHAR,
    schema_version    VARCHAR,
    day               VARCHAR,                   -- UTC date of the attempt's start
    start_ts          TIMESTAMP,
    end_ts            TIMESTAMP,
    gpu_model         VARCHAR,
    gpus_per_node     INTEGER,
    nodes             VARCHAR[]
);

CREATE TABLE IF NOT EXISTS attribution_evidence (
    attempt_id VARCHAR NOT NULL,
    position   INTEGER NOT NULL,                  -- order inside the verdict's evidence list
    role       VARCHAR NOT NULL,                  -- root_cause | corroboration | confirmation | symptom
    rule_id    VARCHAR,
    event_id   VARCHAR,
    kind       VARCHAR,                           -- the kind of the event the role comes from
    kinds      VARCHAR[],                         -- the kinds of every event read from this line, sorted
    node       VARCHAR,
    rank       INTEGER,
    source     VARCHAR,
    uri        VARCHAR,
    line       BIGINT,
    ts         TIMESTAMP,
    text       VARCHAR,
    locator    VARCHAR,
    PRIMARY KEY (attempt_id, position)
);

CREATE TABLE IF NOT EXISTS events (
    attempt_id VARCHAR NOT NULL, event_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, code BIGINT, code_text VARCHAR,
    severity VARCHAR, node VARCHAR, rank INTEGER, local_rank INTEGER, gpu VARCHAR, ts TIMESTAMP, ts_quality VARCHAR,
    message VARCHAR, peer_addr VARCHAR, peer_node VARCHAR, device VARCHAR, port INTEGER, link INTEGER, pg VARCHAR,
    seq BIGINT, op_type VARCHAR, numel_in BIGINT, numel_out BIGINT, timeout_ms BIGINT, ran_for_ms BIGINT,
    last_enqueued BIGINT, last_completed BIGINT, exit_code INTEGER, signal INTEGER, pid BIGINT, iteration BIGINT,
    fields VARCHAR, source VARCHAR, uri VARCHAR, line BIGINT, locator VARCHAR, raw VARCHAR,
    role VARCHAR,                                 -- the strongest role a rule gave it (root > confirmation > symptom > ignored)
    PRIMARY KEY (attempt_id, event_id)
);

-- Training progress per attempt, file, node, rank and minute (the markers summarised; each rank's first and last
-- marker are also in `events`). Attempts loaded by an earlier version have none: readers fall back to their
-- `progress` events.
CREATE TABLE IF NOT EXISTS progress (
    attempt_id VARCHAR NOT NULL, uri VARCHAR, node VARCHAR, rank INTEGER, minute TIMESTAMP, markers BIGINT, iterations BIGINT,
    first_ts TIMESTAMP, last_ts TIMESTAMP, first_iteration BIGINT, last_iteration BIGINT, max_iteration BIGINT,
    first_event_id VARCHAR, last_event_id VARCHAR
);

CREATE TABLE IF NOT EXISTS connector_reports (
    attempt_id VARCHAR NOT NULL, connector VARCHAR NOT NULL, source VARCHAR, uri VARCHAR, status VARCHAR NOT NULL,
    rows BIGINT, reason VARCHAR, fingerprint VARCHAR, lines_malformed BIGINT, lines_binary BIGINT, lines_truncated BIGINT
);

-- Every rule hit of every attempt (rule outputs, DESIGN §4): why each event got its role.
CREATE TABLE IF NOT EXISTS rule_hits (
    attempt_id VARCHAR NOT NULL, event_id VARCHAR, rule_id VARCHAR NOT NULL, role VARCHAR NOT NULL, domain VARCHAR,
    subdomain VARCHAR, culprit_node VARCHAR, culprit_rank INTEGER, gpu VARCHAR, granularity VARCHAR, strength DOUBLE,
    ts TIMESTAMP, summary VARCHAR, action VARCHAR
);

CREATE TABLE IF NOT EXISTS xid_catalog (
    code BIGINT PRIMARY KEY, mnemonic VARCHAR, description VARCHAR, immediate_action VARCHAR,
    investigatory_action VARCHAR, category VARCHAR, typical_domain VARCHAR, typical_subdomain VARCHAR, notes VARCHAR
);

CREATE TABLE IF NOT EXISTS runs (
    run_id VARCHAR PRIMARY KEY, flow VARCHAR, started_at TIMESTAMP, finished_at TIMESTAMP, attempts BIGINT,
    rules_version VARCHAR, lake_root VARCHAR
);

-- Incremental runs (nightly): sha256 over the spec and its resolved input files (connectors/fingerprint.py). Older
-- warehouses gain the column here.
ALTER TABLE attributions ADD COLUMN IF NOT EXISTS input_fingerprint VARCHAR;
-- the strongest alternative cause of an attributed verdict and why it lost (docs/verdict.md); null before this column
ALTER TABLE attributions ADD COLUMN IF NOT EXISTS why_not
    STRUCT(domain VARCHAR, subdomain VARCHAR, node VARCHAR, score DOUBLE, position INTEGER, reason VARCHAR, detail VARCHAR);
ALTER TABLE attribution_evidence ADD COLUMN IF NOT EXISTS kinds VARCHAR[];  -- warehouses from before kinds (struct fields: store.py)
ALTER TABLE connector_reports ADD COLUMN IF NOT EXISTS lines_skipped BIGINT;  -- readable lines of a file skipped as binary
ALTER TABLE runs ADD COLUMN IF NOT EXISTS run_date VARCHAR;          -- nightly: the UTC day whose attempts ended
ALTER TABLE runs ADD COLUMN IF NOT EXISTS found BIGINT;              -- nightly: attempts discovered for run_date
ALTER TABLE runs ADD COLUMN IF NOT EXISTS skipped BIGINT;            -- nightly: unchanged since the last attribution
ALTER TABLE runs ADD COLUMN IF NOT EXISTS failed BIGINT;             -- nightly: attempts recorded in run_failures

-- Attempts a run could not attribute (malformed spec, unreadable input, connector error): one row each, the night goes on.
CREATE TABLE IF NOT EXISTS run_failures (
    run_id VARCHAR NOT NULL, attempt_id VARCHAR, spec_uri VARCHAR, stage VARCHAR NOT NULL, error VARCHAR,
    recorded_at TIMESTAMP
);

-- What firstfault did, would have done (dry run) or refused about a `drain_node` recommendation (warehouse/actions.py):
-- one row per decision on one node; `firstfault actions resume ID` fills resumed_at.
CREATE SEQUENCE IF NOT EXISTS action_ids START 1;
CREATE TABLE IF NOT EXISTS actions (
    action_id BIGINT PRIMARY KEY DEFAULT nextval('action_ids'), decided_at TIMESTAMP NOT NULL, attempt_id VARCHAR NOT NULL,
    cluster VARCHAR, node VARCHAR, rule VARCHAR, kind VARCHAR NOT NULL, status VARCHAR NOT NULL, reason VARCHAR,
    command VARCHAR, resumed_at TIMESTAMP
);
