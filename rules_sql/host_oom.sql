-- id: host_oom
-- detects: host memory exhaustion that killed a process: kernel or memory-cgroup OOM kills, Slurm "Out Of Memory"
--          task exits, slurmstepd's "Detected N oom-kill event(s)" record and its "exceeded memory limit …, being
--          killed"; the oom-kill constraint record names the victim too (alone when the kill line was rate-limited or
--          lost), and the head of the record ("… invoked oom-killer") only confirms. A bare "Killed", a kill signal or a text that only
--          guesses at memory ("Perhaps out of memory?") is not proof and is not used. A job-level record without a
--          node ("Job N exceeded memory limit") comes from the batch step's slurmstepd, which also prints the job's
--          cancel ("*** JOB N ON <node> CANCELLED ***"): it takes that node. A step's record does not: every node of a
--          multi-node step prints its own cancel, and srun forwards whichever came first.
-- domain: application/host_oom
-- inputs: events(kind in host_oom, oom_kill_record, oom_invoked, slurm_oom, slurm_task_exit, slurm_cancel)
WITH job_cancelled_on AS (
    SELECT attempt_id, json_extract_string(fields, '$.job') AS job, any_value(json_extract_string(fields, '$.slurm_node')) AS slurm_node
    FROM events
    WHERE kind = 'slurm_cancel' AND json_extract_string(fields, '$.step') IS NULL
      AND json_extract_string(fields, '$.slurm_node') IS NOT NULL
    GROUP BY ALL
    HAVING count(DISTINCT json_extract_string(fields, '$.slurm_node')) = 1
),
oom AS (
    SELECT e.*, coalesce(e.node, json_extract_string(e.fields, '$.slurm_node'), c.slurm_node) AS oom_node
    FROM events e
    LEFT JOIN job_cancelled_on c
        ON e.kind = 'slurm_oom' AND json_extract_string(e.fields, '$.step') IS NULL
       AND c.attempt_id = e.attempt_id AND c.job = json_extract_string(e.fields, '$.job')
    WHERE e.kind IN ('host_oom', 'oom_kill_record', 'oom_invoked', 'slurm_oom')
       OR (e.kind = 'slurm_task_exit' AND e.code_text = 'Out Of Memory')
)
SELECT attempt_id, event_id, 'host_oom' AS rule_id,
       CASE WHEN kind = 'oom_invoked' THEN 'confirmation' ELSE 'root' END AS role,
       'application' AS domain, 'host_oom' AS subdomain,
       oom_node AS culprit_node, rank AS culprit_rank, NULL AS gpu,
       'node' AS granularity, CASE kind WHEN 'host_oom' THEN strength('host_oom.kernel_kill') WHEN 'slurm_oom' THEN strength('host_oom.slurmstepd') ELSE strength('host_oom.kill_record') END AS strength, ts,
       printf('host out of memory on %s: %s', coalesce(oom_node, '?'), left(message, 140)) AS summary,
       'stop' AS action
FROM oom
