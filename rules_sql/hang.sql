-- id: hang
-- detects: a job that stopped making progress: no progress marker for longer than the NCCL watchdog timeout
--          (torch_watchdog_timeout.timeout_ms, 600 s when none was printed) before the attempt's end, with the
--          scheduler state TIMEOUT/DEADLINE (root) or watchdog timeouts present (confirmation only). The silence is counted beyond the usual
--          interval between progress markers. Weak (0.4) so anything concrete wins; the hang is dated at the first
--          watchdog timeout (so whatever started the hang is earlier), else when the next marker was overdue by the
--          timeout (last progress + interval + timeout). A time limit after a long silent stretch (>= 2x the
--          timeout, state TIMEOUT) is a hang, not a sizing problem (0.65, beats scheduler_state/slurm_messages
--          time_limit); a shorter silence before a time limit only argues weakly (0.35, dated at the end) and the
--          time limit wins.
-- domain: infrastructure/hang
-- inputs: progress (rank_progress), events(kind in torch_watchdog_timeout, slurm_cancel), attempts
WITH last_progress AS (
    SELECT attempt_id, max(last_ts) AS last_ts, arg_max(last_event_id, (last_ts, last_event_id)) AS event_id,
           -- the usual spacing of the markers (every rank may print the same iterations: the rank that logged the
           -- most iterations over the whole span sets it)
           CASE WHEN max(iterations) > 1
                THEN (epoch_ms(max(last_ts)) - epoch_ms(min(first_ts))) / 1000.0 / (max(iterations) - 1) ELSE 0 END AS interval_s
    FROM rank_progress
    GROUP BY ALL
),
watchdog AS (
    SELECT attempt_id, max(timeout_ms) AS timeout_ms, count(*) AS n, min(ts) AS first_ts
    FROM events
    WHERE kind = 'torch_watchdog_timeout'
    GROUP BY ALL
),
limit_hit AS (  -- when Slurm says the time limit struck (the attempt's recorded end may be later)
    SELECT attempt_id, min(ts) AS ts FROM events WHERE kind = 'slurm_cancel' AND code_text = 'TIME LIMIT' GROUP BY ALL
),
silence AS (
    SELECT a.attempt_id, a.state, p.event_id, p.last_ts, coalesce(w.n, 0) AS watchdog_timeouts,
           coalesce(w.timeout_ms, 600000) / 1000.0 AS timeout_s,
           epoch_ms(least(a.end_ts, coalesce(l.ts, a.end_ts))) / 1000.0 - epoch_ms(p.last_ts) / 1000.0 - p.interval_s AS silent_s,
           p.interval_s, w.first_ts AS watchdog_ts, a.end_ts,
           a.state IN ('TIMEOUT', 'DEADLINE') AS time_limited
    FROM attempts a
    JOIN last_progress p USING (attempt_id)
    LEFT JOIN watchdog w USING (attempt_id)
    LEFT JOIN limit_hit l USING (attempt_id)
    WHERE a.end_ts IS NOT NULL
)
SELECT attempt_id, event_id, 'hang' AS rule_id,
       -- watchdog timeouts alone (state not TIMEOUT) only confirm: a stalled collective is also the cascade of any
       -- lost peer, and the demo's `unattributed` attempt (progress stops, watchdog fires, no root) must stay so
       CASE WHEN time_limited THEN 'root' ELSE 'confirmation' END AS role, 'infrastructure' AS domain, 'hang' AS subdomain,
       NULL AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu, 'job' AS granularity,
       CASE
           WHEN time_limited AND silent_s >= 2 * timeout_s THEN strength('hang.long_silence_time_limit')
           WHEN time_limited AND watchdog_timeouts = 0 THEN strength('hang.short_silence_time_limit')
           ELSE strength('hang.watchdog')
       END AS strength,
       CASE
           WHEN watchdog_ts IS NOT NULL THEN watchdog_ts
           WHEN time_limited AND silent_s < 2 * timeout_s THEN end_ts
           ELSE last_ts + to_microseconds(CAST((interval_s + timeout_s) * 1e6 AS BIGINT))
       END AS ts,
       printf('no training progress for %.0f s beyond the usual interval before the end (watchdog timeout %.0f s; last progress %s)%s',
              silent_s, timeout_s, strftime(last_ts, '%Y-%m-%dT%H:%M:%SZ'),
              CASE WHEN time_limited THEN ', then the time limit' ELSE printf(', %d watchdog timeout(s)', watchdog_timeouts) END) AS summary,
       'restart' AS action
FROM silence
WHERE silent_s > timeout_s AND (time_limited OR watchdog_timeouts > 0)
