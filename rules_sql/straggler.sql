-- id: straggler
-- detects: a rank whose COMPUTE time per step (Megatron forward-compute + backward-compute timers, `compute_ms=`;
--          transforms/patterns/progress_timing.yaml) is > 1.3x the median of its peers in >= 3 of the last 5 timing
--          windows (synchronous collectives equalise the total step time, so the total is not
--          compared; persistence k-of-n is required). A window is the reported iteration, else the n-th report of
--          the rank; only windows with >= 3 reporting ranks count. Weak (0.45): a slow rank rarely ends a job alone.
-- domain: hardware/straggler
-- inputs: events(kind = step_timing, rank known)
-- needs: step_timing
WITH timing AS (
    SELECT attempt_id, event_id, node, rank, ts, uri, line, iteration,
           coalesce(TRY_CAST(json_extract_string(fields, '$.compute_ms') AS DOUBLE),
                    TRY_CAST(json_extract_string(fields, '$.forward_ms') AS DOUBLE)
                      + coalesce(TRY_CAST(json_extract_string(fields, '$.backward_ms') AS DOUBLE), 0)) AS compute_ms
    FROM events
    WHERE kind = 'step_timing' AND rank IS NOT NULL
),
windows AS (
    SELECT *, coalesce(iteration, row_number() OVER (PARTITION BY attempt_id, rank ORDER BY ts NULLS LAST, uri, line)) AS w
    FROM timing
    WHERE compute_ms IS NOT NULL
),
full_windows AS (
    SELECT attempt_id, w, dense_rank() OVER (PARTITION BY attempt_id ORDER BY w DESC) AS recency
    FROM windows
    GROUP BY attempt_id, w
    HAVING count(DISTINCT rank) >= 3
),
compared AS (
    SELECT x.attempt_id, x.event_id, x.node, x.rank, x.ts, x.w, x.compute_ms, median(y.compute_ms) AS peer_median
    FROM windows x
    JOIN full_windows f ON f.attempt_id = x.attempt_id AND f.w = x.w AND f.recency <= 5
    JOIN windows y ON y.attempt_id = x.attempt_id AND y.w = x.w AND y.rank <> x.rank
    GROUP BY ALL
),
slow AS (
    SELECT attempt_id, rank, min(node) AS node, count(*) AS slow_windows, min(ts) AS ts,
           arg_min(event_id, (ts, event_id)) AS event_id, max(compute_ms / peer_median) AS worst_ratio
    FROM compared
    WHERE peer_median > 0 AND compute_ms > 1.3 * peer_median
    GROUP BY attempt_id, rank
)
SELECT attempt_id, event_id, 'straggler' AS rule_id, 'root' AS role, 'hardware' AS domain, 'straggler' AS subdomain,
       node AS culprit_node, rank AS culprit_rank, NULL AS gpu, 'rank' AS granularity, strength('straggler') AS strength, ts,
       printf('rank %d on %s computes up to %.1fx slower than its peers in %d of the last 5 timing windows',
              rank, coalesce(node, '?'), worst_ratio, slow_windows) AS summary,
       'investigate' AS action
FROM slow
WHERE slow_windows >= 3
