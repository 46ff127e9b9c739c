-- id: ib_port_flaps
-- detects: InfiniBand port outages seen in the metrics (transforms/metric_events.py): port state down->up flaps and
--          `link_downed` deltas on one (node, device, port) that start before the attempt's first NCCL error (or its
--          end when NCCL printed nothing). 1-2 outages -> 0.75, >= 3 (a flapping port) -> 0.85.
--          Error-counter deltas (symbol_error, link_error_recovery, port_rcv_errors, ...) without an outage mean a
--          marginal link: network/ib_port_errors at 0.5; next to an outage they only confirm it. Outages that start
--          after the first NCCL error are ignored (a consequence, e.g. a node reboot), port-up samples are context.
-- domain: network/ib_link, network/roce, network/ib_port_errors
-- inputs: events(kind in ib_counter, ib_port_down, ib_port_up, ib_port_flap; first NCCL error kinds), attempts, params
-- needs: ib_counter, ib_port_down, ib_port_up, ib_port_flap
WITH first_error AS (
    SELECT attempt_id, min(ts) AS ts
    FROM events
    WHERE kind IN ('nccl_net_ib', 'nccl_socket', 'nccl_ibv', 'nccl_warn', 'nccl_result', 'nccl_last_error',
                   'torch_watchdog_timeout', 'torch_watchdog_exception')
    GROUP BY ALL
),
link AS (
    SELECT e.*,
           -- when the outage / increase may have started: a counter moved somewhere in (prev sample, this sample]
           CASE e.kind
               WHEN 'ib_port_flap' THEN TRY_CAST(json_extract_string(e.fields, '$.down_ts') AS TIMESTAMP)
               WHEN 'ib_counter' THEN TRY_CAST(json_extract_string(e.fields, '$.prev_ts') AS TIMESTAMP)
               ELSE e.ts
           END AS start_ts,
           coalesce(f.ts, a.end_ts) AS cutoff,
           e.kind = 'ib_port_down' OR e.kind = 'ib_port_flap' OR (e.kind = 'ib_counter' AND e.code_text = 'link_downed') AS is_outage
    FROM events e
    JOIN attempts a USING (attempt_id)
    LEFT JOIN first_error f USING (attempt_id)
    WHERE e.kind IN ('ib_counter', 'ib_port_down', 'ib_port_up', 'ib_port_flap')
),
placed AS (
    SELECT l.*,
           coalesce(l.cutoff IS NULL OR coalesce(l.start_ts, l.ts) <= l.cutoff + to_microseconds(CAST(p.skew_tolerance_s * 1e6 AS BIGINT)), true) AS in_window
    FROM link l CROSS JOIN params p
),
per_port AS (
    SELECT attempt_id, node, device, port,
           -- both series count the same outages: take the larger, never the sum
           greatest(count(*) FILTER (WHERE kind = 'ib_port_down' AND in_window),
                    coalesce(sum(code) FILTER (WHERE kind = 'ib_counter' AND code_text = 'link_downed' AND in_window), 0)) AS outages
    FROM placed
    GROUP BY ALL
)
SELECT p.attempt_id, p.event_id, 'ib_port_flaps' AS rule_id,
       CASE
           WHEN p.kind = 'ib_port_up' OR NOT p.in_window THEN 'ignored'
           WHEN p.is_outage THEN 'root'
           WHEN pp.outages > 0 THEN 'confirmation'
           ELSE 'root'
       END AS role,
       CASE WHEN p.kind <> 'ib_port_up' AND p.in_window THEN 'network' END AS domain,
       CASE
           WHEN p.kind = 'ib_port_up' OR NOT p.in_window THEN NULL
           WHEN NOT p.is_outage AND pp.outages = 0 THEN 'ib_port_errors'
           WHEN regexp_matches(coalesce(p.device, ''), '^(roce|en|eth)') THEN 'roce'
           ELSE 'ib_link'
       END AS subdomain,
       p.node AS culprit_node, NULL::INTEGER AS culprit_rank, NULL AS gpu, 'link' AS granularity,
       CASE
           WHEN p.kind = 'ib_port_up' OR NOT p.in_window THEN strength('none')
           WHEN NOT p.is_outage AND pp.outages = 0 THEN strength('ib_port.errors')
           WHEN NOT p.is_outage THEN strength('ib_port.counter_beside_outage')
           WHEN pp.outages >= 3 THEN strength('ib_port.flapping')
           ELSE strength('ib_port.outage')
       END AS strength,
       CASE
           WHEN NOT p.in_window OR p.cutoff IS NULL THEN p.ts
           WHEN p.kind = 'ib_counter' THEN least(p.ts, p.cutoff)  -- moved somewhere before this sample
           ELSE least(coalesce(p.start_ts, p.ts), p.cutoff)       -- the outage began at the down sample
       END AS ts,
       printf('IB port %s%s on %s: %s (%d outage(s) before the first NCCL error)',
              coalesce(p.device, '?'), CASE WHEN p.port IS NOT NULL THEN ':' || p.port ELSE '' END, coalesce(p.node, '?'),
              CASE p.kind
                  WHEN 'ib_port_flap' THEN printf('down for %s s, then active again', json_extract_string(p.fields, '$.outage_s'))
                  WHEN 'ib_port_down' THEN 'port left the ACTIVE state'
                  WHEN 'ib_port_up' THEN 'port ACTIVE again'
                  ELSE printf('%s +%d', p.code_text, p.code)
              END, pp.outages) AS summary,
       'restart_excluding_nodes' AS action
FROM placed p
JOIN per_port pp ON pp.attempt_id = p.attempt_id AND pp.node IS NOT DISTINCT FROM p.node
                AND pp.device IS NOT DISTINCT FROM p.device AND pp.port IS NOT DISTINCT FROM p.port
