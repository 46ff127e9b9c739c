-- id: collective_mismatch
-- detects: watchdog timeouts of the same collective (same SeqNum, same or unknown PG) whose OpType or Numel differ
--          across ranks: a desync, i.e. ranks issued different collectives (NVIDIA/nccl#1409). The ranks whose
--          signature is in the minority are the culprits; with no minority the whole group is named.
-- domain: application/collective_mismatch (strong enough to beat the watchdog cascade)
-- inputs: events(kind in torch_watchdog_timeout, torch_watchdog_state)
WITH timeouts AS (
    SELECT t.attempt_id, t.event_id, coalesce(t.node, m.node) AS node, t.rank, t.ts, t.seq, t.op_type, t.numel_in, t.numel_out,
           coalesce(t.pg, (SELECT min(s.pg) FROM events s
                            WHERE s.attempt_id = t.attempt_id AND s.kind = 'torch_watchdog_state' AND s.rank = t.rank
                              AND s.seq = t.seq)) AS pg,
           t.op_type || '/' || coalesce(CAST(t.numel_in AS VARCHAR), '?') || '/' || coalesce(CAST(t.numel_out AS VARCHAR), '?') AS signature
    FROM events t
    LEFT JOIN rank_nodes m ON m.attempt_id = t.attempt_id AND m.rank = t.rank
    WHERE t.kind = 'torch_watchdog_timeout' AND t.seq IS NOT NULL AND t.op_type IS NOT NULL
),
per_rank AS (  -- one signature per (attempt, seq, rank): the earliest line
    SELECT * FROM timeouts
    QUALIFY row_number() OVER (PARTITION BY attempt_id, seq, coalesce(CAST(rank AS VARCHAR), event_id) ORDER BY ts NULLS LAST, event_id) = 1
),
groups AS (
    SELECT attempt_id, seq, count(DISTINCT signature) AS signatures, count(DISTINCT pg) AS pgs
    FROM per_rank GROUP BY ALL
    HAVING count(DISTINCT signature) > 1 AND count(DISTINCT pg) <= 1
),
counted AS (
    SELECT p.*, count(*) OVER (PARTITION BY p.attempt_id, p.seq, p.signature) AS n_sig
    FROM per_rank p JOIN groups g USING (attempt_id, seq)
),
scored AS (
    SELECT *, max(n_sig) OVER (PARTITION BY attempt_id, seq) AS n_max,
           min(n_sig) OVER (PARTITION BY attempt_id, seq) AS n_min,
           string_agg(DISTINCT signature, ' vs ' ORDER BY signature) OVER (PARTITION BY attempt_id, seq) AS sigs
    FROM counted
)
-- a minority exists: each minority rank is a culprit
SELECT attempt_id, event_id, 'collective_mismatch' AS rule_id, 'root' AS role, 'application' AS domain,
       'collective_mismatch' AS subdomain, node AS culprit_node, rank AS culprit_rank, NULL AS gpu, 'group' AS granularity,
       strength('collective_mismatch') AS strength, ts,
       printf('collective mismatch at SeqNum %d: rank %s issued %s while most ranks issued another (%s)', seq,
              coalesce(CAST(rank AS VARCHAR), '?'), signature, sigs) AS summary,
       'stop' AS action
FROM scored
WHERE n_max > n_min AND n_sig < n_max
UNION ALL
-- no minority: the group as a whole (no culprit node), anchored on the earliest timeout
SELECT attempt_id, arg_min(event_id, (ts, event_id)), 'collective_mismatch', 'root', 'application',
       'collective_mismatch', NULL, NULL, NULL, 'group', strength('collective_mismatch'), min(ts),
       printf('collective mismatch at SeqNum %d: ranks issued different collectives (%s)', seq, min(sigs)),
       'stop'
FROM scored
WHERE n_max = n_min
GROUP BY attempt_id, seq
