-- id: ignored_context
-- detects: lines that are context, advice or noise: CUDA advice text, dump notices, NCCL INFO topology lines, GPU
--          identity and model lines. They get the role `ignored` so it is visible that they were read and not used.
--          Progress markers are not among them: hang and the progress timeline use them (and they are most of a
--          training log's events, so an `ignored` hit each would double the rule_hits of a fleet).
-- domain: none
-- inputs: events
SELECT attempt_id, event_id, 'ignored_context' AS rule_id, 'ignored' AS role, NULL AS domain, NULL AS subdomain,
       node AS culprit_node, rank AS culprit_rank, gpu, 'rank' AS granularity, strength('none') AS strength, ts,
       printf('%s (context)', kind) AS summary, NULL AS action
FROM events
WHERE kind IN ('advice', 'torch_dump_notice', 'torch_dump_signal', 'nccl_comm_init', 'nccl_net_using', 'nccl_bootstrap',
               'gpu_identity', 'gpu_model', 'sxid_detail', 'peermem_error', 'deepspeed_kill', 'nccl_socket_transport')
