-- id: roce_gid
-- detects: a RoCE queue pair that could not be connected with the GID NCCL chose (`Call to ibv_modify_qp failed …
--          local GID index N, local GID …`): the GID of that node's port does not route to its peer (a wrong or
--          missing GID index, an unconfigured address). The node that printed it is the culprit; when several nodes
--          print it, each is a cause and the verdict stays ambiguous. Verbs failures that name no GID, and NCCL's
--          INFO lines about the GID it picked, are not used.
-- domain: network/roce
-- inputs: events(kind = nccl_ibv with fields.gid_index or fields.local_gid)
SELECT e.attempt_id, e.event_id, 'roce_gid' AS rule_id, 'root' AS role, 'network' AS domain, 'roce' AS subdomain,
       e.node AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu, 'node' AS granularity, 0.7 AS strength, e.ts,
       printf('RoCE queue pair not connected on %s%s (%s, GID index %s)', coalesce(e.node, '?'),
              CASE WHEN e.device IS NOT NULL THEN ' ' || e.device ELSE '' END, coalesce(e.code_text, json_extract_string(e.fields, '$.reason'), '?'),
              coalesce(json_extract_string(e.fields, '$.gid_index'), '?')) AS summary,
       'restart_excluding_nodes' AS action
FROM events e
WHERE e.kind = 'nccl_ibv'
  AND coalesce(json_extract_string(e.fields, '$.verb'), '') = 'ibv_modify_qp'
  AND (json_extract_string(e.fields, '$.gid_index') IS NOT NULL OR json_extract_string(e.fields, '$.local_gid') IS NOT NULL)
