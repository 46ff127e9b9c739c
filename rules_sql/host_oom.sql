-- id: host_oom
-- detects: host memory exhaustion that killed a process: kernel or memory-cgroup OOM kills, Slurm "Out Of Memory"
--          task exits, slurmstepd's "Detected N oom-kill event(s)" record; the oom-kill constraint record only confirms.
--          A bare "Killed", a kill signal or a text that only guesses at memory ("Perhaps out of memory?") is not
--          proof and is not used.
-- domain: application/host_oom
-- inputs: events(kind in host_oom, oom_kill_record, slurm_oom, slurm_task_exit)
SELECT attempt_id, event_id, 'host_oom' AS rule_id,
       CASE WHEN kind IN ('host_oom', 'slurm_task_exit', 'slurm_oom') THEN 'root' ELSE 'confirmation' END AS role,
       'application' AS domain, 'host_oom' AS subdomain,
       coalesce(node, json_extract_string(fields, '$.slurm_node')) AS culprit_node, rank AS culprit_rank, NULL AS gpu,
       'node' AS granularity, CASE kind WHEN 'host_oom' THEN 0.85 WHEN 'slurm_oom' THEN 0.75 ELSE 0.8 END AS strength, ts,
       printf('host out of memory on %s: %s', coalesce(node, json_extract_string(fields, '$.slurm_node'), '?'), left(message, 140)) AS summary,
       'stop' AS action
FROM events
WHERE kind IN ('host_oom', 'oom_kill_record', 'slurm_oom')
   OR (kind = 'slurm_task_exit' AND code_text = 'Out Of Memory')
