-- id: nccl_peer_pattern
-- detects: the node that NCCL NET/IB completion errors implicate: many reporters failing toward one peer -> that
--          peer; one reporter failing toward many peers -> the reporter; a single edge -> both ends tie (ambiguous).
--          WR_FLUSH_ERR (status 5) is secondary and ignored; LOC_PROT_ERR (status 4) blames the reporter's NIC.
-- domain: network/ib_link, network/nic
-- inputs: events(kind = nccl_net_ib, peer_node resolved from NCCL INFO lines, host names and the node list)
-- needs: nccl_net_ib
WITH edges AS (
    SELECT attempt_id, node AS reporter, peer_node AS peer, min(ts) AS first_ts, arg_min(event_id, (ts, uri, line, event_id)) AS event_id
    FROM events
    WHERE kind = 'nccl_net_ib' AND coalesce(code, -1) NOT IN (4, 5)
      AND node IS NOT NULL AND peer_node IS NOT NULL AND peer_node <> node
    GROUP BY ALL
),
ends AS (
    SELECT attempt_id, reporter AS node, peer AS other, first_ts, event_id FROM edges
    UNION ALL
    SELECT attempt_id, peer AS node, reporter AS other, first_ts, event_id FROM edges
),
involvement AS (
    SELECT attempt_id, node, count(DISTINCT other) AS counterparts, min(first_ts) AS ts, arg_min(event_id, (first_ts, other, event_id)) AS event_id
    FROM ends
    GROUP BY ALL
),
implicated AS (
    SELECT *, max(counterparts) OVER (PARTITION BY attempt_id) AS best
    FROM involvement
)
SELECT attempt_id, event_id, 'nccl_peer_pattern' AS rule_id, 'root' AS role, 'network' AS domain, 'ib_link' AS subdomain,
       node AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu,
       CASE WHEN counterparts = 1 THEN 'link' ELSE 'node' END AS granularity, strength('nccl_peer_pattern') AS strength, ts,
       printf('NCCL NET/IB errors implicate %s (%d peer(s) failing with it)', node, counterparts) AS summary,
       'restart_excluding_nodes' AS action
FROM implicated
WHERE counterparts = best
UNION ALL
SELECT attempt_id, event_id, 'nccl_peer_pattern', 'root', 'network', 'nic', node, rank, NULL, 'node', strength('nccl_peer_pattern.local_protection'), ts,
       printf('NET/IB local protection error on %s (memory registration / GPUDirect RDMA)', coalesce(node, '?')),
       'restart_excluding_nodes'
FROM events
WHERE kind = 'nccl_net_ib' AND code = 4
