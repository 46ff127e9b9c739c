-- id: driver_mismatch
-- detects: the node's NVIDIA driver components out of step (the kernel module and the user-space driver of different
--          versions, after an upgrade without a reboot): the kernel's "NVRM: API mismatch" and NVML's
--          NVML_ERROR_LIB_RM_VERSION_MISMATCH as nvidia-smi, nvidia-container-cli and pynvml print it. No process on
--          that node can use a GPU until it reboots, so the node is drained (the CUDA errors of its ranks follow from
--          it: a causal chain, rules_sql/chains.yaml)
-- domain: software/driver
-- inputs: events(kind = driver_mismatch)
SELECT e.attempt_id, e.event_id, 'driver_mismatch' AS rule_id, 'root' AS role,
       'software' AS domain, 'driver' AS subdomain, e.node AS culprit_node, e.rank AS culprit_rank, NULL AS gpu,
       'node' AS granularity, strength('driver_mismatch') AS strength, e.ts,
       printf('NVIDIA driver components out of step on %s%s: reboot the node', coalesce(e.node, '?'),
              CASE WHEN json_extract_string(e.fields, '$.module_version') IS NOT NULL
                   THEN printf(' (kernel module %s, client %s)', json_extract_string(e.fields, '$.module_version'),
                               coalesce(json_extract_string(e.fields, '$.client_version'), '?'))
                   ELSE '' END) AS summary,
       'drain_node' AS action
FROM events e
WHERE e.kind = 'driver_mismatch'
