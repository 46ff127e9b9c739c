-- Ranks the rule hits of every attempt into causes and decides its verdict (docs/DESIGN.md §4). Runs after all rules;
-- reads rule_hits, events, node_skew, silent_first_node, causal_chains, silent_node_classes, progress_window, attempts
-- and params; first settles the rule hits the causal chains explain (rule_hits is updated in place), then builds the
-- temp tables root_hits, attempt_skew, causes, ranked_causes, outcome (the verdict), chosen (the causes it stands on),
-- symptom_rows and evidence_rows, which _confidence.sql, _verdict.sql and _action.sql turn into verdict rows.

-- A time on the attempt's consensus clock: corrected by the emitting node's measured offset (node_skew, DESIGN §4.2).
CREATE OR REPLACE TEMP MACRO consensus_ts(ts, offset_s) AS ts - to_microseconds(CAST(coalesce(offset_s, 0) * 1e6 AS BIGINT));
-- Whether a line carries a stamp of its own (an inherited stamp is only a lower bound of when it was printed).
CREATE OR REPLACE TEMP MACRO own_stamp(ts, quality) AS ts IS NOT NULL AND coalesce(quality, '') NOT IN ('inherited', 'none', 'monotonic');
-- Whether a hit or an event is of a chain side's class: domain, subdomain, kind, codes and texts each match or are
-- left open (null).
CREATE OR REPLACE TEMP MACRO chain_side_matches(domain, subdomain, kind, codes, texts, x_domain, x_subdomain, x_kind, x_code, x_text) AS
    (domain IS NULL OR domain = x_domain) AND (subdomain IS NULL OR subdomain = x_subdomain) AND (kind IS NULL OR kind = x_kind)
    AND (codes IS NULL OR list_contains(codes, x_code)) AND (texts IS NULL OR list_contains(texts, x_text));

-- A job-level root of a class that names a node (silent_node_classes, e.g. the scheduler's NODE_FAIL) takes the node
-- that went silent first while its peers' errors name it, dated when it went silent; a restart leaves that node out.
UPDATE rule_hits h
SET culprit_node = s.node, ts = coalesce(s.last_ts, h.ts), granularity = 'node',
    action = CASE h.action WHEN 'restart' THEN 'restart_excluding_nodes' ELSE h.action END,
    summary = h.summary || CASE WHEN s.last_ts IS NULL THEN printf(' (%s logged nothing and its peers name it)', s.node)
                                ELSE printf(' (%s went silent first, at %s, and its peers name it)', s.node, strftime(s.last_ts, '%Y-%m-%dT%H:%M:%SZ')) END
FROM silent_first_node s, silent_node_classes c
WHERE h.role = 'root' AND h.culprit_node IS NULL AND s.attempt_id = h.attempt_id
  AND h.domain = c.domain AND (c.subdomain IS NULL OR h.subdomain = c.subdomain);

-- Causal chains (causal_chains, rules_sql/chains.yaml): the root hits and the events the chains compare, with the facts
-- their scopes and windows read. A hit's node is its culprit node, else the node that printed it.
CREATE OR REPLACE TEMP TABLE chain_facts AS
SELECT h.attempt_id, h.rule_id, h.event_id, h.domain, h.subdomain, h.culprit_node, e.kind, e.code, e.code_text,
       coalesce(h.culprit_node, e.node) AS node, coalesce(h.gpu, e.gpu) AS gpu, coalesce(h.culprit_rank, e.rank) AS rank,
       e.device, e.peer_node, e.uri, e.line, consensus_ts(h.ts, k.offset_s) AS ts,
       h.ts IS NOT NULL AND (e.event_id IS NULL OR own_stamp(e.ts, e.ts_quality)) AS own_stamp
FROM rule_hits h
LEFT JOIN events e USING (attempt_id, event_id)
LEFT JOIN node_skew k ON k.attempt_id = h.attempt_id AND k.node = e.node
WHERE h.role = 'root';

-- Every (effect hit, chain, cause) inside the chain's scope and window. A cause is a root hit of the cause's class, or,
-- for a cause given by event kind alone, any event of that kind whatever role its rules gave it (`went_silent`: the
-- node that went silent first while its peers' errors name it, silent_first_node, dated when it went silent). Times
-- are compared when both sides have one; an effect without a stamp of its own counts as after a stamped cause when the
-- chain says so (`after_stamped`: a line that only reports a lost peer); lines of one file are in file order; else the
-- chain's `unstamped` policy decides (`any`: untimed counts as inside). A recovery (`relation: recovered`) counts only
-- when training progressed after it.
CREATE OR REPLACE TEMP TABLE chain_links AS
WITH effects AS (
    SELECT c.id AS chain_id, c.scope, c.before_s, c.after_s, c.unstamped, c.relation, f.*
    FROM chain_facts f
    JOIN causal_chains c ON chain_side_matches(c.effect_domain, c.effect_subdomain, c.effect_kind, c.effect_codes, c.effect_texts,
                                               f.domain, f.subdomain, f.kind, f.code, f.code_text)
),
causes AS (
    SELECT c.id AS chain_id, f.attempt_id, f.event_id, f.kind, f.node, f.gpu, f.rank, f.device, f.ts, f.own_stamp, f.uri, f.line
    FROM chain_facts f
    JOIN causal_chains c ON c.cause_domain IS NOT NULL
     AND chain_side_matches(c.cause_domain, c.cause_subdomain, c.cause_kind, c.cause_codes, c.cause_texts,
                            f.domain, f.subdomain, f.kind, f.code, f.code_text)
    UNION ALL
    SELECT c.id, e.attempt_id, e.event_id, e.kind, e.node, e.gpu, e.rank, e.device, consensus_ts(e.ts, k.offset_s),
           own_stamp(e.ts, e.ts_quality), e.uri, e.line
    FROM events e
    JOIN causal_chains c ON c.cause_domain IS NULL
     AND chain_side_matches(NULL, NULL, c.cause_kind, c.cause_codes, c.cause_texts, NULL, NULL, e.kind, e.code, e.code_text)
    LEFT JOIN node_skew k ON k.attempt_id = e.attempt_id AND k.node = e.node
    UNION ALL
    SELECT c.id, s.attempt_id, NULL, 'went_silent', s.node, NULL, NULL, NULL, consensus_ts(s.last_ts, k.offset_s),
           s.last_ts IS NOT NULL, NULL, NULL
    FROM silent_first_node s
    JOIN causal_chains c ON c.cause_domain IS NULL AND c.cause_kind = 'went_silent'
    LEFT JOIN node_skew k ON k.attempt_id = s.attempt_id AND k.node = s.node
),
linked AS (
    SELECT x.attempt_id, x.rule_id, x.event_id, x.domain, x.subdomain, x.culprit_node, x.chain_id, x.relation,
           c.kind AS cause_kind, c.node AS cause_node, c.ts AS cause_ts, c.event_id AS cause_event
    FROM effects x
    JOIN causes c ON c.attempt_id = x.attempt_id AND c.chain_id = x.chain_id AND c.event_id IS DISTINCT FROM x.event_id
    WHERE CASE x.scope
              WHEN 'job' THEN true
              WHEN 'node' THEN c.node = x.node
              WHEN 'gpu' THEN c.node = x.node AND c.gpu = x.gpu
              WHEN 'rank' THEN c.rank = x.rank AND (c.node IS NULL OR x.node IS NULL OR c.node = x.node)
              WHEN 'device' THEN c.node = x.node AND c.device = x.device
              WHEN 'peer_address' THEN c.node = x.peer_node
              WHEN 'reporter' THEN c.node = x.peer_node AND x.node IS DISTINCT FROM c.node
          END
      AND CASE
              WHEN x.unstamped = 'after_stamped' AND c.own_stamp AND NOT x.own_stamp THEN true
              WHEN x.ts IS NOT NULL AND c.ts IS NOT NULL THEN
                  epoch_us(x.ts) - epoch_us(c.ts) >= x.before_s * 1e6
                  AND (x.after_s IS NULL OR epoch_us(x.ts) - epoch_us(c.ts) <= x.after_s * 1e6)
              WHEN x.uri = c.uri THEN c.line < x.line
              ELSE x.unstamped = 'any'
          END
      AND (x.relation <> 'recovered'
           OR EXISTS (SELECT 1 FROM progress_window p WHERE p.attempt_id = x.attempt_id AND p.last_ts > c.ts))
)
SELECT * FROM linked
QUALIFY row_number() OVER (PARTITION BY attempt_id, rule_id, event_id, domain, subdomain, culprit_node
                           ORDER BY chain_id, cause_ts NULLS LAST, cause_event) = 1;

-- A root hit a chain links to a cause is that cause's symptom (a recovered one is ignored), whatever its own strength.
UPDATE rule_hits h
SET role = CASE l.relation WHEN 'recovered' THEN 'ignored' ELSE 'symptom' END, domain = NULL, subdomain = NULL, strength = 0.0,
    summary = h.summary || printf(' [%s %s on %s: chain %s]', CASE l.relation WHEN 'recovered' THEN 'recovered by' ELSE 'symptom of' END,
                                  coalesce(l.cause_kind, 'the scheduler state'), coalesce(l.cause_node, '?'), l.chain_id)
FROM chain_links l
WHERE h.role = 'root' AND h.attempt_id = l.attempt_id AND h.rule_id = l.rule_id AND h.event_id IS NOT DISTINCT FROM l.event_id
  AND h.domain = l.domain AND h.subdomain = l.subdomain AND h.culprit_node IS NOT DISTINCT FROM l.culprit_node;

-- A job-level hit (no culprit node) joins a node-level cause of the same domain/subdomain when there is one.
-- Times are on the consensus clock before any ordering; raw_ts keeps what the line says (shown as root_cause.ts). A
-- root its rule could not localise to one node has granularity `group` (e.g. an NVLink peer on another tray,
-- xid_root.sql): _confidence.sql and _action.sql honour it.
CREATE OR REPLACE TEMP TABLE root_hits AS
WITH roots AS (
    SELECT h.* REPLACE (consensus_ts(h.ts, k.offset_s) AS ts),
           h.ts AS raw_ts, e.source, e.kind, e.code, e.node AS event_node, e.ts_quality, e.uri, e.line
    FROM rule_hits h
    LEFT JOIN events e USING (attempt_id, event_id)
    LEFT JOIN node_skew k ON k.attempt_id = h.attempt_id AND k.node = e.node
    WHERE h.role = 'root'
)
SELECT r.*,
       coalesce(r.culprit_node, min(r.culprit_node) OVER (PARTITION BY r.attempt_id, r.domain, r.subdomain), '') AS cause_node
FROM roots r;

-- Per attempt: the largest measured offset, how uncertain the estimates are, and whether a timed root comes from a node
-- whose clock could not be measured while others are off. The tie tolerance widens by what is still uncertain.
CREATE OR REPLACE TEMP TABLE attempt_skew AS
SELECT a.attempt_id,
       coalesce((SELECT max(abs(k.offset_s)) FROM node_skew k WHERE k.attempt_id = a.attempt_id), 0.0) AS max_abs_s,
       coalesce((SELECT max(k.spread_s) FROM node_skew k WHERE k.attempt_id = a.attempt_id), 0.0) AS spread_s,
       EXISTS (SELECT 1 FROM root_hits h
               WHERE h.attempt_id = a.attempt_id AND h.ts IS NOT NULL AND h.event_node IS NOT NULL
                 AND NOT EXISTS (SELECT 1 FROM node_skew k WHERE k.attempt_id = h.attempt_id AND k.node = h.event_node)) AS unmeasured_roots
FROM attempts a;

CREATE OR REPLACE TEMP TABLE attempt_tolerance AS
SELECT s.*, p.skew_tolerance_s + s.spread_s + CASE WHEN s.unmeasured_roots THEN s.max_abs_s ELSE 0 END AS tolerance_s
FROM attempt_skew s CROSS JOIN params p;

-- A timed cause is "late" (a possible consequence) when it starts more than skew_tolerance_s after the earliest cause
-- of the attempt, whatever its domain (DESIGN §4.2): nothing that starts after the failure began can have started it.
-- An inherited stamp (a traceback line copying the stamp of an earlier line) is only a lower bound of when the line was
-- printed: when a cause on the SAME node that can explain it (e.g. an Xid under a CUDA error) has its own stamp at or
-- after that bound, the order between them is unknown, so the inherited one may be on time but does not set t0.
-- An untimed cause is late only when a cause that could explain it has a time: hardware and the scheduler can explain
-- everything, the network can explain software and application failures, software can explain application failures.
-- Within one file the order of the lines is the order of events: a cause without a stamp of its own (untimed or only
-- inherited) that a file shows printed after another cause's line is late, and sets no time for the causes before it.
CREATE OR REPLACE TEMP TABLE causes AS
WITH first_lines AS (
    SELECT attempt_id, domain, subdomain, cause_node, uri, min(line) AS line
    FROM root_hits
    WHERE uri IS NOT NULL
    GROUP BY ALL
),
after_in_file AS (
    SELECT DISTINCT o.attempt_id, o.domain, o.subdomain, o.cause_node
    FROM first_lines o
    JOIN first_lines u ON u.attempt_id = o.attempt_id AND u.uri = o.uri AND u.line < o.line
     AND (u.domain, u.subdomain, u.cause_node) IS DISTINCT FROM (o.domain, o.subdomain, o.cause_node)
),
grouped AS (
    SELECT attempt_id, domain, subdomain, cause_node,
           min(ts) AS ts,
           min(ts) FILTER (WHERE coalesce(ts_quality, '') <> 'inherited') AS exact_ts,
           max(strength) AS strength,
           count(DISTINCT coalesce(source, 'scheduler')) AS sources,
           count(DISTINCT rule_id) AS rules,
           -- every stamp of the cause in whole seconds (an RFC 3164 syslog header): its true time is up to 1 s later
           bool_and(epoch_us(raw_ts) % 1000000 = 0) AS whole_seconds,
           CASE domain WHEN 'hardware' THEN 0 WHEN 'infrastructure' THEN 0 WHEN 'network' THEN 1 WHEN 'software' THEN 2 ELSE 3 END AS explain_rank
    FROM root_hits
    GROUP BY ALL
),
ordered AS (
    SELECT g.*, g.exact_ts IS NULL AND a.attempt_id IS NOT NULL AS late_in_file
    FROM grouped g
    LEFT JOIN after_in_file a USING (attempt_id, domain, subdomain, cause_node)
),
bounded AS (
    SELECT g.*, g.exact_ts IS NULL AND g.ts IS NOT NULL AND g.cause_node <> '' AND EXISTS (
        SELECT 1 FROM grouped x WHERE x.attempt_id = g.attempt_id AND x.cause_node = g.cause_node
          AND x.explain_rank < g.explain_rank AND x.exact_ts >= g.ts) AS lower_bound_only
    FROM ordered g
),
representative AS (
    SELECT * EXCLUDE (n) FROM (
        SELECT attempt_id, domain, subdomain, cause_node, rule_id, event_id, culprit_rank, gpu, granularity, summary,
               action, kind, code, raw_ts AS rep_ts, culprit_node,
               row_number() OVER (PARTITION BY attempt_id, domain, subdomain, cause_node
                                  ORDER BY strength DESC, ts ASC NULLS LAST, event_id NULLS LAST, rule_id) AS n
        FROM root_hits
    ) WHERE n = 1
),
first_cause AS (  -- when the attempt's earliest timed cause started, and whether its stamp has whole seconds only
    SELECT attempt_id, min(ts) AS t0_all, arg_min(whole_seconds, (ts, whole_seconds)) AS t0_whole_seconds
    FROM bounded WHERE NOT lower_bound_only AND NOT late_in_file AND ts IS NOT NULL
    GROUP BY attempt_id
),
timed AS (
    SELECT g.*,
           (SELECT min(o.ts) FROM ordered o
             WHERE o.attempt_id = g.attempt_id AND o.explain_rank <= g.explain_rank AND NOT o.late_in_file) AS t0,
           f.t0_all,
           -- two stamps compared: a whole-second one may be up to 1 s early, so the tie tolerance widens by that
           CASE WHEN coalesce(g.whole_seconds, false) OR coalesce(f.t0_whole_seconds, false) THEN 1.0 ELSE 0.0 END AS resolution_s
    FROM ordered g
    LEFT JOIN first_cause f USING (attempt_id)
)
SELECT t.*, r.rule_id, r.event_id, r.culprit_rank, r.gpu, r.granularity, r.summary, r.action, r.kind, r.code, r.rep_ts,
       least(1.0, t.strength + p.corroboration_bonus * (t.sources - 1 + t.rules - 1))
         * CASE
               WHEN t.late_in_file THEN p.late_penalty
               WHEN t.ts IS NULL AND t.t0 IS NULL THEN 1.0  -- nothing timed to compare with
               WHEN t.ts IS NULL THEN p.late_penalty
               WHEN t.ts <= t.t0_all + to_microseconds(CAST((tol.tolerance_s + t.resolution_s) * 1e6 AS BIGINT)) THEN 1.0
               ELSE p.late_penalty
           END AS score
FROM timed t
JOIN representative r USING (attempt_id, domain, subdomain, cause_node)
JOIN attempt_tolerance tol USING (attempt_id)
CROSS JOIN params p;

-- The ten best causes of an attempt are its candidates (listed in the verdict).
CREATE OR REPLACE TEMP TABLE ranked_causes AS
SELECT *, position <= 10 AS is_candidate FROM (
    SELECT c.*,
           row_number() OVER (PARTITION BY attempt_id ORDER BY score DESC, ts ASC NULLS LAST, domain, subdomain, cause_node) AS position,
           max(score) OVER (PARTITION BY attempt_id) AS best_score
    FROM causes c
);

CREATE OR REPLACE TEMP TABLE contenders AS
SELECT r.*
FROM ranked_causes r CROSS JOIN params p
WHERE r.score >= r.best_score - p.ambiguity_margin;

CREATE OR REPLACE TEMP TABLE outcome AS
SELECT a.attempt_id,
       w.attempt_id IS NOT NULL AS has_root,
       coalesce((SELECT count(*) FROM contenders c WHERE c.attempt_id = a.attempt_id), 0) AS n_contenders,
       (SELECT count(DISTINCT c.domain) FROM contenders c WHERE c.attempt_id = a.attempt_id) AS n_domains,
       w.score AS best_score,
       CASE
           -- the scheduler says the job ended well (COMPLETED with exit code 0 or none given): no log line overrules it
           WHEN a.state = 'COMPLETED' AND coalesce(a.exit_code, '0') IN ('0', '0:0') THEN 'not_failed'
           WHEN w.attempt_id IS NULL AND (a.state = 'COMPLETED' OR (a.state IS NULL AND a.exit_code IN ('0', '0:0'))) THEN 'not_failed'
           WHEN a.state = 'COMPLETED' AND w.score < 0.8 THEN 'not_failed'
           WHEN w.attempt_id IS NULL THEN 'unattributed'
           WHEN (SELECT count(*) FROM contenders c WHERE c.attempt_id = a.attempt_id) > 1 THEN 'ambiguous'
           ELSE 'attributed'
       END AS verdict
FROM attempts a
LEFT JOIN (SELECT * FROM ranked_causes WHERE position = 1) w USING (attempt_id);

-- The cause(s) the verdict stands on: the winner, or every contender of an ambiguous verdict.
CREATE OR REPLACE TEMP TABLE chosen AS
SELECT c.*
FROM contenders c JOIN outcome o USING (attempt_id)
WHERE o.verdict = 'attributed' AND c.position = 1 OR o.verdict = 'ambiguous';

-- Symptoms: the earliest symptom of each kind on each node and rank. A line that is evidence of the chosen cause is
-- never also its symptom: one log line can yield two events (the CUDA OOM line is an OOM and a Python exception).
-- Two rules may call the same event a symptom (nccl_cascade and cuda_error an NCCL CUDA failure): the rule's name
-- breaks the tie, so the row shown does not depend on the order DuckDB produced them in.
CREATE OR REPLACE TEMP TABLE symptom_rows AS
SELECT * EXCLUDE (n) FROM (
    SELECT h.attempt_id, h.event_id, h.rule_id, e.kind, e.node, e.rank, h.ts, h.summary, e.uri, e.line,
           row_number() OVER (PARTITION BY h.attempt_id, e.kind, e.node, e.rank ORDER BY h.ts NULLS LAST, h.event_id, h.rule_id) AS n
    FROM rule_hits h JOIN events e USING (attempt_id, event_id)
    WHERE h.role = 'symptom'
      AND NOT EXISTS (
          SELECT 1 FROM root_hits r
          JOIN chosen c ON c.attempt_id = r.attempt_id AND c.domain = r.domain AND c.subdomain = r.subdomain AND c.cause_node = r.cause_node
          JOIN events re ON re.attempt_id = r.attempt_id AND re.event_id = r.event_id
          WHERE r.attempt_id = h.attempt_id AND re.uri = e.uri AND re.line = e.line)
) WHERE n = 1;

-- Evidence: every root hit of the chosen cause(s), confirmations on their nodes, and the symptoms; one row per log
-- line (uri, line) under its strongest role, with the kinds of every event read from it (an exception line that is
-- also an NCCL result is one row with both kinds). Events without a line (metrics, flight-recorder entries) are rows
-- of their own.
CREATE OR REPLACE TEMP TABLE evidence_rows AS
WITH chosen_hits AS (
    SELECT h.attempt_id, h.event_id, h.rule_id,
           CASE WHEN h.event_id = c.event_id THEN 'root_cause' ELSE 'corroboration' END AS role
    FROM root_hits h
    JOIN chosen c ON c.attempt_id = h.attempt_id AND c.domain = h.domain AND c.subdomain = h.subdomain AND c.cause_node = h.cause_node
    WHERE h.event_id IS NOT NULL
),
confirmations AS (
    SELECT h.attempt_id, h.event_id, h.rule_id, 'confirmation' AS role
    FROM rule_hits h
    JOIN chosen c ON c.attempt_id = h.attempt_id AND c.domain = h.domain AND c.cause_node = coalesce(h.culprit_node, '')
    WHERE h.role = 'confirmation'
),
symptoms AS (
    SELECT s.attempt_id, s.event_id, s.rule_id, 'symptom' AS role FROM symptom_rows s
),
everything AS (
    SELECT * FROM chosen_hits UNION ALL SELECT * FROM confirmations UNION ALL SELECT * FROM symptoms
),
placed AS (
    SELECT x.attempt_id, x.role, x.rule_id, x.event_id, e.kind, e.node, e.rank, e.source, e.uri, e.line, e.ts, e.raw AS text,
           e.locator, CASE WHEN e.line IS NULL THEN 'event ' || x.event_id ELSE coalesce(e.uri, '') || ':' || e.line END AS place
    FROM everything x JOIN events e USING (attempt_id, event_id)
),
line_kinds AS (
    SELECT attempt_id, place, list_sort(list(DISTINCT kind)) AS kinds FROM placed GROUP BY attempt_id, place
)
SELECT p.* EXCLUDE (place, n), k.kinds FROM (
    SELECT *, row_number() OVER (PARTITION BY attempt_id, place
                                 ORDER BY CASE role WHEN 'root_cause' THEN 0 WHEN 'corroboration' THEN 1 WHEN 'confirmation' THEN 2 ELSE 3 END,
                                          ts NULLS LAST, rule_id, kind, event_id) AS n
    FROM placed
) p JOIN line_kinds k USING (attempt_id, place)
WHERE n = 1;
