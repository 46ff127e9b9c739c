-- id: kubernetes_disruption
-- detects: what Kubernetes and Kueue record when the platform ends a workload (connectors/k8s_status.py lines): a
--          Workload evicted by Kueue (Preempted, MaximumExecutionTimeExceeded, Deactivated, a stopped queue, an
--          admission check that withdrew the admission) and a pod's DisruptionTarget condition (scheduler preemption,
--          taint-manager or pod-GC deletion after the node went NotReady/unreachable/away, eviction-API drain, kubelet
--          shutdown). Like the Slurm messages these are weaker than hardware evidence: an earlier fatal GPU record
--          explains a later eviction. Container exits with a non-zero code only say that the process ended, so they
--          are symptoms; evictions whose cause is start-up trouble (PodsReadyTimeout, the requeuing limit it leads
--          to) and kubelet pressure evictions name no cause and are symptoms too. The node lifecycle controller's
--          "Node X is NotReady" (its kubelet stopped posting status) is a node failure of X, unless the controller
--          also saw every node go NotReady at once (master disruption mode: the control plane lost them, not they it).
-- domain: infrastructure/preemption, time_limit, cancelled, maintenance, node_failure
-- inputs: events(kind in kueue_evicted, pod_disruption, container_exit, k8s_node_not_ready, k8s_all_nodes_not_ready)
WITH classified AS (
    SELECT *,
        CASE
            WHEN kind = 'kueue_evicted' THEN CASE code_text
                WHEN 'Preempted' THEN 'preemption'
                WHEN 'MaximumExecutionTimeExceeded' THEN 'time_limit'
                WHEN 'Deactivated' THEN 'cancelled'
                WHEN 'InactiveWorkload' THEN 'cancelled'
                -- an administrator stopped the queue; the connector reports the attempt CANCELLED the same way
                WHEN 'ClusterQueueStopped' THEN 'cancelled'
                WHEN 'LocalQueueStopped' THEN 'cancelled'
                -- an admission check (provisioning, MultiKueue) took the capacity back and requeued the workload
                WHEN 'AdmissionCheck' THEN 'maintenance'
            END
            WHEN kind = 'pod_disruption' THEN CASE
                WHEN code_text = 'PreemptionByScheduler' THEN 'preemption'
                WHEN code_text IN ('DeletionByTaintManager', 'DeletionByPodGC') THEN 'node_failure'
                WHEN code_text = 'EvictionByEvictionAPI' THEN 'maintenance'
                WHEN code_text = 'TerminationByKubelet' AND json_extract_string(fields, '$.detail') ILIKE '%shutdown%' THEN 'maintenance'
            END
        END AS cause,
        regexp_matches(coalesce(json_extract_string(fields, '$.detail'), ''), '(?i)unreachable|not-?ready|no longer exists') AS node_named_down
    FROM events
    WHERE kind IN ('kueue_evicted', 'pod_disruption')
)
SELECT attempt_id, event_id, 'kubernetes_disruption' AS rule_id,
       CASE WHEN cause IS NULL THEN 'symptom' ELSE 'root' END AS role,
       CASE WHEN cause IS NOT NULL THEN 'infrastructure' END AS domain, cause AS subdomain,
       -- only a node failure is the node's fault: a drained or preempted node did nothing wrong
       CASE WHEN cause = 'node_failure' THEN node END AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu,
       CASE WHEN cause = 'node_failure' THEN 'node' ELSE 'job' END AS granularity,
       CASE
           WHEN cause IS NULL THEN strength('none')
           WHEN cause = 'preemption' THEN CASE kind WHEN 'kueue_evicted' THEN strength('kubernetes.kueue_preemption') ELSE strength('kubernetes.pod_preemption') END
           WHEN cause = 'node_failure' THEN CASE WHEN node_named_down THEN strength('kubernetes.node_named_down') ELSE strength('kubernetes.node_failure') END
           WHEN cause = 'time_limit' THEN strength('kubernetes.time_limit')
           ELSE strength('kubernetes.other')
       END AS strength,
       ts,
       CASE kind
           WHEN 'kueue_evicted' THEN printf('Kueue evicted workload %s: %s%s', coalesce(json_extract_string(fields, '$.workload'), '?'),
               code_text, coalesce(' (' || json_extract_string(fields, '$.preemption') || ')', ''))
           ELSE printf('pod %s on %s disrupted: %s%s', coalesce(json_extract_string(fields, '$.pod'), '?'), coalesce(node, '?'),
               code_text, coalesce(': ' || left(json_extract_string(fields, '$.detail'), 120), ''))
       END AS summary,
       CASE WHEN cause = 'cancelled' THEN 'none' WHEN cause = 'node_failure' THEN 'restart_excluding_nodes'
            WHEN cause IS NOT NULL THEN 'restart' END AS action
FROM classified
UNION ALL
SELECT attempt_id, event_id, 'kubernetes_disruption', 'symptom', NULL, NULL, node, rank, NULL, 'node', strength('none'), ts,
       printf('container %s of pod %s on %s exited with code %d%s', coalesce(json_extract_string(fields, '$.container'), '?'),
              coalesce(json_extract_string(fields, '$.pod'), '?'), coalesce(node, '?'), exit_code,
              coalesce(' (signal ' || signal || ')', '')),
       NULL
FROM events
WHERE kind = 'container_exit' AND exit_code <> 0
UNION ALL
SELECT e.attempt_id, e.event_id, 'kubernetes_disruption', CASE WHEN d.attempt_id IS NULL THEN 'root' ELSE 'symptom' END,
       CASE WHEN d.attempt_id IS NULL THEN 'infrastructure' END, CASE WHEN d.attempt_id IS NULL THEN 'node_failure' END,
       e.node, NULL, NULL, 'node', CASE WHEN d.attempt_id IS NULL THEN strength('kubernetes.node_failure') ELSE strength('none') END, e.ts,
       printf('node %s NotReady (the node controller stopped hearing from its kubelet)%s', coalesce(e.node, '?'),
              CASE WHEN d.attempt_id IS NOT NULL THEN '; every node went NotReady at once' ELSE '' END),
       CASE WHEN d.attempt_id IS NULL THEN 'restart_excluding_nodes' END
FROM events e
LEFT JOIN (SELECT DISTINCT attempt_id FROM events WHERE kind = 'k8s_all_nodes_not_ready') d USING (attempt_id)
WHERE e.kind = 'k8s_node_not_ready'
