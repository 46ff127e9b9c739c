-- id: segfault
-- detects: a native crash reported by the kernel (`segfault at … in libX`); inside libnccl it points at NCCL
-- domain: software/nccl, application/exception
-- inputs: events(kind = segfault)
SELECT attempt_id, event_id, 'segfault' AS rule_id, 'root' AS role,
       CASE WHEN json_extract_string(fields, '$.library') ILIKE 'libnccl%' THEN 'software' ELSE 'application' END AS domain,
       CASE WHEN json_extract_string(fields, '$.library') ILIKE 'libnccl%' THEN 'nccl' ELSE 'exception' END AS subdomain,
       node AS culprit_node, rank AS culprit_rank, NULL AS gpu, 'node' AS granularity, 0.65 AS strength, ts,
       printf('segfault of %s in %s on %s', coalesce(json_extract_string(fields, '$.process'), '?'),
              coalesce(json_extract_string(fields, '$.library'), '?'), coalesce(node, '?')) AS summary,
       'investigate' AS action
FROM events
WHERE kind = 'segfault'
