-- id: cuda_oom
-- detects: CUDA out-of-memory in the caching allocator or CUDA/cuBLAS allocation failures, also NCCL's own failed
--          allocation (`NCCL WARN Cuda failure 'out of memory'`: the communicator's buffers did not fit beside the model)
-- domain: application/cuda_oom
-- inputs: events(kind in cuda_oom, nccl_cuda)
SELECT attempt_id, event_id, 'cuda_oom' AS rule_id, 'root' AS role, 'application' AS domain, 'cuda_oom' AS subdomain,
       node AS culprit_node, rank AS culprit_rank, gpu, CASE WHEN rank IS NOT NULL THEN 'rank' ELSE 'node' END AS granularity,
       strength('cuda_oom') AS strength, ts,
       printf('CUDA out of memory on %s%s', coalesce(node, '?'), CASE WHEN rank IS NOT NULL THEN ' rank ' || rank ELSE '' END) AS summary,
       'stop' AS action
FROM events
WHERE kind = 'cuda_oom'
   OR (kind = 'nccl_cuda' AND code_text = 'out of memory')
