-- id: node_vanished
-- detects: a node that vanished under the job: its peers report their NCCL socket connections to it reset, closed or
--          broken (from two or more other nodes, or from every other node of a smaller job), and it reports no such
--          error itself. Weak (0.5): a concrete cause on that node (an Xid, an OOM kill, a crash) explains the
--          vanishing better and wins; with the scheduler's node-failure message it corroborates.
-- domain: infrastructure/node_failure
-- inputs: events(kind = nccl_socket, peer_node resolved from the static context's addresses, NCCL INFO lines and host names), attempts(nodes)
-- needs: nccl_socket
WITH reports AS (
    SELECT attempt_id, peer_node AS vanished, node AS reporter, min(ts) AS ts,
           arg_min(event_id, (ts, uri, line, event_id)) AS event_id
    FROM events
    WHERE kind = 'nccl_socket' AND peer_node IS NOT NULL AND node IS NOT NULL AND peer_node <> node
    GROUP BY ALL
),
named AS (
    SELECT r.attempt_id, r.vanished, count(DISTINCT r.reporter) AS reporters, min(r.ts) AS ts,
           arg_min(r.event_id, (r.ts, r.reporter, r.event_id)) AS event_id
    FROM reports r
    WHERE NOT EXISTS (SELECT 1 FROM events s WHERE s.attempt_id = r.attempt_id AND s.node = r.vanished AND s.kind = 'nccl_socket')
    GROUP BY ALL
)
SELECT n.attempt_id, n.event_id, 'node_vanished' AS rule_id, 'root' AS role, 'infrastructure' AS domain,
       'node_failure' AS subdomain, n.vanished AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu,
       'node' AS granularity, strength('node_vanished') AS strength, n.ts,
       printf('%s vanished: %d other node(s) lost their connections to it', n.vanished, n.reporters) AS summary,
       'restart_excluding_nodes' AS action
FROM named n
JOIN attempts a USING (attempt_id)
WHERE n.reporters >= least(2, len(a.nodes) - 1)
