-- Shared views and macros that the rules and the ranking scripts read, built before any rule runs. Inputs registered
-- by the runner: events_all, progress, attempts, reports, xid_catalog, params, history. What several rules or ranking
-- steps read (rank_nodes, gpu_ranks, progress_window, node_skew, event_clock, silent_first_node) is a table, not a
-- view: a view is planned and computed over the whole night's events or progress at every read.

-- Earlier attempts of the workloads (DESIGN §4.3); the pipeline fills it from the warehouse, empty when not registered.
CREATE TEMP TABLE IF NOT EXISTS history (
    attempt_id VARCHAR, workload_id VARCHAR, cluster VARCHAR, attempt BIGINT, verdict VARCHAR, domain VARCHAR,
    subdomain VARCHAR, culprit_nodes VARCHAR[], progress BIGINT, start_ts TIMESTAMP);

-- "Application or GPU" Xids that earlier attempts logged on the GPUs this run's Xids name (xid_root.sql; the pipeline
-- fills it from the warehouse, rules_sql/gpu_history.py); empty when not registered.
CREATE TEMP TABLE IF NOT EXISTS gpu_xid_history (
    cluster VARCHAR, workload_id VARCHAR, attempt_id VARCHAR, node VARCHAR, gpu VARCHAR, ts TIMESTAMP,
    end_ts TIMESTAMP, gpus BIGINT);

-- The root of an attempt (DESIGN §4.3): the same fingerprint on two attempts of a workload is the same root again.
CREATE OR REPLACE TEMP MACRO root_fingerprint(domain, subdomain, nodes) AS
    concat_ws('|', domain, subdomain, array_to_string(list_sort(nodes), ','));

-- Whether the time span [lo, hi] meets an attempt's window (start - lookback .. end + grace; no end: open).
CREATE OR REPLACE TEMP MACRO meets_window(lo, hi, start_ts, end_ts, lookback_s, grace_s) AS
    hi >= start_ts - to_microseconds(CAST(lookback_s * 1e6 AS BIGINT))
    AND lo <= coalesce(end_ts, lo) + to_microseconds(CAST(grace_s * 1e6 AS BIGINT));

-- Events inside the attempt window; unstamped events are kept (ts null). A table, not a view: most rules read it, and
-- DuckDB would plan the window join again inside each of them (a quarter of a small attempt's rule pass).
CREATE OR REPLACE TEMP TABLE events AS
SELECT e.*
FROM events_all e
JOIN attempts a USING (attempt_id)
CROSS JOIN params p
WHERE e.ts IS NULL OR meets_window(e.ts, e.ts, a.start_ts, a.end_ts, p.lookback_s, p.grace_s);

-- Each Xid's class, whoever reported it (the kernel's NVRM line, kind xid; DCGM's Xid field, kind dcgm_xid): the
-- catalogue's, unless its spread says the GPU (DESIGN §4.2 item 8). An "application or GPU" Xid
-- (xid_catalog.spread_subdomain) that the attempt reports on ONE GPU, which also logged one alone in another workload
-- within gpu_history_days (gpu_xid_history, earlier nights only: rules_sql/gpu_history.py), follows the GPU:
-- hardware/<spread_subdomain>, with those workloads and a note the rules add to their summaries.
CREATE OR REPLACE TEMP VIEW xid_class AS
WITH spread AS (
    SELECT e.attempt_id, count(DISTINCT (e.node, e.gpu)) AS gpus
    FROM events e JOIN xid_catalog c ON c.code = e.code
    WHERE e.kind IN ('xid', 'dcgm_xid') AND c.spread_subdomain IS NOT NULL AND e.gpu IS NOT NULL
    GROUP BY ALL
),
follows AS (  -- other workloads in which this GPU alone logged one
    SELECT a.attempt_id, h.node, h.gpu, list_sort(list(DISTINCT h.workload_id)) AS workloads
    FROM attempts a
    CROSS JOIN params p
    JOIN gpu_xid_history h ON h.cluster = a.cluster AND h.workload_id <> a.workload_id
    WHERE h.gpus = 1 AND h.ts < a.start_ts
      AND h.ts >= a.start_ts - to_microseconds(CAST(p.gpu_history_days * 86400e6 AS BIGINT))
      AND h.end_ts < date_trunc('day', coalesce(a.end_ts, a.start_ts))
    GROUP BY ALL
)
SELECT e.attempt_id, e.event_id, c.mnemonic, f.workloads,
       CASE WHEN f.workloads IS NULL THEN c.typical_domain ELSE 'hardware' END AS typical_domain,
       CASE WHEN f.workloads IS NULL THEN c.typical_subdomain ELSE c.spread_subdomain END AS typical_subdomain,
       CASE WHEN f.workloads IS NOT NULL
            THEN printf('; this GPU alone logged one in %d other workload%s within %g days (%s): it follows the GPU',
                        len(f.workloads), CASE WHEN len(f.workloads) = 1 THEN '' ELSE 's' END, p.gpu_history_days,
                        array_to_string(f.workloads, ', '))
            ELSE '' END AS spread_note
FROM events e
JOIN xid_catalog c ON c.code = e.code
CROSS JOIN params p
LEFT JOIN spread s ON s.attempt_id = e.attempt_id
LEFT JOIN follows f ON c.spread_subdomain IS NOT NULL AND s.gpus = 1 AND f.attempt_id = e.attempt_id
                       AND f.node = e.node AND f.gpu = e.gpu
WHERE e.kind IN ('xid', 'dcgm_xid');

-- The node of every rank of an attempt: its context's listed ranks (`rank_map`), else node-major (rank = node index x
-- gpus_per_node + local rank), generated here rather than stored rank by rank.
CREATE OR REPLACE TEMP TABLE rank_nodes AS
SELECT attempt_id, CAST(r[1] AS INTEGER) AS rank, r[2] AS node
FROM (SELECT attempt_id, unnest(from_json(rank_map, '[["VARCHAR"]]')) AS r FROM attempts WHERE rank_map IS NOT NULL)
UNION ALL
SELECT attempt_id, CAST(i * gpus_per_node + local_rank AS INTEGER) AS rank, nodes[i + 1] AS node
FROM (SELECT attempt_id, nodes, gpus_per_node, unnest(range(len(nodes))) AS i FROM attempts WHERE rank_map IS NULL),
     LATERAL (SELECT unnest(range(gpus_per_node)) AS local_rank);

-- Which rank drives which GPU, from NCCL's ncclCommInitRank lines (busId) of the attempt.
CREATE OR REPLACE TEMP TABLE gpu_ranks AS
SELECT attempt_id, node, gpu, min(rank) AS rank
FROM events
WHERE kind = 'nccl_comm_init' AND gpu IS NOT NULL AND rank IS NOT NULL
GROUP BY ALL;

-- Training progress (the `progress` table: markers per file, node, rank and minute) inside the attempt window, like
-- `events`: a row is in when its markers' span meets the window; unstamped markers (minute null) are kept.
CREATE OR REPLACE TEMP TABLE progress_window AS
SELECT p.*
FROM progress p
JOIN attempts a USING (attempt_id)
CROSS JOIN params pr
WHERE p.minute IS NULL OR meets_window(p.first_ts, p.last_ts, a.start_ts, a.end_ts, pr.lookback_s, pr.grace_s);

-- Each rank's stamped markers (per file): how many, how many iterations, its first and last, and the usual interval
-- between its iterations (a checkpoint save of an iteration already logged in the same minute is not a new one).
CREATE OR REPLACE TEMP VIEW rank_progress AS
SELECT attempt_id, uri, node, rank, sum(markers) AS markers, sum(iterations) AS iterations, min(first_ts) AS first_ts,
       max(last_ts) AS last_ts, arg_max(last_event_id, (last_ts, last_event_id)) AS last_event_id,
       max(max_iteration) AS max_iteration,
       CASE WHEN sum(iterations) > 1
            THEN (epoch_ms(max(last_ts)) - epoch_ms(min(first_ts))) / 1000.0 / (sum(iterations) - 1) END AS interval_s
FROM progress_window
WHERE minute IS NOT NULL
GROUP BY ALL;

-- Training progress of each attempt: the highest completed iteration or checkpoint save (DESIGN §4.3). Only completed
-- markers count (the `progress` patterns match iteration summaries and finished saves, never starts).
CREATE OR REPLACE TEMP VIEW attempt_progress AS
SELECT attempt_id, max(max_iteration) AS progress, sum(markers) AS markers
FROM progress_window
WHERE max_iteration IS NOT NULL
GROUP BY attempt_id;

-- Clock skew (DESIGN §4.2). Anchors are moments that happen at once on every rank of a collective:
--   * a collective the watchdog timed out: every rank enqueued it together, at ts - ran_for_ms (same pg, seq, op);
--   * the completion of one NCCL communicator's init (ncclCommInitRank ... Init COMPLETE, same commId).
-- Only lines that carry their own stamp count (an inherited stamp comes from another line, maybe another node).
CREATE OR REPLACE TEMP VIEW skew_anchors AS
SELECT attempt_id, node, 'watchdog|' || coalesce(pg, '') || '|' || CAST(seq AS VARCHAR) || '|' || coalesce(op_type, '') AS anchor,
       epoch(ts) - coalesce(ran_for_ms, 0) / 1000.0 AS t
FROM events
WHERE kind = 'torch_watchdog_timeout' AND seq IS NOT NULL AND ts IS NOT NULL AND node IS NOT NULL
  AND ts_quality NOT IN ('inherited', 'none', 'monotonic')
UNION ALL
SELECT attempt_id, node, 'nccl_init|' || json_extract_string(fields, '$.comm_id') AS anchor, epoch(ts) AS t
FROM events
WHERE kind = 'nccl_comm_init' AND json_extract_string(fields, '$.comm_id') IS NOT NULL AND ts IS NOT NULL AND node IS NOT NULL
  AND ts_quality NOT IN ('inherited', 'none', 'monotonic');

-- Per (attempt, node): offset_s = the node's clock minus the attempt's consensus clock (median over anchors of the node's
-- median anchor time minus the median over nodes), spread_s = how much the anchors disagree. Offsets under half the
-- tie tolerance are measurement noise and count as 0. A node with no anchor has no row (offset unknown).
CREATE OR REPLACE TEMP TABLE node_skew AS
WITH per_node AS (
    SELECT attempt_id, anchor, node, median(t) AS t FROM skew_anchors GROUP BY ALL
),
per_anchor AS (
    SELECT attempt_id, anchor, median(t) AS t_ref, count(*) AS nodes FROM per_node GROUP BY ALL HAVING count(*) >= 2
),
deltas AS (
    SELECT n.attempt_id, n.node, n.t - a.t_ref AS d
    FROM per_node n JOIN per_anchor a USING (attempt_id, anchor)
)
SELECT d.attempt_id, d.node,
       CASE WHEN abs(median(d.d)) < p.skew_tolerance_s / 2 THEN 0.0 ELSE median(d.d) END AS offset_s,
       coalesce(stddev_pop(d.d), 0.0) AS spread_s,
       count(*) AS anchors
FROM deltas d CROSS JOIN params p
GROUP BY d.attempt_id, d.node, p.skew_tolerance_s;

-- A time on the attempt's consensus clock: corrected by the measured offset of the clock it was read on (event_clock,
-- DESIGN §4.2).
CREATE OR REPLACE TEMP MACRO consensus_ts(ts, offset_s) AS ts - to_microseconds(CAST(coalesce(offset_s, 0) * 1e6 AS BIGINT));
-- Whether a line carries a stamp of its own (an inherited stamp is only a lower bound of when it was printed).
CREATE OR REPLACE TEMP MACRO own_stamp(ts, quality) AS ts IS NOT NULL AND coalesce(quality, '') NOT IN ('inherited', 'none', 'monotonic');

-- A line's time as an interval [ts_lo, ts_hi] (null: unbounded): an own stamp is a point; an inherited stamp lies
-- between the stamp it copies and the next own stamp of its file; a line without one is bounded above by that next
-- stamp only (event_clock.next_own_ts).
CREATE OR REPLACE TEMP MACRO interval_lo(ts, own, quality) AS CASE WHEN own OR quality = 'inherited' THEN ts END;
CREATE OR REPLACE TEMP MACRO interval_hi(ts, own, next_own_ts) AS CASE WHEN own THEN ts ELSE next_own_ts END;

-- The clock each event's stamp was read on, as that clock's offset from the consensus (node_skew): an own stamp is
-- read on its node's clock; an inherited stamp is copied from an earlier line of its file, so it is read on the clock
-- of the node that writes the file when one node does (every own-stamped event and progress marker of the file is
-- that node's: its kernel log), and on an unknown clock in a log many nodes write to, where it stays as printed.
CREATE OR REPLACE TEMP TABLE event_clock AS
WITH file_clock AS (
    SELECT attempt_id, uri, min(node) AS node
    FROM (
        SELECT attempt_id, uri, node FROM events
        WHERE uri IS NOT NULL AND node IS NOT NULL AND own_stamp(ts, ts_quality)
        UNION ALL
        SELECT attempt_id, uri, node FROM progress_window WHERE uri IS NOT NULL AND node IS NOT NULL
    )
    GROUP BY ALL
    HAVING count(DISTINCT node) = 1
),
clocked AS (
    SELECT e.attempt_id, e.event_id, e.uri, e.line, k.offset_s, own_stamp(e.ts, e.ts_quality) AS own,
           consensus_ts(e.ts, k.offset_s) AS consensus
    FROM events e
    LEFT JOIN file_clock f ON f.attempt_id = e.attempt_id AND f.uri = e.uri
    LEFT JOIN node_skew k ON k.attempt_id = e.attempt_id
     AND k.node = CASE WHEN e.ts_quality = 'inherited' THEN f.node ELSE e.node END
)
-- next_own_ts: the earliest own stamp of a later line of the same file, on the consensus clock (the upper bound of a
-- line without a stamp of its own)
SELECT attempt_id, event_id, offset_s,
       CASE WHEN uri IS NOT NULL THEN min(CASE WHEN own THEN consensus END)
                                      OVER (PARTITION BY attempt_id, uri ORDER BY line RANGE BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
       END AS next_own_ts
FROM clocked;

-- When each node of an attempt was last heard of: its latest own-stamped event or progress marker (an inherited stamp
-- belongs to another line). The node that went silent first (DESIGN §4.2) is the one whose last sign of life is earlier
-- than every other node's by more than the tie tolerance, while other nodes' errors name it afterwards (peer_node,
-- resolved from a host name, IP or GID in their lines): its peers lost it, not it them.
CREATE OR REPLACE TEMP VIEW node_last_seen AS
SELECT attempt_id, node, max(ts) AS last_ts
FROM (
    SELECT attempt_id, node, ts FROM events
    WHERE node IS NOT NULL AND ts IS NOT NULL AND ts_quality NOT IN ('inherited', 'none', 'monotonic')
    UNION ALL
    SELECT attempt_id, node, last_ts FROM progress_window WHERE node IS NOT NULL AND last_ts IS NOT NULL
)
GROUP BY ALL;

CREATE OR REPLACE TEMP TABLE silent_first_node AS
WITH ordered AS (
    SELECT *, row_number() OVER (PARTITION BY attempt_id ORDER BY last_ts, node) AS n FROM node_last_seen
),
first_two AS (
    SELECT attempt_id, min(node) FILTER (WHERE n = 1) AS node, min(last_ts) FILTER (WHERE n = 1) AS last_ts,
           min(last_ts) FILTER (WHERE n = 2) AS next_ts
    FROM ordered WHERE n <= 2
    GROUP BY attempt_id
),
-- it stopped first while another node's line names it afterwards, or while every node of the attempt printed training
-- progress (then a node that simply logs less, such as one without the rank that prints iterations, cannot be first)
stopped_first AS (
    SELECT f.attempt_id, f.node, f.last_ts
    FROM first_two f JOIN attempts a USING (attempt_id) CROSS JOIN params p
    WHERE f.next_ts > f.last_ts + to_microseconds(CAST(p.skew_tolerance_s * 1e6 AS BIGINT))
      AND (EXISTS (SELECT 1 FROM events e
                   WHERE e.attempt_id = f.attempt_id AND e.peer_node = f.node AND e.node IS DISTINCT FROM f.node
                     AND coalesce(e.ts >= f.last_ts, true))
           OR (SELECT count(DISTINCT w.node) FROM progress_window w WHERE w.attempt_id = f.attempt_id) = len(a.nodes))
),
-- a node of the attempt that printed nothing at all went silent before the first line anyone printed: it is the one
-- when it is the only such node and another node's error names it (two such nodes: nothing says which went first)
never_heard AS (
    SELECT a.attempt_id, n.node
    FROM attempts a, unnest(a.nodes) AS n(node)
    WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.attempt_id = a.attempt_id AND e.node = n.node)
      AND NOT EXISTS (SELECT 1 FROM progress_window p WHERE p.attempt_id = a.attempt_id AND p.node = n.node)
),
named_never_heard AS (
    SELECT attempt_id, min(node) AS node
    FROM never_heard v
    GROUP BY attempt_id
    HAVING count(*) = 1
       AND EXISTS (SELECT 1 FROM events e
                   WHERE e.attempt_id = v.attempt_id AND e.peer_node = min(v.node) AND e.node IS NOT NULL)
)
SELECT attempt_id, node, last_ts FROM stopped_first
UNION ALL
SELECT n.attempt_id, n.node, NULL AS last_ts
FROM named_never_heard n
WHERE NOT EXISTS (SELECT 1 FROM stopped_first f WHERE f.attempt_id = n.attempt_id);
