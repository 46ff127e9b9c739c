-- id: xid_root
-- detects: an NVRM Xid whose catalog class can start a failure; secondary/informational Xids (43, 45, 63, 154, ...) and
--          NVLink5 Xids 144-150 marked Nonfatal only confirm; the driver's GSP heartbeat timeout (the GPU's firmware
--          stopped answering, as with Xid 119) is the node's gpu_firmware at 0.75, below a fatal Xid and below what a
--          COMPLETED attempt needs to count as failed
-- domain: from xid_catalog.typical_domain / typical_subdomain (hardware/*, software/driver, application/cuda_error)
-- inputs: events(kind in xid, gsp_heartbeat), xid_class, gpu_ranks, attempts(gpu_model)
-- needs: xid, gsp_heartbeat
-- An "application or GPU" Xid (xid_catalog.spread_subdomain, from xid_spread.csv: NVIDIA's WORKFLOW_XID_13/_31) is
-- decided by its spread (the view xid_class, _views.sql, which dcgm_gpu_health.sql reads too): on two or more GPUs of
-- the attempt it follows the application (the catalogue's class); on ONE GPU that also logged one, alone, in another
-- workload within gpu_history_days (gpu_xid_history) it follows the GPU: hardware/<spread_subdomain>, drain that
-- node. Retries of the same workload are not another application.
-- On an NVL72 rack (GB200/GB300) an Xid 149 whose sub-code (bits 20-25 of the first payload word) is 0x20-0x25
-- INVESTIGATE_PEER_DEVICE points at the far end of the link, which may sit on another tray: the reporting node stays
-- the only node we can name, but the cause is localised to the NVLink `group` at reduced strength (HGX boards keep both
-- ends inside the node, so there the node stays the culprit).
WITH hits AS (
    SELECT
        e.attempt_id,
        e.event_id,
        'xid_root' AS rule_id,
        CASE
            WHEN c.typical_domain IS NULL OR c.typical_domain = 'info' THEN 'confirmation'
            WHEN json_extract_string(e.fields, '$.caused_by_xid') IS NOT NULL THEN 'confirmation'
            -- NVLink5 units marked Nonfatal: the link recovered by itself; they support a root, never make one
            WHEN e.code BETWEEN 144 AND 150 AND e.severity = 'nonfatal' THEN 'confirmation'
            ELSE 'root'
        END AS role,
        nullif(c.typical_domain, 'info') AS domain,
        nullif(c.typical_subdomain, 'info') AS subdomain,
        e.node AS culprit_node,
        coalesce(g.rank, e.rank) AS culprit_rank,
        e.gpu,
        CASE WHEN e.gpu IS NOT NULL THEN 'gpu' ELSE 'node' END AS granularity,
        CASE
            WHEN c.workloads IS NOT NULL THEN strength('xid.gpu_by_history')  -- decided by history, not by the record itself
            WHEN c.typical_domain = 'hardware' AND coalesce(e.severity, 'fatal') = 'fatal' THEN strength('xid.fatal_hardware')
            WHEN c.typical_domain = 'hardware' THEN strength('xid.nonfatal_hardware')  -- NVLink5 "Nonfatal" units
            WHEN c.typical_domain = 'software' THEN strength('xid.software')
            ELSE strength('xid.application')
        END AS strength,
        e.ts,
        printf('Xid %d (%s)%s on %s GPU %s', e.code, coalesce(e.code_text, c.mnemonic, 'UNKNOWN_XID'),
               CASE WHEN e.severity IS NOT NULL THEN ' ' || e.severity ELSE '' END,
               coalesce(e.node, '?'), coalesce(e.gpu, '?'))
        || coalesce(c.spread_note, '') AS summary,
        CASE
            WHEN c.typical_domain = 'hardware' THEN 'drain_node'
            WHEN c.typical_domain = 'software' THEN 'investigate'
            ELSE 'restart'
        END AS action,
        coalesce(
            e.code = 149
            AND regexp_matches(upper(coalesce(a.gpu_model, '')), 'GB200|GB300|NVL72')
            AND ((TRY_CAST(split_part(trim(json_extract_string(e.fields, '$.payload')), ' ', 1) AS BIGINT) >> 20) & 63) BETWEEN 32 AND 37,
            false) AS peer
    FROM events e
    LEFT JOIN xid_class c ON c.attempt_id = e.attempt_id AND c.event_id = e.event_id
    LEFT JOIN gpu_ranks g ON g.attempt_id = e.attempt_id AND g.node = e.node AND g.gpu = e.gpu
    LEFT JOIN attempts a ON a.attempt_id = e.attempt_id
    WHERE e.kind = 'xid'
    UNION ALL
    SELECT e.attempt_id, e.event_id, 'xid_root', 'root', 'hardware', 'gpu_firmware', e.node, e.rank, e.gpu,
           'node', strength('gsp_heartbeat'), e.ts, printf('GSP firmware heartbeat timed out on %s', coalesce(e.node, '?')), 'drain_node', false
    FROM events e
    WHERE e.kind = 'gsp_heartbeat'
)
SELECT * EXCLUDE (peer) REPLACE (
    CASE WHEN peer THEN 'group' ELSE granularity END AS granularity,
    CASE WHEN peer THEN least(strength, strength('xid.nvl72_peer')) ELSE strength END AS strength,
    CASE WHEN peer THEN summary || ' (INVESTIGATE_PEER_DEVICE: the peer GPU may be on another NVL72 tray)' ELSE summary END AS summary)
FROM hits
