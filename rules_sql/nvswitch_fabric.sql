-- id: nvswitch_fabric
-- detects: fatal NVSwitch SXids and Fabric Manager fatal errors (the NVLink fabric inside a node); non-fatal ones confirm
-- domain: hardware/gpu_nvlink
-- inputs: events(kind in sxid, fabric_manager, nvlink_driver_error)
SELECT e.attempt_id, e.event_id, 'nvswitch_fabric' AS rule_id,
       CASE WHEN e.severity = 'fatal' OR e.kind = 'nvlink_driver_error' THEN 'root' ELSE 'confirmation' END AS role,
       'hardware' AS domain, 'gpu_nvlink' AS subdomain, e.node AS culprit_node, NULL::INTEGER AS culprit_rank,
       NULL AS gpu, 'node' AS granularity,
       CASE WHEN e.kind = 'sxid' THEN strength('nvswitch.sxid') ELSE strength('nvswitch.fabric') END AS strength, e.ts,
       printf('%s %s%s on %s', CASE e.kind WHEN 'sxid' THEN 'NVSwitch SXid' WHEN 'fabric_manager' THEN 'Fabric Manager error' ELSE 'NVLink driver error' END,
              coalesce(CAST(e.code AS VARCHAR), ''), CASE WHEN e.severity IS NOT NULL THEN ' (' || e.severity || ')' ELSE '' END,
              coalesce(e.node, '?')) AS summary,
       'drain_node' AS action
FROM events e
WHERE e.kind IN ('sxid', 'fabric_manager', 'nvlink_driver_error')
