-- id: pcie_aer
-- detects: uncorrectable PCIe AER errors (root port in front of a GPU or NIC); correctable ones only confirm. (On a
--          node whose GPU fell off the bus the link went down under the lost GPU: one hardware cause, a causal chain in
--          rules_sql/chains.yaml.)
-- domain: hardware/pcie
-- inputs: events(kind = pcie_aer)
SELECT e.attempt_id, e.event_id, 'pcie_aer' AS rule_id,
       CASE WHEN e.severity IN ('fatal', 'nonfatal') THEN 'root' ELSE 'confirmation' END AS role,
       'hardware' AS domain, 'pcie' AS subdomain, e.node AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu,
       'node' AS granularity, CASE WHEN e.severity = 'fatal' THEN strength('pcie_aer.fatal') ELSE strength('pcie_aer.nonfatal') END AS strength, e.ts,
       printf('PCIe AER %s error at %s on %s', coalesce(e.severity, ''), coalesce(e.device, '?'), coalesce(e.node, '?')) AS summary,
       'drain_node' AS action
FROM events e
WHERE e.kind = 'pcie_aer'
