-- id: dcgm_gpu_health
-- detects: GPU faults in DCGM metrics (transforms/metric_events.py) and in DCGM's health incidents as text
--          (transforms/patterns/dcgm.yaml: double-bit ECC, row remapping, NVLink errors and links down).
--          `DCGM_FI_DEV_XID_ERRORS` changes are classified like xid_root (the view xid_class: the catalogue, an
--          "application or GPU" Xid decided by its spread) but weaker than the
--          kernel line (the metric holds only the LAST Xid and drops repeats), so a kernel Xid on the same node joins
--          it as one cause; ECC double-bit errors and row-remap failures -> GPU memory; NVLink CRC/replay/recovery
--          error deltas -> NVLink; clock-event (throttle) bits only confirm a thermal/power cause unless a GPU stays
--          throttled for >= 3 consecutive samples.
-- domain: from xid_catalog (hardware/*, software/driver, application/cuda_error); hardware/gpu_memory, gpu_nvlink,
--         gpu_thermal, gpu_power
-- inputs: events(kind in dcgm_xid, dcgm_ecc_dbe, dcgm_row_remap, dcgm_nvlink_errors, gpu_throttle), xid_class, gpu_ranks
-- needs: dcgm_xid, dcgm_ecc_dbe, dcgm_row_remap, dcgm_nvlink_errors, gpu_throttle
WITH throttle AS (
    SELECT e.*,
           max(TRY_CAST(json_extract_string(e.fields, '$.run') AS INTEGER))
               OVER (PARTITION BY e.attempt_id, e.node, coalesce(e.gpu, json_extract_string(e.fields, '$.gpu_index'))) AS longest_run
    FROM events e
    WHERE e.kind = 'gpu_throttle'
)
SELECT e.attempt_id, e.event_id, 'dcgm_gpu_health' AS rule_id,
       CASE WHEN c.typical_domain IS NULL OR c.typical_domain = 'info' THEN 'confirmation' ELSE 'root' END AS role,
       nullif(c.typical_domain, 'info') AS domain, nullif(c.typical_subdomain, 'info') AS subdomain,
       e.node AS culprit_node, coalesce(g.rank, e.rank) AS culprit_rank, e.gpu,
       CASE WHEN e.gpu IS NOT NULL THEN 'gpu' ELSE 'node' END AS granularity,
       CASE WHEN c.typical_domain = 'hardware' THEN strength('dcgm.hardware') WHEN c.typical_domain = 'software' THEN strength('dcgm.software') ELSE strength('dcgm.other') END AS strength,
       e.ts,
       printf('DCGM: Xid %d (%s) on %s GPU %s', e.code, coalesce(c.mnemonic, 'UNKNOWN_XID'), coalesce(e.node, '?'),
              coalesce(e.gpu, json_extract_string(e.fields, '$.gpu_index'), '?')) || coalesce(c.spread_note, '') AS summary,
       CASE WHEN c.typical_domain = 'hardware' THEN 'drain_node' WHEN c.typical_domain = 'software' THEN 'investigate' ELSE 'restart' END AS action
FROM events e
LEFT JOIN xid_class c ON c.attempt_id = e.attempt_id AND c.event_id = e.event_id
LEFT JOIN gpu_ranks g ON g.attempt_id = e.attempt_id AND g.node = e.node AND g.gpu = e.gpu
WHERE e.kind = 'dcgm_xid'
UNION ALL
SELECT e.attempt_id, e.event_id, 'dcgm_gpu_health', 'root', 'hardware',
       CASE WHEN e.kind = 'dcgm_nvlink_errors' THEN 'gpu_nvlink' ELSE 'gpu_memory' END,
       e.node, g.rank, e.gpu, CASE WHEN e.gpu IS NOT NULL THEN 'gpu' ELSE 'node' END,
       CASE
           WHEN e.kind = 'dcgm_ecc_dbe' THEN strength('dcgm.memory_failure')
           WHEN e.kind = 'dcgm_row_remap' AND e.code_text = 'failure' THEN strength('dcgm.memory_failure')
           WHEN e.kind = 'dcgm_row_remap' THEN strength('dcgm.row_remapped')
           ELSE strength('dcgm.nvlink_errors')
       END,
       e.ts,
       printf('DCGM: %s on %s GPU %s', CASE e.kind
                  WHEN 'dcgm_ecc_dbe' THEN printf('%d new double-bit ECC error(s)', e.code)
                  WHEN 'dcgm_row_remap' THEN CASE WHEN e.code_text = 'failure' THEN 'row remapping failed' ELSE printf('%d uncorrectable row(s) remapped', e.code) END
                  ELSE printf('%d new NVLink error(s) (%s)', e.code, e.code_text)
              END, coalesce(e.node, '?'), coalesce(e.gpu, json_extract_string(e.fields, '$.gpu_index'), '?')),
       'drain_node'
FROM events e
LEFT JOIN gpu_ranks g ON g.attempt_id = e.attempt_id AND g.node = e.node AND g.gpu = e.gpu
WHERE e.kind IN ('dcgm_ecc_dbe', 'dcgm_row_remap', 'dcgm_nvlink_errors')
UNION ALL
SELECT t.attempt_id, t.event_id, 'dcgm_gpu_health',
       CASE WHEN t.longest_run >= 3 THEN 'root' ELSE 'confirmation' END, 'hardware',
       CASE WHEN t.code_text = 'power' THEN 'gpu_power' ELSE 'gpu_thermal' END,
       t.node, g.rank, t.gpu, CASE WHEN t.gpu IS NOT NULL THEN 'gpu' ELSE 'node' END,
       CASE WHEN t.longest_run >= 3 THEN strength('dcgm.throttled') ELSE strength('dcgm.throttle_sample') END, t.ts,
       printf('DCGM: GPU %s on %s %s-throttled (clock event reasons %d, %d consecutive sample(s))',
              coalesce(t.gpu, json_extract_string(t.fields, '$.gpu_index'), '?'), coalesce(t.node, '?'), t.code_text, t.code,
              t.longest_run),
       'drain_node'
FROM throttle t
LEFT JOIN gpu_ranks g ON g.attempt_id = t.attempt_id AND g.node = t.node AND g.gpu = t.gpu
