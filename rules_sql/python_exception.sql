-- id: python_exception
-- detects: the innermost exception of a Python traceback, or an exception line logged without its traceback, that is
--          not itself a symptom of a distributed failure, and torchrun entries that exited with a positive status.
--          Symptoms, not causes: DistBackendError / NCCL texts / ChildFailedError / SIGTERM exits / peers closing
--          connections (the cascade); the c10d store's and Gloo's timeouts and JAX's coordination-service errors
--          (a store waiting for clients that never joined, a send or recv or a barrier that waited in vain: they name
--          the process left waiting, not the one that failed); a DataLoader worker killed by a signal (the signal's
--          consequence); every exception text the message catalogue calls a symptom (the `exception_symptoms` table:
--          a store left waiting for its clients, the agent's own stop signal); a launcher's CalledProcessError for the
--          Python worker it started (torch.distributed.launch, accelerate launch: it relays that worker's exit status).
--          CUDA texts, OOM, NaN and storage errors have their own rules. Exceptions printed after the job was told to
--          stop (a Slurm cancel, the torchrun agent's death signal) are teardown. When the same exception is raised on
--          two or more nodes (a bad config, a missing file, an import error), the cause is the job's code, not a node:
--          no culprit node.
-- domain: application/exception
-- inputs: events(kind in python_exception, exception_line, torchrun_failure, deepspeed_exit, slurm_cancel, torchrun_death_signal),
--         exception_symptoms
-- needs: python_exception, exception_line, torchrun_failure, deepspeed_exit
WITH traced AS (
    SELECT *, json_extract_string(fields, '$.message') AS text
    FROM events
    WHERE kind = 'python_exception' AND coalesce(json_extract_string(fields, '$.innermost'), 'true') = 'true'
),
bare AS (  -- an exception line that no traceback accounts for (kernel lines such as `LustreError: …` are not Python)
    SELECT b.*, json_extract_string(b.fields, '$.text') AS text
    FROM events b
    WHERE b.kind = 'exception_line' AND b.source NOT IN ('syslog', 'kernel', 'dmesg', 'kmsg', 'journal', 'journald')
      AND NOT EXISTS (SELECT 1 FROM events t WHERE t.attempt_id = b.attempt_id AND t.kind = 'python_exception'
                                                AND t.uri = b.uri AND t.line = b.line)
),
exceptions AS (
    SELECT * FROM traced UNION ALL BY NAME SELECT * FROM bare
),
teardown_marks AS (  -- the moments the job was told to stop
    SELECT attempt_id, uri, line, ts FROM events
    WHERE kind = 'torchrun_death_signal' OR (kind = 'slurm_cancel' AND coalesce(code_text, '') <> 'TASK FAILURE')
),
classified AS (
    SELECT x.*,
        regexp_matches(coalesce(x.code_text, '') || ' ' || coalesce(x.text, ''),
            '(DistBackendError|ChildFailedError|NCCL|ncclRemoteError|ncclSystemError|ncclInternalError|Watchdog|watchdog|'
            || 'ProcessGroup|Connection reset|Connection closed by peer|Broken pipe|SIGTERM|KeyboardInterrupt|'
            || 'SystemExit|Rendezvous|DistStoreError|DistNetworkError|waiting for workers|client socket has failed|'
            || 'Socket Timeout|Timed out waiting \d+ms for (send|recv) operation|DEADLINE_EXCEEDED|coordination service|'
            || 'CUDA (driver )?error|cuda runtime error|Unexpected error from cudaGetDeviceCount|out of memory|OutOfMemoryError|communicator was aborted|'
            || 'DataLoader worker \(pid \d+\) is killed by signal: (Killed|Terminated)|'
            || 'CalledProcessError\b.*Command ''\[''[^'']*python[0-9.]*'', |'
            || 'NaN|NAN|\bnan\b|loss scale already at minimum|Minimum loss scale reached|'
            || 'Errno (5|28|30|116|122)\]|Input/output error|No space left on device|Read-only file system|Stale file handle)')
        OR EXISTS (SELECT 1 FROM exception_symptoms s WHERE regexp_matches(coalesce(x.text, ''), s.pattern)) AS is_cascade_or_elsewhere,
        EXISTS (SELECT 1 FROM teardown_marks m
                WHERE m.attempt_id = x.attempt_id
                  AND ((m.ts IS NOT NULL AND x.ts IS NOT NULL AND m.ts <= x.ts) OR (m.uri = x.uri AND m.line < x.line))) AS after_stop
    FROM exceptions x
),
roots AS (
    SELECT *, count(DISTINCT node) OVER (PARTITION BY attempt_id, code_text, text) AS nodes_raising
    FROM classified
    WHERE NOT is_cascade_or_elsewhere AND NOT after_stop
),
job_wide AS (  -- the same root exception, or workers with the same positive exit status, on two or more nodes
    SELECT DISTINCT attempt_id FROM roots WHERE nodes_raising >= 2
    UNION
    SELECT attempt_id FROM events
    WHERE kind IN ('torchrun_failure', 'deepspeed_exit') AND exit_code > 0
    GROUP BY attempt_id, exit_code HAVING count(DISTINCT coalesce(node, json_extract_string(fields, '$.host'))) >= 2
)
SELECT attempt_id, event_id, 'python_exception' AS rule_id, 'symptom' AS role, NULL AS domain, NULL AS subdomain,
       node AS culprit_node, rank AS culprit_rank, NULL AS gpu, CASE WHEN rank IS NOT NULL THEN 'rank' ELSE 'node' END AS granularity,
       strength('python_exception') AS strength, ts,
       printf('%s on %s%s: %s', code_text, coalesce(node, '?'), CASE WHEN rank IS NOT NULL THEN ' rank ' || rank ELSE '' END,
              left(coalesce(text, ''), 160)) AS summary,
       'stop' AS action
FROM classified
WHERE is_cascade_or_elsewhere OR after_stop
UNION ALL
SELECT attempt_id, event_id, 'python_exception', 'root', 'application', 'exception',
       CASE WHEN nodes_raising >= 2 THEN NULL ELSE node END, rank, NULL,
       CASE WHEN nodes_raising >= 2 THEN 'job' WHEN rank IS NOT NULL THEN 'rank' ELSE 'node' END,
       CASE WHEN kind = 'exception_line' THEN strength('python_exception.line_only') ELSE strength('python_exception') END,  -- a line without its traceback may be a logged warning
       ts,
       printf('%s on %s%s: %s', code_text,
              CASE WHEN nodes_raising >= 2 THEN printf('%d nodes', nodes_raising) ELSE coalesce(node, '?') END,
              CASE WHEN rank IS NOT NULL AND nodes_raising < 2 THEN ' rank ' || rank ELSE '' END,
              left(coalesce(text, ''), 160)),
       'stop'
FROM roots
UNION ALL
SELECT e.attempt_id, e.event_id, 'python_exception', 'root', 'application', 'exception',
       CASE WHEN j.attempt_id IS NULL THEN coalesce(e.node, json_extract_string(e.fields, '$.host')) END, e.rank, NULL,
       CASE WHEN j.attempt_id IS NOT NULL THEN 'job' WHEN e.rank IS NOT NULL THEN 'rank' ELSE 'node' END,
       strength('python_exception.worker_exit'), e.ts,
       printf('%s exited with status %d on %s%s', CASE e.kind WHEN 'torchrun_failure' THEN 'worker' ELSE 'DeepSpeed rank' END,
              e.exit_code, coalesce(e.node, json_extract_string(e.fields, '$.host'), '?'),
              CASE WHEN e.rank IS NOT NULL THEN ' rank ' || e.rank ELSE '' END),
       'stop'
FROM events e
LEFT JOIN job_wide j USING (attempt_id)
WHERE e.kind IN ('torchrun_failure', 'deepspeed_exit') AND e.exit_code > 0
