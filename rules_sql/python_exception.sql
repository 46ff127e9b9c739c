-- id: python_exception
-- detects: the innermost exception of a Python traceback that is not itself a symptom of a distributed failure
--          (DistBackendError / NCCL texts / ChildFailedError / SIGTERM exits are cascade; CUDA texts and OOM have
--          their own rules), and torchrun entries that exited with a positive status
-- domain: application/exception
-- inputs: events(kind in python_exception, torchrun_failure, deepspeed_exit)
WITH exceptions AS (
    SELECT *, json_extract_string(fields, '$.message') AS text
    FROM events
    WHERE kind = 'python_exception' AND coalesce(json_extract_string(fields, '$.innermost'), 'true') = 'true'
),
classified AS (
    SELECT *,
        regexp_matches(coalesce(code_text, '') || ' ' || coalesce(text, ''),
            '(DistBackendError|ChildFailedError|NCCL|ncclRemoteError|ncclSystemError|ncclInternalError|Watchdog|watchdog|'
            || 'ProcessGroup|Connection reset|Broken pipe|SIGTERM|SignalException|KeyboardInterrupt|SystemExit|'
            || 'CUDA error|out of memory|OutOfMemoryError|communicator was aborted)') AS is_cascade_or_elsewhere
    FROM exceptions
)
SELECT attempt_id, event_id, 'python_exception' AS rule_id,
       CASE WHEN is_cascade_or_elsewhere THEN 'symptom' ELSE 'root' END AS role,
       CASE WHEN is_cascade_or_elsewhere THEN NULL ELSE 'application' END AS domain,
       CASE WHEN is_cascade_or_elsewhere THEN NULL ELSE 'exception' END AS subdomain,
       node AS culprit_node, rank AS culprit_rank, NULL AS gpu, CASE WHEN rank IS NOT NULL THEN 'rank' ELSE 'node' END AS granularity,
       0.7 AS strength, ts,
       printf('%s on %s%s: %s', code_text, coalesce(node, '?'), CASE WHEN rank IS NOT NULL THEN ' rank ' || rank ELSE '' END,
              left(coalesce(text, ''), 160)) AS summary,
       'stop' AS action
FROM classified
UNION ALL
SELECT attempt_id, event_id, 'python_exception', 'root', 'application', 'exception',
       coalesce(node, json_extract_string(fields, '$.host')), rank, NULL, CASE WHEN rank IS NOT NULL THEN 'rank' ELSE 'node' END,
       0.45, ts,
       printf('%s exited with status %d on %s%s', CASE kind WHEN 'torchrun_failure' THEN 'worker' ELSE 'DeepSpeed rank' END,
              exit_code, coalesce(node, json_extract_string(fields, '$.host'), '?'),
              CASE WHEN rank IS NOT NULL THEN ' rank ' || rank ELSE '' END),
       'stop'
FROM events
WHERE kind IN ('torchrun_failure', 'deepspeed_exit') AND exit_code > 0
