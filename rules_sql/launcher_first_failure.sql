-- id: launcher_first_failure
-- detects: launcher hints at the first-failing rank: torchrun's "Root Cause (first observed failure)" entry, and the
--          task missing from an srun "Terminated" task list (with srun --kill-on-bad-exit the failing task is absent,
--          the listed ones are collateral). Confirmations only: they corroborate a root of any domain
--          on that node (one row per domain, since confirmations join the chosen cause by domain and node).
-- domain: none of its own (confirmation for hardware/software/application/infrastructure/network)
-- inputs: events(kind in torchrun_failure, slurm_task_exit), attempts(rank_map)
-- needs: torchrun_failure, slurm_task_exit
WITH torchrun_root AS (
    SELECT e.attempt_id, e.event_id, e.rank, coalesce(m.node, e.node, json_extract_string(e.fields, '$.host')) AS node, e.ts,
           printf('torchrun root cause (first observed failure): rank %s on %s, exitcode %s',
                  coalesce(CAST(e.rank AS VARCHAR), '?'), coalesce(m.node, e.node, json_extract_string(e.fields, '$.host'), '?'),
                  coalesce(CAST(e.exit_code AS VARCHAR), '?')) AS summary
    FROM events e
    LEFT JOIN rank_nodes m ON m.attempt_id = e.attempt_id AND m.rank = e.rank
    WHERE e.kind = 'torchrun_failure' AND json_extract_string(e.fields, '$.root_cause') = 'true'
),
terminated AS (
    SELECT attempt_id, event_id, ts, coalesce(json_extract_string(fields, '$.slurm_node'), node) AS node,
           unnest(string_split(trim(json_extract_string(fields, '$.tasks'), '[] '), ',')) AS part
    FROM events
    WHERE kind = 'slurm_task_exit' AND code_text = 'Terminated' AND json_extract_string(fields, '$.tasks') IS NOT NULL
),
bounds AS (
    SELECT *, TRY_CAST(split_part(part, '-', 1) AS INTEGER) AS lo,
           TRY_CAST(coalesce(nullif(split_part(part, '-', 2), ''), split_part(part, '-', 1)) AS INTEGER) AS hi
    FROM terminated
),
listed AS (
    SELECT attempt_id, node, min(ts) AS ts, min(event_id) AS event_id, list(DISTINCT t ORDER BY t) AS tasks
    FROM (SELECT attempt_id, node, ts, event_id, unnest(range(lo, hi + 1)) AS t FROM bounds
          WHERE lo IS NOT NULL AND hi IS NOT NULL AND hi >= lo AND hi - lo < 100000)
    GROUP BY ALL
),
expected AS (  -- the node's ranks from the rank map; else the gaps inside the printed range
    SELECT l.attempt_id, l.node, l.ts, l.event_id, l.tasks,
           coalesce((SELECT list(m.rank ORDER BY m.rank) FROM rank_nodes m WHERE m.attempt_id = l.attempt_id AND m.node = l.node),
                    range(list_min(l.tasks), list_max(l.tasks) + 1)) AS want
    FROM listed l
),
absent AS (
    SELECT attempt_id, node, ts, event_id, len(tasks) AS n_listed, t AS rank
    FROM (SELECT *, unnest(list_filter(want, lambda x: NOT list_contains(tasks, x))) AS t FROM expected)
),
suspects AS (
    SELECT attempt_id, event_id, rank, node, ts,
           printf('srun: task %d is missing from the Terminated list of %s (%d tasks listed): the first failing task',
                  rank, coalesce(node, '?'), n_listed) AS summary
    FROM absent
    WHERE (SELECT count(*) FROM absent a2 WHERE a2.attempt_id = absent.attempt_id AND a2.node IS NOT DISTINCT FROM absent.node) <= 2
      AND n_listed >= 2
    UNION ALL
    SELECT attempt_id, event_id, rank, node, ts, summary FROM torchrun_root
)
SELECT s.attempt_id, s.event_id, 'launcher_first_failure' AS rule_id, 'confirmation' AS role, d.domain,
       NULL AS subdomain, s.node AS culprit_node, s.rank AS culprit_rank, NULL AS gpu, 'rank' AS granularity,
       strength('launcher_first_failure') AS strength, s.ts, s.summary, NULL AS action
FROM suspects s
CROSS JOIN (VALUES ('hardware'), ('software'), ('application'), ('infrastructure'), ('network')) d(domain)
