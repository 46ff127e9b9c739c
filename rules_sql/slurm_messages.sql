-- id: slurm_messages
-- detects: what slurmstepd/srun print when the scheduler ends a job: time limit, preemption, node failure, requeue,
--          a plain cancel, and node failures named by srun/salloc
-- domain: infrastructure/time_limit, preemption, node_failure, maintenance, cancelled
-- inputs: events(kind in slurm_cancel, slurm_node_failure)
SELECT attempt_id, event_id, 'slurm_messages' AS rule_id, 'root' AS role, 'infrastructure' AS domain,
       CASE coalesce(code_text, '')
           WHEN 'TIME LIMIT' THEN 'time_limit'
           WHEN 'PREEMPTION' THEN 'preemption'
           WHEN 'NODE FAILURE' THEN 'node_failure'
           WHEN 'JOB REQUEUE' THEN 'maintenance'
           ELSE 'cancelled'
       END AS subdomain,
       CASE WHEN code_text = 'NODE FAILURE' THEN NULL END AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu,
       'job' AS granularity,
       CASE coalesce(code_text, '') WHEN 'PREEMPTION' THEN 0.8 WHEN 'TIME LIMIT' THEN 0.6 WHEN 'NODE FAILURE' THEN 0.6 ELSE 0.55 END AS strength,
       ts,
       printf('Slurm: %s %s', coalesce(json_extract_string(fields, '$.job'), json_extract_string(fields, '$.step'), 'job'),
              CASE WHEN code_text IS NULL THEN 'cancelled' ELSE 'cancelled due to ' || lower(code_text) END) AS summary,
       CASE coalesce(code_text, '') WHEN 'TIME LIMIT' THEN 'restart' WHEN 'PREEMPTION' THEN 'restart'
            WHEN 'NODE FAILURE' THEN 'restart_excluding_nodes' WHEN 'JOB REQUEUE' THEN 'restart' ELSE 'none' END AS action
FROM events
WHERE kind = 'slurm_cancel' AND coalesce(code_text, '') <> 'TASK FAILURE'
UNION ALL
SELECT attempt_id, event_id, 'slurm_messages', 'root', 'infrastructure', 'node_failure',
       coalesce(json_extract_string(fields, '$.slurm_node'), node), NULL::INTEGER, NULL, 'node', 0.7, ts,
       printf('Slurm reports node failure on %s', coalesce(json_extract_string(fields, '$.slurm_node'), node, '?')),
       'restart_excluding_nodes'
FROM events
WHERE kind = 'slurm_node_failure'
