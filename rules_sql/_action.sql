-- The recommended action of every attempt (docs/DESIGN.md §4.3), history-aware: a function of the attempt's verdict
-- (verdict_base, _verdict.sql), of `history` (earlier attempts of the same cluster + workload: the warehouse's rows,
-- plus the other attempts of this run), of attempt_progress (_views.sql) and of the `params` budgets. Builds the final
-- temp table verdict_rows: verdict_base with this action.
CREATE OR REPLACE TEMP TABLE timeline AS
SELECT * EXCLUDE (n) FROM (
    SELECT *, row_number() OVER (PARTITION BY attempt_id ORDER BY current_run DESC) AS n FROM (
        SELECT v.attempt_id, v.workload_id, v.cluster, CAST(v.attempt AS BIGINT) AS attempt, v.verdict, v.domain, v.subdomain,
               v.culprit_nodes, root_fingerprint(v.domain, v.subdomain, v.culprit_nodes) AS root_fingerprint,
               p.progress, true AS current_run
        FROM verdict_base v LEFT JOIN attempt_progress p USING (attempt_id)
        UNION ALL
        SELECT h.attempt_id, h.workload_id, h.cluster, h.attempt, h.verdict, h.domain, h.subdomain, h.culprit_nodes,
               root_fingerprint(h.domain, h.subdomain, h.culprit_nodes), h.progress, false
        FROM history h
    )
) WHERE n = 1;

-- An attempt "made progress" when its highest completed marker beats every earlier attempt's.
CREATE OR REPLACE TEMP TABLE timeline_progress AS
SELECT t.*,
       t.progress IS NOT NULL AND t.progress > coalesce(max(t.progress) OVER (
           PARTITION BY t.cluster, t.workload_id ORDER BY t.attempt ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), -1) AS made_progress
FROM timeline t;

CREATE OR REPLACE TEMP TABLE action_inputs AS
WITH cur AS (
    SELECT v.attempt_id, v.cluster, v.workload_id, CAST(v.attempt AS BIGINT) AS attempt, v.verdict, v.domain, v.subdomain,
           v.granularity, v.action AS base_action, len(v.culprit_nodes) AS n_culprits,
           root_fingerprint(v.domain, v.subdomain, v.culprit_nodes) AS root_fingerprint
    FROM verdict_base v
),
marks AS (
    SELECT c.attempt_id,
           coalesce(max(t.attempt) FILTER (WHERE t.made_progress), -1) AS last_progress
    FROM cur c LEFT JOIN timeline_progress t
      ON t.cluster = c.cluster AND t.workload_id = c.workload_id AND t.attempt <= c.attempt
    GROUP BY c.attempt_id
)
SELECT c.*, m.last_progress,
       (SELECT count(*) FROM timeline t WHERE t.cluster = c.cluster AND t.workload_id = c.workload_id AND t.attempt < c.attempt
           AND t.attempt >= m.last_progress AND t.verdict <> 'not_failed') AS restarts_used,
       (SELECT count(*) FROM timeline t WHERE t.cluster = c.cluster AND t.workload_id = c.workload_id AND t.attempt < c.attempt
           AND t.attempt >= m.last_progress AND t.verdict = 'attributed' AND t.root_fingerprint = c.root_fingerprint) AS same_root_recent,
       (SELECT count(*) FROM timeline t WHERE t.cluster = c.cluster AND t.workload_id = c.workload_id AND t.attempt < c.attempt
           AND t.verdict = 'attributed' AND t.root_fingerprint = c.root_fingerprint) AS same_root_ever
FROM cur c JOIN marks m USING (attempt_id);

CREATE OR REPLACE TEMP TABLE action_rows AS
SELECT i.*,
    CASE
        WHEN i.verdict = 'not_failed' THEN 'none'
        -- an unknown or undecided cause is not restarted blindly: a person (or a diagnostic) decides
        WHEN i.verdict IN ('ambiguous', 'unattributed') THEN 'investigate'
        -- the workload itself cannot succeed as it is: restarting would fail the same way
        WHEN i.domain = 'application' AND i.subdomain IN ('exception', 'cuda_oom', 'host_oom', 'config', 'collective_mismatch', 'nan') THEN 'stop'
        WHEN i.base_action IN ('none', 'stop', 'investigate') THEN i.base_action
        -- a root that cannot be pinned on one node: confirmation retries in place, then a person
        WHEN i.granularity = 'group' THEN CASE WHEN i.same_root_recent < p.confirmation_retries THEN 'restart' ELSE 'investigate' END
        -- progress-aware budgets
        WHEN i.same_root_recent + 1 >= p.same_root_limit THEN 'stop'
        WHEN i.restarts_used >= p.max_restarts THEN 'stop'
        -- the drain of this node for this root was already asked for by an earlier attempt: just keep away from it
        WHEN i.base_action = 'drain_node' AND i.same_root_ever > 0 THEN 'restart_excluding_nodes'
        WHEN i.domain = 'hardware' AND i.n_culprits > 0 AND i.base_action = 'restart' THEN 'restart_excluding_nodes'
        ELSE i.base_action
    END AS action
FROM action_inputs i CROSS JOIN params p;

CREATE OR REPLACE TEMP TABLE verdict_rows AS
SELECT v.* REPLACE (a.action AS action)
FROM verdict_base v JOIN action_rows a USING (attempt_id);