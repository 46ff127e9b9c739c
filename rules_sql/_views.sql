-- Shared views the rules read. Inputs registered by the runner: events_all, attempts, xid_catalog, params.

-- Events inside the attempt window (start - lookback .. end + grace); unstamped events are kept (ts null).
CREATE OR REPLACE TEMP VIEW events AS
SELECT e.*
FROM events_all e
JOIN attempts a USING (attempt_id)
CROSS JOIN params p
WHERE e.ts IS NULL
   OR (e.ts >= a.start_ts - to_microseconds(CAST(p.lookback_s * 1e6 AS BIGINT))
       AND e.ts <= coalesce(a.end_ts, e.ts) + to_microseconds(CAST(p.grace_s * 1e6 AS BIGINT)));

-- Which rank drives which GPU, from NCCL's ncclCommInitRank lines (busId) of the attempt.
CREATE OR REPLACE TEMP VIEW gpu_ranks AS
SELECT attempt_id, node, gpu, min(rank) AS rank
FROM events
WHERE kind = 'nccl_comm_init' AND gpu IS NOT NULL AND rank IS NOT NULL
GROUP BY ALL;
