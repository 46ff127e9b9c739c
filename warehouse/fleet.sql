-- Fleet aggregates (repeat offenders, port hotspots, incidents, GPU-model trends), rebuilt from the warehouse by
-- warehouse/fleet.py in one transaction. Each block starts with a `-- block: <name>` line and is one statement.
-- Inputs prepared by fleet.py:
--   fleet_params  one row: run_day DATE and the [fleet] thresholds of firstfault.toml
--   topology      node, device (NULL = every NIC of the node), switch, switch_port (empty without a topology file)
-- Nothing here reads the clock: the windows end at run_day (default: the latest attempt day in the warehouse), so a
-- rebuild of the same warehouse gives the same rows.

-- block: _fleet_attempts
-- Every attempt up to the run day, with the UTC day its failure counts on (end, else start) and its age in days.
CREATE OR REPLACE TEMP TABLE _fleet_attempts AS
SELECT a.*,
       coalesce(a.end_ts, a.start_ts, CAST(a.day AS TIMESTAMP)) AS fail_ts,
       coalesce(CAST(a.end_ts AS DATE), TRY_CAST(a.day AS DATE)) AS fail_day,
       p.run_day - coalesce(CAST(a.end_ts AS DATE), TRY_CAST(a.day AS DATE)) AS age_days
FROM attributions a, fleet_params p
WHERE coalesce(CAST(a.end_ts AS DATE), TRY_CAST(a.day AS DATE)) <= p.run_day;

-- block: _gpu_identity
-- GPU serial/UUID from `gpu_identity` events (NVRM "GPU at PCI:… GPU-uuid", "GPU serial number is …"), per attempt
-- and, as a fallback for attempts whose kernel log missed the boot lines, the latest one seen on that node and PCI id.
CREATE OR REPLACE TEMP TABLE _gpu_identity AS
WITH ids AS (
    SELECT attempt_id, node, gpu, ts,
           json_extract_string(fields, '$.uuid') AS uuid, json_extract_string(fields, '$.serial') AS serial
    FROM events
    WHERE kind = 'gpu_identity' AND node IS NOT NULL AND gpu IS NOT NULL
)
SELECT attempt_id, node, gpu, max(uuid) AS uuid, max(serial) AS serial, false AS latest FROM ids GROUP BY ALL
UNION ALL
SELECT NULL, node, gpu, arg_max(uuid, (coalesce(ts, TIMESTAMP '1970-01-01'), uuid)) FILTER (WHERE uuid IS NOT NULL),
       arg_max(serial, (coalesce(ts, TIMESTAMP '1970-01-01'), serial)) FILTER (WHERE serial IS NOT NULL), true
FROM ids GROUP BY node, gpu;

-- block: _culprits
-- One row per attempt and culprit: every culprit node of an attributed/ambiguous verdict, and the GPU of an attributed
-- root cause (keyed on its UUID/serial when known, so a swapped board starts a fresh history).
CREATE OR REPLACE TEMP TABLE _culprits AS
SELECT attempt_id, 'node' AS level, node, NULL::VARCHAR AS gpu, NULL::VARCHAR AS gpu_uuid, NULL::VARCHAR AS gpu_serial,
       verdict, domain, NULL::BIGINT AS xid, fail_ts, fail_day, age_days
FROM (SELECT *, unnest(culprit_nodes) AS node FROM _fleet_attempts WHERE verdict IN ('attributed', 'ambiguous'))
UNION ALL
SELECT a.attempt_id, 'gpu', a.root_cause.node, a.root_cause.gpu, coalesce(i.uuid, l.uuid), coalesce(i.serial, l.serial),
       a.verdict, a.domain, CASE WHEN a.root_cause.event = 'xid' THEN a.root_cause.code END, a.fail_ts, a.fail_day, a.age_days
FROM _fleet_attempts a
LEFT JOIN _gpu_identity i ON NOT i.latest AND i.attempt_id = a.attempt_id AND i.node = a.root_cause.node AND i.gpu = a.root_cause.gpu
LEFT JOIN _gpu_identity l ON l.latest AND l.node = a.root_cause.node AND l.gpu = a.root_cause.gpu
WHERE a.verdict = 'attributed' AND a.root_cause.node IS NOT NULL AND a.root_cause.gpu IS NOT NULL;

-- block: node_offenders
-- Repeat offenders: per node and per GPU, attributed failures by domain in the short and long
-- windows, and an escalating recommendation: the same Xid on the same GPU in >= xid_repeat_count attempts (not an
-- exempt Xid) -> hardware_inspection; >= drain_count hardware attributions within drain_window_days -> drain;
-- >= watch_count attributed failures in the long window -> watch; else none. A node inherits its GPUs' Xid repeats.
-- Worst first (`position` 1, last column), by the sort key the row shows: `severity` (3..0, the recommendation), then
-- `reason_count` (the count its `reason` states), then attributed failures and attempts in the long window, last seen.
CREATE OR REPLACE TABLE node_offenders AS
WITH p AS (SELECT * FROM fleet_params),
xid_gpu AS (
    SELECT node, gpu, coalesce(gpu_uuid, '') AS uuid_key, xid, count(DISTINCT attempt_id) AS n
    FROM _culprits, p
    WHERE level = 'gpu' AND xid IS NOT NULL AND NOT list_contains(p.xid_exempt, xid) AND age_days < p.long_window_days
    GROUP BY ALL
),
xid_best AS (  -- per GPU and per node: the most repeated Xid (lowest code on ties)
    SELECT 'gpu' AS level, node, gpu, uuid_key, max(n) AS xid_repeats, arg_min(xid, (-n, xid)) AS repeated_xid FROM xid_gpu GROUP BY ALL
    UNION ALL
    SELECT 'node', node, NULL, '', max(n), arg_min(xid, (-n, xid)) FROM xid_gpu GROUP BY node
),
agg AS (
    SELECT c.level, c.node, c.gpu, coalesce(c.gpu_uuid, '') AS uuid_key, max(c.gpu_uuid) AS gpu_uuid, max(c.gpu_serial) AS gpu_serial,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.age_days < p.short_window_days) AS failures_7d,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.age_days < p.long_window_days) AS failures_30d,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.domain = 'hardware' AND c.age_days < p.short_window_days) AS hardware_7d,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.domain = 'hardware' AND c.age_days < p.long_window_days) AS hardware_30d,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.domain = 'network' AND c.age_days < p.short_window_days) AS network_7d,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.domain = 'network' AND c.age_days < p.long_window_days) AS network_30d,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.domain = 'software' AND c.age_days < p.short_window_days) AS software_7d,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.domain = 'software' AND c.age_days < p.long_window_days) AS software_30d,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.domain = 'application' AND c.age_days < p.short_window_days) AS application_7d,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.domain = 'application' AND c.age_days < p.long_window_days) AS application_30d,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.domain = 'infrastructure' AND c.age_days < p.short_window_days) AS infrastructure_7d,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.domain = 'infrastructure' AND c.age_days < p.long_window_days) AS infrastructure_30d,
           count(*) FILTER (WHERE c.verdict = 'ambiguous' AND c.age_days < p.long_window_days) AS ambiguous_30d,
           count(*) FILTER (WHERE c.verdict = 'attributed' AND c.domain = 'hardware' AND c.age_days < p.drain_window_days) AS hardware_drain_window,
           count(*) FILTER (WHERE c.age_days < p.long_window_days) AS attempts_affected,
           list_sort(list(DISTINCT c.attempt_id) FILTER (WHERE c.age_days < p.long_window_days)) AS attempt_ids,
           min(c.fail_ts) AS first_seen, max(c.fail_ts) AS last_seen,
           min(p.run_day) AS run_day
    FROM (SELECT DISTINCT * FROM _culprits) c, p  -- one row per attempt and culprit: count(*) counts attempts
    GROUP BY c.level, c.node, c.gpu, coalesce(c.gpu_uuid, '')
    HAVING count(*) FILTER (WHERE c.age_days < p.long_window_days) > 0
),
decided AS (
    SELECT g.*, coalesce(x.xid_repeats, 0) AS xid_repeats, x.repeated_xid,
           CASE WHEN coalesce(x.xid_repeats, 0) >= p.xid_repeat_count THEN 'hardware_inspection'
                WHEN g.hardware_drain_window >= p.drain_count THEN 'drain'
                WHEN g.failures_30d >= p.watch_count THEN 'watch'
                ELSE 'none' END AS recommendation,
           CASE WHEN coalesce(x.xid_repeats, 0) >= p.xid_repeat_count
                    THEN printf('Xid %d in %d attempts on this %s within %d days', x.repeated_xid, x.xid_repeats, g.level, p.long_window_days)
                WHEN g.hardware_drain_window >= p.drain_count
                    THEN printf('%d hardware attributions within %d days', g.hardware_drain_window, p.drain_window_days)
                WHEN g.failures_30d >= p.watch_count
                    THEN printf('%d attributed failure(s) within %d days', g.failures_30d, p.long_window_days)
                ELSE printf('named only by ambiguous verdicts (%d) within %d days', g.ambiguous_30d, p.long_window_days) END AS reason,
           CASE WHEN coalesce(x.xid_repeats, 0) >= p.xid_repeat_count THEN x.xid_repeats
                WHEN g.hardware_drain_window >= p.drain_count THEN g.hardware_drain_window
                WHEN g.failures_30d >= p.watch_count THEN g.failures_30d
                ELSE g.ambiguous_30d END AS reason_count
    FROM agg g CROSS JOIN p
    LEFT JOIN xid_best x ON x.level = g.level AND x.node = g.node AND x.gpu IS NOT DISTINCT FROM g.gpu AND x.uuid_key = g.uuid_key
)
SELECT level, node, gpu, gpu_uuid, gpu_serial, run_day, recommendation,
       CASE recommendation WHEN 'hardware_inspection' THEN 3 WHEN 'drain' THEN 2 WHEN 'watch' THEN 1 ELSE 0 END AS severity,
       reason, reason_count, failures_7d, failures_30d, hardware_7d, hardware_30d, network_7d, network_30d, software_7d, software_30d,
       application_7d, application_30d, infrastructure_7d, infrastructure_30d, ambiguous_30d, hardware_drain_window,
       xid_repeats, repeated_xid, attempts_affected, attempt_ids, first_seen, last_seen, row_number() OVER w AS position
FROM decided
WINDOW w AS (ORDER BY CASE recommendation WHEN 'hardware_inspection' THEN 0 WHEN 'drain' THEN 1 WHEN 'watch' THEN 2 ELSE 3 END,
                      reason_count DESC, failures_30d DESC, attempts_affected DESC, last_seen DESC,
                      level DESC, node, gpu NULLS FIRST, uuid_key)
ORDER BY position;

-- block: _net_edges
-- Network implications: one row per NCCL NET/IB completion error (reporter host + its HCA/port,
-- the peer resolved to a node, else its address; WR_FLUSH_ERR status 5 is secondary and left out), per kernel/metric
-- link outage (ib_link down, ib_port_down, ib_port_flap: one end, no peer), and per root cause of domain network.
-- Attempts attributed to another domain are left out: their NET/IB errors are the cascade of that cause (a GPU that
-- fell off the bus makes its peers' QPs fail), not evidence against the fabric (NVIDIA/nccl#795).
CREATE OR REPLACE TEMP TABLE _net_edges AS
SELECT e.attempt_id, e.event_id, e.kind, e.node AS host, e.device, e.port, coalesce(e.peer_node, e.peer_addr) AS peer,
       coalesce(e.ts, a.fail_ts) AS ts, a.verdict, a.domain, a.fail_day, a.age_days
FROM events e JOIN _fleet_attempts a USING (attempt_id)
WHERE e.node IS NOT NULL
  AND ((e.kind = 'nccl_net_ib' AND coalesce(e.code, -1) <> 5)
       OR (e.kind = 'ib_link' AND e.code_text = 'down')
       OR e.kind IN ('ib_port_down', 'ib_port_flap'))
  AND coalesce(e.peer_node, '') <> e.node
  AND NOT (a.verdict = 'attributed' AND coalesce(a.domain, '') <> 'network')
UNION ALL
SELECT attempt_id, 'root_cause', 'root_cause', root_cause.node, NULL, NULL, NULL, fail_ts, verdict, domain, fail_day, age_days
FROM _fleet_attempts
WHERE verdict = 'attributed' AND domain = 'network' AND root_cause.node IS NOT NULL;

-- block: _net_endpoints
-- Both ends of every edge (the peer's HCA is not printed: its NIC key is the host), placed on the topology: an entry
-- for the exact (node, device) wins over the node's catch-all entry (device NULL).
CREATE OR REPLACE TEMP TABLE _net_endpoints AS
WITH ends AS (
    SELECT attempt_id, event_id, host AS node, device, port, peer AS other, ts, verdict, domain, fail_day, age_days FROM _net_edges
    UNION ALL
    SELECT attempt_id, event_id, peer, NULL, NULL, host, ts, verdict, domain, fail_day, age_days FROM _net_edges WHERE peer IS NOT NULL
)
SELECT e.*, e.node || coalesce('/' || e.device || coalesce(':' || e.port, ''), '') AS nic,
       coalesce(t1.switch, t2.switch) AS switch, coalesce(t1.switch_port, t2.switch_port) AS switch_port
FROM ends e
LEFT JOIN topology t1 ON t1.node = e.node AND t1.device = e.device
LEFT JOIN topology t2 ON t2.node = e.node AND t2.device IS NULL;

-- block: port_hotspots
-- C4D-style localisation over the long window: per NIC (host[/HCA:port]), per link (host pair), and with a topology
-- per switch port and per switch. `finding` says what the pattern points at: a NIC with >= nic_min_peers counterparts
-- -> nic (one counterpart -> link); a switch (port) with >= switch_min_nodes implicated nodes -> that switch (port),
-- else the single node's nic; a switch most of whose attempts go through one port -> that switch_port. Worst first:
-- rows whose finding is their own level (a row pointing elsewhere is only a pointer; a port's single NIC is the same
-- link), attempts implicated, the most specific level (switch_port, switch, nic, link), then key.
CREATE OR REPLACE TABLE port_hotspots AS
WITH p AS (SELECT * FROM fleet_params),
ep AS (SELECT e.* FROM _net_endpoints e, p WHERE e.age_days < p.long_window_days),
keyed AS (
    SELECT 'nic' AS level, nic AS key, * FROM ep
    UNION ALL
    SELECT 'switch_port', switch || '/' || switch_port, * FROM ep WHERE switch IS NOT NULL AND switch_port IS NOT NULL
    UNION ALL
    SELECT 'switch', switch, * FROM ep WHERE switch IS NOT NULL
    UNION ALL
    SELECT 'link', least(node, other) || ' <-> ' || greatest(node, other), * FROM ep WHERE other IS NOT NULL AND node < other
),
agg AS (
    SELECT level, key,
           count(DISTINCT attempt_id) AS attempts,
           count(DISTINCT attempt_id || '|' || least(node, coalesce(other, node)) || '|' || greatest(node, coalesce(other, node))) AS edges,
           count(DISTINCT attempt_id || '|' || event_id) AS events,
           count(DISTINCT other) AS counterparts,
           count(DISTINCT node) AS nodes,
           list_sort(list(DISTINCT node)) AS node_list,
           list_sort(list(DISTINCT attempt_id)) AS attempt_ids,
           count(DISTINCT attempt_id) FILTER (WHERE verdict = 'attributed' AND domain = 'network') AS attributed_network,
           count(DISTINCT attempt_id) FILTER (WHERE verdict = 'ambiguous') AS ambiguous,
           count(DISTINCT attempt_id) FILTER (WHERE verdict = 'unattributed') AS unattributed,
           count(DISTINCT attempt_id) FILTER (WHERE verdict = 'not_failed') AS not_failed,
           min(ts) AS first_seen, max(ts) AS last_seen
    FROM keyed
    GROUP BY level, key
),
busiest_port AS (
    SELECT switch, max(attempts) AS attempts
    FROM (SELECT switch, switch_port, count(DISTINCT attempt_id) AS attempts FROM ep
          WHERE switch IS NOT NULL AND switch_port IS NOT NULL GROUP BY ALL)
    GROUP BY switch
),
found AS (
    SELECT a.*,
           CASE a.level
               WHEN 'nic' THEN CASE WHEN a.counterparts >= p.nic_min_peers OR a.counterparts = 0 THEN 'nic' ELSE 'link' END
               WHEN 'link' THEN 'link'
               WHEN 'switch' THEN CASE WHEN a.nodes < p.switch_min_nodes THEN 'nic'
                                       -- one port behind most of the switch's attempts: the port (its peers under the
                                       -- same switch are implicated only as its counterparts), not the switch
                                       WHEN 2 * coalesce(b.attempts, 0) > a.attempts THEN 'switch_port'
                                       ELSE 'switch' END
               ELSE CASE WHEN a.nodes >= p.switch_min_nodes THEN a.level ELSE 'nic' END
           END AS finding,
           p.run_day
    FROM agg a CROSS JOIN p LEFT JOIN busiest_port b ON a.level = 'switch' AND b.switch = a.key
)
SELECT level, key, finding, attempts, edges, events, counterparts, nodes, node_list, attempt_ids, attributed_network,
       ambiguous, unattributed, not_failed, first_seen, last_seen, run_day, row_number() OVER w AS position
FROM found
-- a port row pointing at the one NIC behind it stays a hotspot: port, cable and NIC are one link
WINDOW w AS (ORDER BY (finding = level OR (level = 'switch_port' AND finding = 'nic')) DESC, attempts DESC,
                      CASE level WHEN 'switch_port' THEN 0 WHEN 'switch' THEN 1 WHEN 'nic' THEN 2 ELSE 3 END,
                      counterparts DESC, edges DESC, key)
ORDER BY position;

-- block: _trend_counts
-- Failures and exposure per GPU model x ISO week (of the attempt start) x domain. Exposure counts ALL attempts, failed
-- or not: gpus_per_node x len(nodes) x hours(end - start). Domain `unknown` = failed without a domain (unattributed,
-- mixed ambiguous), `all` = every failed attempt. Every domain gets a row (k = 0 included). The Poisson interval is
-- added by fleet.py (DuckDB has no chi-square quantile).
CREATE OR REPLACE TEMP TABLE _trend_counts AS
WITH att AS (
    SELECT coalesce(gpu_model, 'unknown') AS gpu_model,
           strftime(coalesce(start_ts, CAST(day AS TIMESTAMP)), '%G-W%V') AS iso_week,
           verdict, coalesce(domain, 'unknown') AS domain,
           -- in whole GPU-microseconds: an integer sum does not depend on the order rows arrive in
           coalesce(gpus_per_node, 0) * coalesce(len(nodes), 0)
               * greatest(coalesce(epoch_us(end_ts) - epoch_us(start_ts), 0), 0) AS gpu_us
    FROM _fleet_attempts
),
exposure AS (
    SELECT gpu_model, iso_week, count(*) AS attempts, CAST(sum(gpu_us) AS DOUBLE) / 3.6e9 AS gpu_hours FROM att GROUP BY ALL
),
fails AS (
    SELECT gpu_model, iso_week, domain, count(*) AS n FROM att WHERE verdict <> 'not_failed' GROUP BY ALL
    UNION ALL
    SELECT gpu_model, iso_week, 'all', count(*) FROM att WHERE verdict <> 'not_failed' GROUP BY ALL
),
domains AS (  -- the contract's domains, plus any a site rule introduced
    SELECT * FROM (VALUES ('hardware'), ('network'), ('software'), ('application'), ('infrastructure'), ('unknown'), ('all')) v(domain)
    UNION
    SELECT DISTINCT domain FROM fails
)
SELECT x.gpu_model, x.iso_week, d.domain, x.attempts, x.gpu_hours, coalesce(f.n, 0) AS failures
FROM exposure x CROSS JOIN domains d
LEFT JOIN fails f ON f.gpu_model = x.gpu_model AND f.iso_week = x.iso_week AND f.domain = d.domain
ORDER BY x.gpu_model, x.iso_week, d.domain;

-- block: _implicated
-- What an incident can be about: a culprit node or GPU of a verdict, a NIC or switch port of a network implication.
CREATE OR REPLACE TEMP TABLE _implicated AS
SELECT 'node' AS kind, node AS key, node, attempt_id, verdict, domain, fail_day, fail_ts AS ts FROM _culprits WHERE level = 'node'
UNION ALL
SELECT 'gpu', node || '/' || coalesce(gpu_uuid, gpu), node, attempt_id, verdict, domain, fail_day, fail_ts FROM _culprits WHERE level = 'gpu'
UNION ALL
SELECT 'port', nic, node, attempt_id, verdict, domain, fail_day, ts FROM _net_endpoints
UNION ALL
SELECT 'switch_port', switch || '/' || switch_port, NULL, attempt_id, verdict, domain, fail_day, ts FROM _net_endpoints
WHERE switch IS NOT NULL AND switch_port IS NOT NULL;

-- block: incidents
-- The same node, GPU, port or switch port implicated by >= incident_min_attempts attempts on one UTC day: one row,
-- id = first 16 hex digits of sha256(kind|key|day); domain = the members' known domain (`mixed` when they differ). Recommendation: a node/GPU takes its node_offenders
-- recommendation (at least `watch`); a port or switch port -> inspect_port. Newest day first, then the biggest.
CREATE OR REPLACE TABLE incidents AS
WITH p AS (SELECT * FROM fleet_params),
grouped AS (
    SELECT kind, key, CAST(fail_day AS VARCHAR) AS day, min(node) AS node,
           count(DISTINCT attempt_id) AS attempts, list_sort(list(DISTINCT attempt_id)) AS members,
           min(ts) AS first_seen, max(ts) AS last_seen,
           CASE WHEN count(DISTINCT domain) = 1 THEN min(domain)
                WHEN count(DISTINCT domain) = 0 THEN NULL ELSE 'mixed' END AS domain
    FROM _implicated
    GROUP BY kind, key, fail_day
    HAVING count(DISTINCT attempt_id) >= (SELECT incident_min_attempts FROM p)
),
offender AS (
    SELECT CASE level WHEN 'node' THEN 'node' ELSE 'gpu' END AS kind,
           CASE level WHEN 'node' THEN node ELSE node || '/' || coalesce(gpu_uuid, gpu) END AS key, recommendation
    FROM node_offenders
)
SELECT substr(sha256(g.kind || '|' || g.key || '|' || g.day), 1, 16) AS incident_id, g.kind, g.key, g.node, g.day,
       g.attempts, g.members, g.first_seen, g.last_seen, g.domain,
       CASE WHEN g.kind IN ('port', 'switch_port') THEN 'inspect_port'
            WHEN o.recommendation IS NULL OR o.recommendation = 'none' THEN 'watch'
            ELSE o.recommendation END AS recommendation
FROM grouped g
LEFT JOIN offender o ON o.kind = g.kind AND o.key = g.key
ORDER BY g.day DESC, g.attempts DESC, g.kind, g.key;
