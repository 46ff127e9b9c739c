-- id: watchdog_stuck
-- detects: a starved or stuck ProcessGroupNCCL watchdog: the heartbeat monitor's "watchdog got stuck for N seconds",
--          or a watchdog timeout whose "ran for" is at least twice its Timeout(ms) (pytorch/pytorch#118369) - a
--          CPU/GIL/CUDA-API hang on that rank, a class of its own (snowflakedb/ArcticTraining#219). A bare
--          "Heartbeat monitor timed out!" is a root only on a rank without a watchdog timeout (after a timeout it
--          usually means the debug dump hung) and confirms otherwise.
-- domain: software/watchdog_stuck
-- inputs: events(kind in torch_heartbeat, torch_watchdog_timeout)
WITH timed_out_ranks AS (
    SELECT DISTINCT attempt_id, rank FROM events WHERE kind = 'torch_watchdog_timeout' AND rank IS NOT NULL
),
signals AS (
    SELECT e.* REPLACE (coalesce(e.node, m.node) AS node),
           CASE
               WHEN e.kind = 'torch_heartbeat' AND json_extract_string(e.fields, '$.stuck_s') IS NOT NULL THEN 'root'
               WHEN e.kind = 'torch_heartbeat' AND t.rank IS NULL THEN 'root'
               WHEN e.kind = 'torch_heartbeat' THEN 'confirmation'
               ELSE 'root'
           END AS hit_role,
           CASE
               WHEN e.kind = 'torch_heartbeat' AND json_extract_string(e.fields, '$.stuck_s') IS NOT NULL
                   THEN printf('watchdog got stuck for %s s', json_extract_string(e.fields, '$.stuck_s'))
               WHEN e.kind = 'torch_heartbeat' THEN 'heartbeat monitor timed out'
               ELSE printf('watchdog starved: SeqNum %d ran for %d ms with Timeout(ms)=%d', e.seq, e.ran_for_ms, e.timeout_ms)
           END AS what
    FROM events e
    LEFT JOIN timed_out_ranks t ON t.attempt_id = e.attempt_id AND t.rank = e.rank
    LEFT JOIN rank_nodes m ON m.attempt_id = e.attempt_id AND m.rank = e.rank
    WHERE e.kind = 'torch_heartbeat'
       OR (e.kind = 'torch_watchdog_timeout' AND e.timeout_ms > 0 AND e.ran_for_ms >= 2 * e.timeout_ms)
)
SELECT attempt_id, event_id, 'watchdog_stuck' AS rule_id, hit_role AS role, 'software' AS domain,
       'watchdog_stuck' AS subdomain, node AS culprit_node, rank AS culprit_rank, NULL AS gpu,
       CASE WHEN rank IS NOT NULL THEN 'rank' ELSE 'node' END AS granularity, strength('watchdog_stuck') AS strength, ts,
       printf('%s on %s%s', what, coalesce(node, '?'), CASE WHEN rank IS NOT NULL THEN ' rank ' || rank ELSE '' END) AS summary,
       'restart' AS action
FROM signals
