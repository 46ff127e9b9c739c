-- id: pcie_aer
-- detects: uncorrectable PCIe AER errors (root port in front of a GPU or NIC); correctable ones only confirm, and so
--          do all of them on a node whose GPU fell off the bus (the link went down under the lost GPU: one hardware cause)
-- domain: hardware/pcie
-- inputs: events(kind in pcie_aer, gpu_fallen_off_bus, xid)
SELECT e.attempt_id, e.event_id, 'pcie_aer' AS rule_id,
       CASE WHEN e.severity IN ('fatal', 'nonfatal')
                 AND NOT EXISTS (SELECT 1 FROM events g
                                 WHERE g.attempt_id = e.attempt_id AND g.node = e.node
                                   AND (g.kind = 'gpu_fallen_off_bus' OR (g.kind = 'xid' AND g.code = 79)))
            THEN 'root' ELSE 'confirmation' END AS role,
       'hardware' AS domain, 'pcie' AS subdomain, e.node AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu,
       'node' AS granularity, CASE WHEN e.severity = 'fatal' THEN 0.85 ELSE 0.7 END AS strength, e.ts,
       printf('PCIe AER %s error at %s on %s', coalesce(e.severity, ''), coalesce(e.device, '?'), coalesce(e.node, '?')) AS summary,
       'drain_node' AS action
FROM events e
WHERE e.kind = 'pcie_aer'
