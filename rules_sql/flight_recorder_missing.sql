-- id: flight_recorder_missing
-- detects: PyTorch NCCL flight-recorder dumps where, inside one process group, the members that dumped diverge: some
--          issued collective N (not completed) while others never reached it (no entry for N, last entry < N). Those
--          missing ranks stopped issuing work first (an anti-join on (pg, seq)). The PG family is the
--          wavefront (the most common PG description among the ranks' newest collectives; ties and fallbacks ordered
--          model-parallel -> reduction -> default). Ranks without a dump are never blamed (missing dumps are normal).
-- domain: infrastructure/hang (rank granularity; an Xid or exception on that rank, being stronger, still wins)
-- inputs: events(kind in flight_recorder_dump, flight_recorder_entry)
WITH dumps AS (
    SELECT attempt_id, event_id, rank, node, ts, fields
    FROM events
    WHERE kind = 'flight_recorder_dump' AND rank IS NOT NULL
),
pg_keys AS (
    SELECT attempt_id, event_id AS dump_event, rank, node, ts AS dump_ts, fields, unnest(json_keys(fields, '$.pgs')) AS pg
    FROM dumps
),
membership AS (  -- the PGs each dumping rank belongs to (its own pg_config)
    SELECT attempt_id, dump_event, rank, node, dump_ts, pg,
           coalesce(json_extract_string(fields, '$.pgs."' || replace(pg, '"', '') || '"'), pg) AS pg_desc
    FROM pg_keys
),
coll AS (  -- collective (not point-to-point) entries
    SELECT attempt_id, rank, pg, seq, code_text AS state, line, ts, event_id
    FROM events
    WHERE kind = 'flight_recorder_entry' AND seq IS NOT NULL
      AND coalesce(json_extract_string(fields, '$.is_p2p'), 'false') <> 'true'
),
newest AS (  -- each rank's newest collective: where it is now
    SELECT c.attempt_id, c.rank, arg_max(m.pg_desc, (c.line, c.event_id)) AS pg_desc
    FROM coll c JOIN membership m ON m.attempt_id = c.attempt_id AND m.rank = c.rank AND m.pg = c.pg
    GROUP BY ALL
),
wavefront AS (
    SELECT attempt_id, pg_desc, count(*) AS ranks_at
    FROM newest GROUP BY ALL
),
frontier AS (  -- per PG: the newest collective any member issued, if it did not complete there
    SELECT attempt_id, pg, max(seq) AS front,
           arg_max(state, (seq, state)) AS front_state
    FROM coll GROUP BY ALL
),
progress AS (
    SELECT m.attempt_id, m.rank, m.node, m.pg, m.pg_desc, m.dump_event, m.dump_ts, max(c.seq) AS reached
    FROM membership m
    LEFT JOIN coll c ON c.attempt_id = m.attempt_id AND c.rank = m.rank AND c.pg = m.pg
    GROUP BY ALL
),
diverged AS (
    SELECT p.*, f.front,
           count(*) FILTER (WHERE coalesce(p.reached, -1) < f.front) OVER (PARTITION BY p.attempt_id, p.pg) AS n_missing,
           count(*) FILTER (WHERE p.reached = f.front) OVER (PARTITION BY p.attempt_id, p.pg) AS n_front
    FROM progress p JOIN frontier f USING (attempt_id, pg)
    WHERE coalesce(f.front_state, '') <> 'completed'
),
missing AS (
    SELECT d.*,
           CASE WHEN d.pg_desc ILIKE '%default%' THEN 2
                WHEN regexp_matches(d.pg_desc, '(?i)(TENSOR|PIPELINE|MODEL_PARALLEL|EXPERT_MODEL|CONTEXT)') THEN 0
                ELSE 1 END AS preference,
           coalesce(w.ranks_at, 0) AS ranks_at
    FROM diverged d LEFT JOIN wavefront w USING (attempt_id, pg_desc)
    WHERE coalesce(d.reached, -1) < d.front AND d.n_front >= d.n_missing
),
chosen AS (  -- one PG family per attempt: the wavefront, else model-parallel -> reduction -> default
    SELECT attempt_id, arg_min(pg_desc, (-ranks_at, preference, pg_desc)) AS pg_desc
    FROM missing GROUP BY attempt_id
)
SELECT m.attempt_id, m.dump_event AS event_id, 'flight_recorder_missing' AS rule_id, 'root' AS role,
       'infrastructure' AS domain, 'hang' AS subdomain, m.node AS culprit_node, m.rank AS culprit_rank, NULL AS gpu,
       'rank' AS granularity, strength('flight_recorder_missing') AS strength, m.dump_ts AS ts,
       printf('flight recorder: rank %d%s never reached %s seq %d of PG %s (%s); its last was %s', m.rank,
              CASE WHEN m.node IS NOT NULL THEN ' on ' || m.node ELSE '' END,
              'collective', m.front, m.pg, m.pg_desc, coalesce(CAST(m.reached AS VARCHAR), 'none')) AS summary,
       'restart_excluding_nodes' AS action
FROM missing m JOIN chosen c USING (attempt_id, pg_desc)
QUALIFY row_number() OVER (PARTITION BY m.attempt_id, m.rank ORDER BY m.front - coalesce(m.reached, -1) DESC, m.pg) = 1
