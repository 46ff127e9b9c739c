-- id: cuda_error
-- detects: CUDA runtime errors raised by the application or reported by the NCCL watchdog, read by their text:
--          ECC -> GPU memory, NVLink -> NVLink, no/busy device -> lost GPU, system not yet initialized -> the node's
--          driver, illegal address/assert -> application.
--          An illegal memory access that NCCL reports (`NCCL WARN Cuda failure 700 '...'`) is the application's too:
--          the error belongs to the process that made the access, so peers see only their lost connections. NCCL's
--          other CUDA failures (a launch failure, a lost device) follow a GPU fault and stay symptoms. (NCCL's illegal
--          access after its InfiniBand completions failed is the transport's: a causal chain, rules_sql/chains.yaml.)
--          The same application error raised on two or more nodes is the job's code, not a node's: no culprit node.
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
        END AS cause
    FROM events
    WHERE (kind = 'cuda_error' AND code_text NOT ILIKE '%previous error during capture%')
       OR (kind = 'torch_watchdog_exception' AND code_text ILIKE '%CUDA error%')
       OR (kind = 'nccl_cuda' AND code_text ILIKE '%illegal memory access%')
),
spread AS (
    SELECT *, cause = 'application/cuda_error'
              AND count(DISTINCT node) OVER (PARTITION BY attempt_id, cause, code_text) >= 2 AS job_wide
    FROM classified
)
SELECT attempt_id, event_id, 'cuda_error' AS rule_id, 'root' AS role,
       split_part(cause, '/', 1) AS domain, split_part(cause, '/', 2) AS subdomain,
       CASE WHEN NOT job_wide THEN node END AS culprit_node, rank AS culprit_rank, gpu,
       CASE WHEN job_wide THEN 'job' WHEN rank IS NOT NULL THEN 'rank' ELSE 'node' END AS granularity,
       CASE
           WHEN cause <> 'application/cuda_error' THEN strength('cuda_error.hardware')  -- the kernel record (Xid) is the stronger witness
           WHEN code_text ILIKE '%unspecified launch failure%' OR code_text ILIKE '%unknown error%' THEN strength('cuda_error.unspecified')
           WHEN kind = 'nccl_cuda' THEN strength('cuda_error.nccl_report')  -- the library's report of the failed call, one step from the raise
           ELSE strength('cuda_error.application')
       END AS strength, ts,
       printf('CUDA error on %s%s: %s', CASE WHEN job_wide THEN 'several nodes' ELSE coalesce(node, '?') END,
              CASE WHEN rank IS NOT NULL AND NOT job_wide THEN ' rank ' || rank ELSE '' END, code_text) AS summary,
       CASE WHEN cause LIKE 'hardware/%' THEN 'drain_node' WHEN cause = 'software/driver' THEN 'investigate' ELSE 'stop' END AS action
FROM spread
