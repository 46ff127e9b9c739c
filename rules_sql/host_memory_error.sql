-- id: host_memory_error
-- detects: uncorrectable host memory errors (EDAC UE, machine checks, Slurm UNCORRECTABLE MEMORY ERROR)
-- domain: hardware/host_memory
-- inputs: events(kind in host_memory_error, slurm_memory_error)
SELECT e.attempt_id, e.event_id, 'host_memory_error' AS rule_id,
       CASE WHEN e.kind = 'slurm_memory_error' OR e.severity = 'fatal' THEN 'root' ELSE 'confirmation' END AS role,
       'hardware' AS domain, 'host_memory' AS subdomain,
       coalesce(e.node, json_extract_string(e.fields, '$.slurm_node')) AS culprit_node, NULL::INTEGER AS culprit_rank,
       NULL AS gpu, 'node' AS granularity, strength('host_memory_error') AS strength, e.ts,
       printf('uncorrectable host memory error on %s', coalesce(e.node, json_extract_string(e.fields, '$.slurm_node'), '?')) AS summary,
       'drain_node' AS action
FROM events e
WHERE e.kind IN ('host_memory_error', 'slurm_memory_error')
