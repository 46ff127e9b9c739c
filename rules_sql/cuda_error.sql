-- id: cuda_error
-- detects: CUDA runtime errors raised by the application or reported by the NCCL watchdog, read by their text:
--          ECC -> GPU memory, NVLink -> NVLink, no/busy device -> lost GPU, system not yet initialized -> the node's
--          driver, illegal address/assert -> application.
--          An illegal memory access that NCCL reports (`NCCL WARN Cuda failure 700 '...'`) is the application's too:
--          the error belongs to the process that made the access, so peers see only their lost connections. NCCL's
--          other CUDA failures (a launch failure, a lost device) follow a GPU fault and stay symptoms. So does its
--          illegal memory access once NCCL's InfiniBand work completions failed no later in the attempt (untimed lines
--          count as no later): the transport broke first (GPUDirect RDMA writing through a dead queue pair shows up as
--          an illegal access), so the access does not name the process that made it.
-- domain: application/cuda_error, hardware/gpu_memory, hardware/gpu_nvlink, hardware/gpu_lost, software/driver
-- inputs: events(kind in cuda_error, torch_watchdog_exception, nccl_cuda)
WITH classified AS (
    SELECT *,
        CASE
            WHEN code_text ILIKE '%ECC%' THEN 'hardware/gpu_memory'
            WHEN code_text ILIKE '%uncorrectable NVLink error%' THEN 'hardware/gpu_nvlink'  -- not any text naming NVLink
            WHEN code_text ILIKE '%busy or unavailable%' OR code_text ILIKE '%no CUDA-capable device%' THEN 'hardware/gpu_lost'
            -- cudaErrorSystemNotReady (802): a driver daemon the node needs is down (Fabric Manager on NVSwitch boards)
            WHEN code_text ILIKE '%system not yet initialized%' THEN 'software/driver'
            ELSE 'application/cuda_error'
        END AS cause,
        kind = 'nccl_cuda' AND EXISTS (
            SELECT 1 FROM events ib
            WHERE ib.attempt_id = events.attempt_id AND ib.kind = 'nccl_net_ib' AND coalesce(ib.ts <= events.ts, true)
        ) AS after_transport_failure
    FROM events
    WHERE (kind = 'cuda_error' AND code_text NOT ILIKE '%previous error during capture%')
       OR (kind = 'torch_watchdog_exception' AND code_text ILIKE '%CUDA error%')
       OR (kind = 'nccl_cuda' AND code_text ILIKE '%illegal memory access%')
)
SELECT attempt_id, event_id, 'cuda_error' AS rule_id, CASE WHEN after_transport_failure THEN 'symptom' ELSE 'root' END AS role,
       CASE WHEN NOT after_transport_failure THEN split_part(cause, '/', 1) END AS domain,
       CASE WHEN NOT after_transport_failure THEN split_part(cause, '/', 2) END AS subdomain,
       node AS culprit_node, rank AS culprit_rank, gpu, CASE WHEN rank IS NOT NULL THEN 'rank' ELSE 'node' END AS granularity,
       CASE
           WHEN cause <> 'application/cuda_error' THEN 0.6  -- the kernel record (Xid) is the stronger witness
           WHEN code_text ILIKE '%unspecified launch failure%' OR code_text ILIKE '%unknown error%' THEN 0.5
           WHEN kind = 'nccl_cuda' THEN 0.65  -- the library's report of the failed call, one step from the raise
           ELSE 0.75
       END AS strength, ts,
       printf('CUDA error on %s%s: %s', coalesce(node, '?'), CASE WHEN rank IS NOT NULL THEN ' rank ' || rank ELSE '' END, code_text) AS summary,
       CASE WHEN cause LIKE 'hardware/%' THEN 'drain_node' WHEN cause = 'software/driver' THEN 'investigate' ELSE 'stop' END AS action
FROM classified
