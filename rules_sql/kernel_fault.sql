-- id: kernel_fault
-- detects: the node's kernel stopped serving the job: a panic, an oops (the kernel faulted in its own code), a soft
--          lockup (a CPU stuck in the kernel), an RCU stall or a hard lockup (a CPU that stopped answering) or a hung
--          task (a process blocked in the kernel for minutes). A hung task is usually the consequence of something it
--          waits for (NFS, a disk), so it is weaker than the storage rules; a machine-check panic is left to
--          host_memory_error.
-- domain: software/kernel
-- inputs: events(kind in kernel_panic, kernel_oops, soft_lockup, cpu_stall, hung_task)
SELECT attempt_id, event_id, 'kernel_fault' AS rule_id, 'root' AS role, 'software' AS domain, 'kernel' AS subdomain,
       node AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu, 'node' AS granularity,
       CASE WHEN kind = 'kernel_panic' THEN strength('kernel_fault.panic') WHEN kind IN ('kernel_oops', 'soft_lockup', 'cpu_stall') THEN strength('kernel_fault.lockup') ELSE strength('kernel_fault.hung_task') END AS strength, ts,
       printf('%s on %s%s', CASE kind WHEN 'kernel_panic' THEN 'kernel panic' WHEN 'soft_lockup' THEN 'soft lockup' WHEN 'kernel_oops' THEN 'kernel oops'
                          WHEN 'cpu_stall' THEN replace(code_text, '_', ' ') ELSE 'hung task' END,
              coalesce(node, '?'),
              coalesce(': ' || json_extract_string(fields, '$.reason'), ': ' || json_extract_string(fields, '$.process'), '')) AS summary,
       'restart_excluding_nodes' AS action
FROM events
WHERE kind IN ('kernel_oops', 'soft_lockup', 'cpu_stall', 'hung_task')
   OR (kind = 'kernel_panic' AND coalesce(json_extract_string(fields, '$.reason'), '') NOT ILIKE '%machine check%')
