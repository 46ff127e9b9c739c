-- id: roce_gid
-- detects: a RoCE queue pair that could not be connected with the GID NCCL chose (`Call to ibv_modify_qp failed …
--          local GID index N, local GID …`): the GID of that node's port does not route to its peer (a wrong or
--          missing GID index, an unconfigured address). The node that printed it is the culprit. Its peers' queue
--          pairs towards it fail the same way, naming its GID as their remote GID: a node whose GID the failures of
--          two or more other nodes name, more than any other's, is the culprit and those nodes' failures are its
--          symptoms; without such a node every node that printed one is a cause and the verdict stays ambiguous.
--          Verbs failures that name no GID, and NCCL's INFO lines about the GID it picked, are not used.
-- domain: network/roce
-- inputs: events(kind = nccl_ibv with fields.gid_index or fields.local_gid)
-- needs: nccl_ibv
WITH failures AS (
    SELECT e.*, lower(json_extract_string(e.fields, '$.local_gid')) AS local_gid,
           lower(json_extract_string(e.fields, '$.remote_gid')) AS remote_gid
    FROM events e
    WHERE e.kind = 'nccl_ibv'
      AND coalesce(json_extract_string(e.fields, '$.verb'), '') = 'ibv_modify_qp'
      AND (json_extract_string(e.fields, '$.gid_index') IS NOT NULL OR json_extract_string(e.fields, '$.local_gid') IS NOT NULL)
),
gid_owners AS (  -- the GID each failing node printed as its own
    SELECT DISTINCT attempt_id, local_gid AS gid, node FROM failures WHERE local_gid IS NOT NULL AND node IS NOT NULL
),
named AS (  -- per node: how many other failing nodes name its GID as the remote end of their failed queue pairs
    SELECT o.attempt_id, o.node, count(DISTINCT f.node) AS namers
    FROM failures f JOIN gid_owners o ON o.attempt_id = f.attempt_id AND o.gid = f.remote_gid AND o.node <> f.node
    GROUP BY ALL
),
fan_in AS (  -- the node the most others name, when two or more do and no other node is named as often
    SELECT attempt_id, node FROM named
    QUALIFY rank() OVER (PARTITION BY attempt_id ORDER BY namers DESC) = 1
        AND count(*) OVER (PARTITION BY attempt_id, namers) = 1 AND namers >= 2
),
judged AS (
    SELECT f.*, c.node IS NULL OR c.node = f.node AS is_root
    FROM failures f LEFT JOIN fan_in c USING (attempt_id)
)
SELECT attempt_id, event_id, 'roce_gid' AS rule_id, CASE WHEN is_root THEN 'root' ELSE 'symptom' END AS role,
       CASE WHEN is_root THEN 'network' END AS domain, CASE WHEN is_root THEN 'roce' END AS subdomain,
       CASE WHEN is_root THEN node END AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu, 'node' AS granularity,
       strength('roce_gid') AS strength, ts,
       printf('RoCE queue pair not connected on %s%s (%s, GID index %s)', coalesce(node, '?'),
              CASE WHEN device IS NOT NULL THEN ' ' || device ELSE '' END, coalesce(code_text, json_extract_string(fields, '$.reason'), '?'),
              coalesce(json_extract_string(fields, '$.gid_index'), '?')) AS summary,
       'restart_excluding_nodes' AS action
FROM judged
