-- id: segfault
-- detects: a native crash: the kernel's `segfault at … in libX`, a signal handler's banner (Open MPI, UCX, gdb,
--          abseil, PRRTE) with the stack frames printed after it, or a launcher reporting a worker that died of a crash
--          signal (torchrun's `failed (exitcode: -11)` and its error summary, DeepSpeed's `exits with return code =
--          -11`, srun's `error: <node>: task 8: Segmentation fault (core dumped)`: SIGILL, SIGBUS, SIGFPE, SIGSEGV; a worker killed (9), terminated (15) or aborted (6, as NCCL's
--          watchdog does) did not crash). Inside libnccl (the library named anywhere in the frame line, or an nccl*
--          function) it points at NCCL; elsewhere it is an application crash.
-- domain: software/nccl, application/exception
-- inputs: events(kind in segfault, native_crash, native_frame, torchrun_exit, torchrun_failure, deepspeed_exit, slurm_task_exit)
WITH crashes AS (
    SELECT e.*,
           CASE
               WHEN e.kind = 'segfault' THEN json_extract_string(e.fields, '$.library')
               -- a frame inside NCCL among the next lines of the same file (the banner of every rank comes first)
               WHEN EXISTS (SELECT 1 FROM events f
                            WHERE f.attempt_id = e.attempt_id AND f.kind = 'native_frame' AND f.uri = e.uri
                              AND f.line > e.line AND f.line <= e.line + 60) THEN 'libnccl'
               -- a launcher's report names no library: the kernel's segfault line on the same node says where it crashed
               WHEN e.kind IN ('torchrun_exit', 'torchrun_failure', 'deepspeed_exit', 'slurm_task_exit')
                   THEN (SELECT min(json_extract_string(k.fields, '$.library')) FROM events k
                         WHERE k.attempt_id = e.attempt_id AND k.kind = 'segfault'
                           AND k.node = coalesce(e.node, json_extract_string(e.fields, '$.slurm_node')))
           END AS library
    FROM events e
    WHERE e.kind IN ('segfault', 'native_crash')
       OR (e.kind IN ('torchrun_exit', 'torchrun_failure', 'deepspeed_exit') AND e.exit_code IN (-4, -7, -8, -11))
       OR (e.kind = 'slurm_task_exit' AND e.signal IN (4, 7, 8, 11))
)
SELECT attempt_id, event_id, 'segfault' AS rule_id, 'root' AS role,
       CASE WHEN library ILIKE 'libnccl%' THEN 'software' ELSE 'application' END AS domain,
       CASE WHEN library ILIKE 'libnccl%' THEN 'nccl' ELSE 'exception' END AS subdomain,
       coalesce(json_extract_string(fields, '$.crash_node'), node, json_extract_string(fields, '$.slurm_node')) AS culprit_node, rank AS culprit_rank, NULL AS gpu,
       'node' AS granularity, strength('segfault') AS strength, ts,
       printf('%s of %s in %s on %s', coalesce(code_text, CASE exit_code WHEN -11 THEN 'SIGSEGV' WHEN -7 THEN 'SIGBUS' WHEN -8 THEN 'SIGFPE' WHEN -4 THEN 'SIGILL' END, 'segfault'), coalesce(json_extract_string(fields, '$.process'), 'a process'),
              coalesce(library, '?'), coalesce(json_extract_string(fields, '$.crash_node'), node, json_extract_string(fields, '$.slurm_node'), '?')) AS summary,
       'investigate' AS action
FROM crashes
