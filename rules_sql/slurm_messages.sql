-- id: slurm_messages
-- detects: what slurmstepd/srun print when the scheduler ends a job: time limit, preemption, node failure, requeue,
--          a plain cancel, and node failures named by srun/salloc; a task launch that failed on exactly one node is that
--          node's failure (its slurmd did not start the tasks), on several nodes it names none of them. A plain cancel (no DUE TO) is a user/admin cancel
--          only when the scheduler state is CANCELLED or unknown; otherwise it is srun tearing down the step after
--          another failure (e.g. after slurmstepd detected an oom_kill event) and only a symptom.
-- domain: infrastructure/time_limit, preemption, node_failure, maintenance, cancelled
-- inputs: events(kind in slurm_cancel, slurm_node_failure, slurm_launch_failed), attempts(state)
-- needs: slurm_cancel, slurm_node_failure, slurm_launch_failed
WITH cancels AS (
    SELECT e.*, e.code_text IS NULL AND a.state IS NOT NULL AND NOT starts_with(a.state, 'CANCELLED') AS is_teardown
    FROM events e JOIN attempts a USING (attempt_id)
    WHERE e.kind = 'slurm_cancel' AND coalesce(e.code_text, '') <> 'TASK FAILURE'
)
SELECT attempt_id, event_id, 'slurm_messages' AS rule_id, CASE WHEN is_teardown THEN 'symptom' ELSE 'root' END AS role,
       CASE WHEN NOT is_teardown THEN 'infrastructure' END AS domain,
       CASE WHEN NOT is_teardown THEN
       CASE coalesce(code_text, '')
           WHEN 'TIME LIMIT' THEN 'time_limit'
           WHEN 'PREEMPTION' THEN 'preemption'
           WHEN 'NODE FAILURE' THEN 'node_failure'
           WHEN 'JOB REQUEUE' THEN 'maintenance'
           ELSE 'cancelled'
       END END AS subdomain,
       CASE WHEN code_text = 'NODE FAILURE' THEN NULL END AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu,
       'job' AS granularity,
       CASE coalesce(code_text, '') WHEN 'PREEMPTION' THEN strength('slurm.preemption') WHEN 'TIME LIMIT' THEN strength('slurm.time_limit') WHEN 'NODE FAILURE' THEN strength('slurm.node_failure') ELSE strength('slurm.other') END AS strength,
       ts,
       printf('Slurm: %s %s', coalesce(json_extract_string(fields, '$.job'), json_extract_string(fields, '$.step'), 'job'),
              CASE WHEN code_text IS NULL THEN 'cancelled' ELSE 'cancelled due to ' || lower(code_text) END) AS summary,
       CASE coalesce(code_text, '') WHEN 'TIME LIMIT' THEN 'restart' WHEN 'PREEMPTION' THEN 'restart'
            WHEN 'NODE FAILURE' THEN 'restart_excluding_nodes' WHEN 'JOB REQUEUE' THEN 'restart' ELSE 'none' END AS action
FROM cancels
UNION ALL
SELECT attempt_id, event_id, 'slurm_messages', 'root', 'infrastructure', 'node_failure',
       coalesce(json_extract_string(fields, '$.slurm_node'), node), NULL::INTEGER, NULL, 'node', strength('slurm.node_failure_named'), ts,
       printf('Slurm reports node failure on %s', coalesce(json_extract_string(fields, '$.slurm_node'), node, '?')),
       'restart_excluding_nodes'
FROM events
WHERE kind = 'slurm_node_failure'
UNION ALL
SELECT attempt_id, event_id, 'slurm_messages', CASE WHEN one_node THEN 'root' ELSE 'symptom' END,
       CASE WHEN one_node THEN 'infrastructure' END, CASE WHEN one_node THEN 'node_failure' END,
       slurm_node, NULL::INTEGER, NULL, 'node', strength('slurm.launch_failed'), ts,
       printf('Slurm could not launch the tasks on %s: %s', coalesce(slurm_node, '?'), coalesce(json_extract_string(fields, '$.reason'), '?')),
       'restart_excluding_nodes'
FROM (
    SELECT *, json_extract_string(fields, '$.slurm_node') AS slurm_node,
           count(DISTINCT json_extract_string(fields, '$.slurm_node')) OVER (PARTITION BY attempt_id) = 1 AS one_node
    FROM events
    WHERE kind = 'slurm_launch_failed' AND json_extract_string(fields, '$.slurm_node') IS NOT NULL
)
