-- id: nccl_cascade
-- detects: the cascade a failure leaves behind: NCCL WARN/errors, ncclResult texts, watchdog timeouts and aborts,
--          launcher and Slurm teardown. They are symptoms, never roots.
-- domain: none (symptoms)
-- inputs: events
SELECT attempt_id, event_id, 'nccl_cascade' AS rule_id, 'symptom' AS role, NULL AS domain, NULL AS subdomain,
       node AS culprit_node, rank AS culprit_rank, gpu, 'rank' AS granularity, strength('none') AS strength, ts,
       printf('%s on %s%s: %s', kind, coalesce(node, '?'), CASE WHEN rank IS NOT NULL THEN ' rank ' || rank ELSE '' END,
              left(message, 160)) AS summary,
       NULL AS action
FROM events
WHERE kind IN ('nccl_net_ib', 'nccl_socket', 'nccl_ibv', 'nccl_cuda', 'nccl_warn', 'nccl_result', 'nccl_last_error',
               'torch_watchdog_timeout', 'torch_watchdog_state', 'torch_abort', 'torch_heartbeat', 'torchrun_exit',
               'torchrun_sigterm', 'torchrun_death_signal', 'deepspeed_exit', 'slurm_force_terminated')
   OR (kind = 'torch_watchdog_exception' AND code_text NOT ILIKE '%CUDA error%')
   OR (kind = 'torchrun_failure' AND (signal IS NOT NULL OR exit_code <= 0))
   OR (kind = 'slurm_task_exit' AND code_text IN ('Terminated', 'Killed', 'Aborted'))
   OR (kind = 'slurm_cancel' AND code_text = 'TASK FAILURE')
   OR (kind = 'cuda_error' AND code_text ILIKE '%previous error during capture%')
