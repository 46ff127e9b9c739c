-- id: nan_loss
-- detects: the loss or the gradients became NaN/Inf (a NaN guard, Megatron's rerun check, logged `loss: nan` or
--          `grad norm: nan`, a loss scaler that can go no lower). Every data-parallel rank computes the same loss, so
--          the cause is the job's (no culprit node); restarting from the same checkpoint diverges again.
-- domain: application/nan
-- inputs: events(kind = nan_loss)
SELECT attempt_id, event_id, 'nan_loss' AS rule_id, 'root' AS role, 'application' AS domain, 'nan' AS subdomain,
       NULL AS culprit_node, rank AS culprit_rank, NULL AS gpu, 'job' AS granularity, strength('nan_loss') AS strength, ts,
       printf('training diverged (%s) on %s%s', coalesce(json_extract_string(fields, '$.what'), 'NaN'), coalesce(node, '?'),
              CASE WHEN rank IS NOT NULL THEN ' rank ' || rank ELSE '' END) AS summary,
       'stop' AS action
FROM events
WHERE kind = 'nan_loss'
