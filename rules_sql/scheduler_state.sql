-- id: scheduler_state
-- detects: the scheduler's own terminal state when it names a cause (TIMEOUT, PREEMPTED, NODE_FAIL, CANCELLED,
--          OUT_OF_MEMORY). Weaker than any log evidence, so it decides only when the logs have nothing earlier.
-- domain: infrastructure/time_limit, preemption, node_failure, cancelled; application/host_oom
-- inputs: attempts
SELECT attempt_id, NULL AS event_id, 'scheduler_state' AS rule_id, 'root' AS role,
       CASE WHEN state = 'OUT_OF_MEMORY' THEN 'application' ELSE 'infrastructure' END AS domain,
       CASE state
           WHEN 'TIMEOUT' THEN 'time_limit'
           WHEN 'PREEMPTED' THEN 'preemption'
           WHEN 'NODE_FAIL' THEN 'node_failure'
           WHEN 'OUT_OF_MEMORY' THEN 'host_oom'
           WHEN 'BOOT_FAIL' THEN 'node_failure'
           WHEN 'DEADLINE' THEN 'time_limit'
           ELSE 'cancelled'
       END AS subdomain,
       NULL AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu, 'job' AS granularity,
       CASE state WHEN 'PREEMPTED' THEN strength('scheduler.preempted') WHEN 'CANCELLED' THEN strength('scheduler.cancelled') ELSE strength('scheduler.state') END AS strength,
       end_ts AS ts,
       printf('scheduler state %s', state) AS summary,
       CASE state WHEN 'CANCELLED' THEN 'none' WHEN 'OUT_OF_MEMORY' THEN 'stop' ELSE 'restart' END AS action
FROM attempts
WHERE state IN ('TIMEOUT', 'PREEMPTED', 'NODE_FAIL', 'OUT_OF_MEMORY', 'BOOT_FAIL', 'DEADLINE', 'CANCELLED')
