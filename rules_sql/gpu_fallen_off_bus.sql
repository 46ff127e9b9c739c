-- id: gpu_fallen_off_bus
-- detects: a GPU that fell off the bus (bare driver lines, also split over continuation lines; the Xid 79 line itself
--          is handled by xid_root), and nvidia-smi or another NVML user unable to reach it ("GPU is lost": pynvml's
--          NVMLError_GpuIsLost, Slurm's NVML plugin)
-- domain: hardware/gpu_lost
-- inputs: events(kind = gpu_fallen_off_bus), gpu_ranks
-- needs: gpu_fallen_off_bus
SELECT e.attempt_id, e.event_id, 'gpu_fallen_off_bus' AS rule_id, 'root' AS role,
       'hardware' AS domain, 'gpu_lost' AS subdomain, e.node AS culprit_node, coalesce(g.rank, e.rank) AS culprit_rank,
       e.gpu, CASE WHEN e.gpu IS NOT NULL THEN 'gpu' ELSE 'node' END AS granularity,
       CASE WHEN e.code_text = 'GPU is lost' THEN strength('gpu_fallen_off_bus.lost') ELSE strength('gpu_fallen_off_bus.fallen') END AS strength, e.ts,
       printf('GPU %s on %s has fallen off the bus', coalesce(e.gpu, '?'), coalesce(e.node, '?')) AS summary,
       'drain_node' AS action
FROM events e
LEFT JOIN gpu_ranks g ON g.attempt_id = e.attempt_id AND g.node = e.node AND g.gpu = e.gpu
WHERE e.kind = 'gpu_fallen_off_bus'
