-- id: collective_straggler
-- detects: the first-failing rank of a collective hang from the watchdog's PG status lines ("Exception ... detected
--          by watchdog at work: W, last enqueued NCCL work: E, last completed NCCL work: C"). Per (attempt, PG)
--          victims report work W with last completed W-1; a rank that never reached W (its last enqueued < the
--          victims' W, or last enqueued == last completed: it never entered the collective) is the culprit. Also,
--          when most ranks of the attempt's rank map time out, the few ranks that print no timeout at all are suspects
--          (weaker). Never fires when all ranks look alike.
-- domain: infrastructure/hang (rank granularity; an earlier Xid or exception on that rank is stronger and wins)
-- inputs: events(kind in torch_watchdog_state, torch_watchdog_timeout), attempts(rank_map)
-- needs: torch_watchdog_state, torch_watchdog_timeout
WITH states AS (  -- one status per (attempt, PG, rank): the earliest line
    SELECT attempt_id, event_id, node, rank, ts, coalesce(pg, '') AS pg, seq AS w, last_enqueued AS e, last_completed AS c
    FROM events
    WHERE kind = 'torch_watchdog_state' AND rank IS NOT NULL AND seq IS NOT NULL
      AND last_enqueued IS NOT NULL AND last_completed IS NOT NULL
    QUALIFY row_number() OVER (PARTITION BY attempt_id, coalesce(pg, ''), rank ORDER BY ts NULLS LAST, event_id) = 1
),
victim_front AS (
    SELECT attempt_id, pg, max(w) AS w, count(*) AS victims
    FROM states
    WHERE c = w - 1 AND e >= w AND e > c
    GROUP BY ALL
),
behind AS (
    SELECT s.*, v.w AS victim_w, v.victims
    FROM states s JOIN victim_front v USING (attempt_id, pg)
    WHERE s.e < v.w OR s.e = s.c
),
reporting AS (  -- ranks that printed a watchdog timeout or PG status
    SELECT attempt_id, rank, min(ts) AS ts, min(event_id) AS event_id
    FROM events
    WHERE kind IN ('torch_watchdog_timeout', 'torch_watchdog_state') AND rank IS NOT NULL
    GROUP BY ALL
),
coverage AS (
    SELECT m.attempt_id, count(*) AS ranks, count(r.rank) AS reporting, min(r.ts) AS first_ts
    FROM rank_nodes m LEFT JOIN reporting r ON r.attempt_id = m.attempt_id AND r.rank = m.rank
    GROUP BY ALL
),
silent AS (  -- rank-map ranks without a timeout while (almost) everyone else timed out
    SELECT m.attempt_id, m.rank, m.node, c.first_ts, c.reporting, c.ranks
    FROM rank_nodes m
    JOIN coverage c USING (attempt_id)
    LEFT JOIN reporting r ON r.attempt_id = m.attempt_id AND r.rank = m.rank
    WHERE r.rank IS NULL AND c.reporting >= 2 AND 4 * (c.ranks - c.reporting) <= c.ranks
)
SELECT b.attempt_id, b.event_id, 'collective_straggler' AS rule_id, 'root' AS role, 'infrastructure' AS domain,
       'hang' AS subdomain, coalesce(m.node, b.node) AS culprit_node, b.rank AS culprit_rank, NULL AS gpu,
       'rank' AS granularity, strength('collective_straggler') AS strength, b.ts,
       printf('rank %d%s never reached work %d of PG %s (last enqueued %d, last completed %d) while %d rank(s) wait in it',
              b.rank, CASE WHEN coalesce(m.node, b.node) IS NOT NULL THEN ' on ' || coalesce(m.node, b.node) ELSE '' END,
              b.victim_w, CASE WHEN b.pg = '' THEN '?' ELSE b.pg END, b.e, b.c, b.victims) AS summary,
       'restart_excluding_nodes' AS action
FROM behind b
LEFT JOIN rank_nodes m ON m.attempt_id = b.attempt_id AND m.rank = b.rank
UNION ALL
SELECT attempt_id, NULL, 'collective_straggler', 'root', 'infrastructure', 'hang', node, rank, NULL, 'rank', strength('collective_straggler.silent_rank'), first_ts,
       printf('rank %d on %s printed no watchdog timeout while %d of %d ranks timed out', rank, coalesce(node, '?'),
              reporting, ranks),
       'restart_excluding_nodes'
FROM silent
