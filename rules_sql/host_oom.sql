-- id: host_oom
-- detects: host memory exhaustion that killed a process: kernel or memory-cgroup OOM kills, Slurm "Out Of Memory"
--          task exits; the oom-kill constraint record and Slurm's oom_kill counter only confirm. A bare "Killed" is
--          not proof and is not used.
-- domain: application/host_oom
-- inputs: events(kind in host_oom, oom_kill_record, slurm_oom, slurm_task_exit)
SELECT attempt_id, event_id, 'host_oom' AS rule_id,
       CASE WHEN kind IN ('host_oom', 'slurm_task_exit') THEN 'root' ELSE 'confirmation' END AS role,
       'application' AS domain, 'host_oom' AS subdomain,
       coalesce(node, json_extract_string(fields, '$.slurm_node')) AS culprit_node, rank AS culprit_rank, NULL AS gpu,
       'node' AS granularity, CASE WHEN kind = 'host_oom' THEN 0.85 ELSE 0.8 END AS strength, ts,
       printf('host out of memory on %s: %s', coalesce(node, json_extract_string(fields, '$.slurm_node'), '?'), left(message, 140)) AS summary,
       'stop' AS action
FROM events
WHERE kind IN ('host_oom', 'oom_kill_record', 'slurm_oom')
   OR (kind = 'slurm_task_exit' AND code_text = 'Out Of Memory')
