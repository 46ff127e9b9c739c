-- id: ib_link_kernel
-- detects: InfiniBand/RoCE/Ethernet link loss in the kernel log (carrier down, cable/module errors, mlx5/EFA health),
--          and the HCA asynchronous events NCCL reports (port error -> the link; catastrophic, or any event NCCL calls
--          fatal (QP, CQ) -> the NIC; informational events such as a GID table change or a port going active are not used;
--          a record its emitter calls non-fatal or a command the NIC refused is a root of low strength (the device still
--          answers: the ranking keeps such a root only with a witnessed consequence)),
--          and the EFA network plugin (aws-ofi-nccl) failing to open a fabric, domain or endpoint on its NIC
-- domain: network/ib_link, network/roce, network/nic
-- inputs: events(kind in ib_link, ib_port_module, nic_health, nccl_ib_async, nccl_ofi_resource)
SELECT e.attempt_id, e.event_id, 'ib_link_kernel' AS rule_id,
       CASE
           WHEN e.kind = 'ib_link' AND e.code_text = 'down' THEN 'root'
           WHEN e.kind = 'ib_port_module' AND (e.severity = 'error' OR e.code_text ILIKE '%unplugged%') THEN 'root'
           WHEN e.kind IN ('nic_health', 'nccl_ofi_resource') THEN 'root'
           WHEN e.kind = 'nccl_ib_async' AND (json_extract_string(e.fields, '$.fatal') IS NOT NULL
                OR regexp_matches(coalesce(e.code_text, ''), '(?i)port error|catastrophic|fatal|work queue error|access violation')) THEN 'root'
           ELSE 'ignored'
       END AS role,
       'network' AS domain,
       CASE
           WHEN e.kind IN ('nic_health', 'nccl_ofi_resource') THEN 'nic'
           WHEN e.kind = 'nccl_ib_async' AND e.code_text NOT ILIKE '%port error%' THEN 'nic'
           WHEN regexp_matches(coalesce(e.device, ''), '^(en|eth)') THEN 'roce'
           ELSE 'ib_link'
       END AS subdomain,
       e.node AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu, 'node' AS granularity,
       CASE WHEN e.severity IN ('nonfatal', 'advisory') THEN strength('ib_link.advisory') WHEN e.kind = 'nccl_ofi_resource' THEN strength('ib_link.ofi_resource') WHEN e.kind IN ('nic_health', 'nccl_ib_async') THEN strength('ib_link.nic_event') ELSE strength('ib_link.down') END AS strength, e.ts,
       printf('%s %s on %s', CASE e.kind WHEN 'ib_link' THEN 'link ' || coalesce(e.code_text, '') WHEN 'nic_health' THEN 'NIC health:'
                          WHEN 'nccl_ib_async' THEN 'NCCL HCA async event:' WHEN 'nccl_ofi_resource' THEN 'EFA plugin could not open its NIC:'
                          ELSE 'port module event:' END,
              coalesce(e.device, e.code_text, ''), coalesce(e.node, '?')) AS summary,
       'restart_excluding_nodes' AS action
FROM events e
WHERE e.kind IN ('ib_link', 'ib_port_module', 'nic_health', 'nccl_ib_async', 'nccl_ofi_resource')
