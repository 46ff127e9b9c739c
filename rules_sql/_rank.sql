-- Ranks the rule hits of every attempt into causes and decides its verdict (docs/DESIGN.md §4). Runs after all rules;
-- reads rule_hits, events, node_skew, silent_first_node, causal_chains, silent_node_classes, progress_window, attempts
-- and params; first settles the rule hits the causal chains explain (rule_hits is updated in place), then builds the
-- temp tables root_hits, attempt_skew, causes, ranked_causes, outcome (the verdict), chosen (the causes it stands on),
-- symptom_rows and evidence_rows, which _confidence.sql, _verdict.sql and _action.sql turn into verdict rows.

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
-- their scopes and windows read. A hit's node is its culprit node, else the node that printed it; its GPU its own, else
-- the one its rank drives (gpu_ranks).
CREATE OR REPLACE TEMP TABLE chain_facts AS
SELECT h.attempt_id, h.rule_id, h.event_id, h.domain, h.subdomain, h.culprit_node, h.summary, e.kind, e.code, e.code_text,
       coalesce(h.culprit_node, e.node) AS node, coalesce(h.gpu, e.gpu, g.gpu) AS gpu, coalesce(h.culprit_rank, e.rank) AS rank,
       e.device, e.peer_node, e.uri, e.line, consensus_ts(h.ts, k.offset_s) AS ts,
       h.ts IS NOT NULL AND (e.event_id IS NULL OR own_stamp(e.ts, e.ts_quality)) AS own_stamp,
       e.ts_quality, k.next_own_ts
FROM rule_hits h
LEFT JOIN events e USING (attempt_id, event_id)
LEFT JOIN event_clock k USING (attempt_id, event_id)
LEFT JOIN (SELECT attempt_id, node, rank, min(gpu) AS gpu FROM gpu_ranks GROUP BY ALL HAVING count(*) = 1) g
       ON g.attempt_id = h.attempt_id AND g.node = coalesce(h.culprit_node, e.node) AND g.rank = coalesce(h.culprit_rank, e.rank)
WHERE h.role = 'root';

-- Whether a hit `x` lies in a chain's scope and time window of a cause `c` (x carries the chain's scope, window and
-- `unstamped` policy). Times are compared when both sides have one; an effect without a stamp of its own counts as
-- after a stamped cause, and a cause with no time at all as before the effect, when the chain says so
-- (`after_stamped`: a line that only reports a lost peer, whose cause an unanchored dmesg may leave untimed); lines of
-- one file are in file order; else the chain's `unstamped` policy decides (`any`: untimed counts as inside).
CREATE OR REPLACE TEMP MACRO chain_reaches(x, c) AS
    CASE x.scope
        WHEN 'job' THEN true
        WHEN 'node' THEN c.node = x.node OR (x.node IS NULL AND x.event_id IS NULL)  -- the scheduler's word names no node
        WHEN 'gpu' THEN c.node = x.node AND (c.gpu IS NULL OR x.gpu IS NULL OR c.gpu = x.gpu)  -- the GPU where both name one
        WHEN 'rank' THEN c.rank = x.rank AND (c.node IS NULL OR x.node IS NULL OR c.node = x.node)
        WHEN 'device' THEN c.node = x.node AND c.device = x.device
        WHEN 'peer_address' THEN c.node = x.peer_node
        WHEN 'reporter' THEN c.node = x.peer_node AND x.node IS DISTINCT FROM c.node
    END
    AND CASE
        WHEN x.unstamped = 'after_stamped' AND c.own_stamp AND NOT x.own_stamp THEN true
        -- a cause of unknown time (an unanchored dmesg line) may have come first: the report of it decides
        WHEN x.unstamped = 'after_stamped' AND c.ts IS NULL AND c.event_id IS NOT NULL THEN true
        -- two intervals: some time of each puts the effect inside the window (lines of one file keep their order)
        WHEN x.ts IS NOT NULL AND c.ts IS NOT NULL THEN
            (x.ts_hi IS NULL OR epoch_us(x.ts_hi) - epoch_us(c.ts_lo) >= x.before_s * 1e6)
            AND (x.after_s IS NULL OR c.ts_hi IS NULL OR epoch_us(x.ts_lo) - epoch_us(c.ts_hi) <= x.after_s * 1e6)
            AND (x.uri IS DISTINCT FROM c.uri OR (x.own_stamp AND c.own_stamp) OR c.line < x.line)
        WHEN x.uri = c.uri THEN c.line < x.line
        ELSE x.unstamped = 'any'
    END;

-- Every (effect hit, chain, cause) inside the chain's scope and window. A cause is a root hit of the cause's class, or,
-- for a cause given by event kind alone, any event of that kind whatever role its rules gave it (`went_silent`: the
-- node that went silent first while its peers' errors name it, silent_first_node, dated when it went silent). A
-- recovery (`relation: recovered`) counts only when training progressed after it. A chain with a condition holds only
-- when a root hit of its `when` side lies in its scope and window of both the cause and the effect (`unless`: when
-- none does); a `when` row and an `unless` row of one condition, scope and window are never both true of one pair.
CREATE OR REPLACE TEMP TABLE chain_links AS
WITH effects AS (  -- the root hits of each chain's effect side, and of its condition side (`when`, `unless`)
    SELECT * FROM (
        SELECT c.id AS chain_id, c.scope, c.before_s, c.after_s, c.unstamped, c.relation, c.condition_present, f.*,
               interval_lo(f.ts, f.own_stamp, f.ts_quality) AS ts_lo, interval_hi(f.ts, f.own_stamp, f.next_own_ts) AS ts_hi,
               chain_side_matches(c.effect_domain, c.effect_subdomain, c.effect_kind, c.effect_codes, c.effect_texts,
                                  f.domain, f.subdomain, f.kind, f.code, f.code_text) AS is_effect,
               c.condition_present IS NOT NULL
               AND chain_side_matches(c.condition_domain, c.condition_subdomain, c.condition_kind, c.condition_codes,
                                      c.condition_texts, f.domain, f.subdomain, f.kind, f.code, f.code_text) AS is_condition
        FROM chain_facts f CROSS JOIN causal_chains c
    ) WHERE is_effect OR is_condition
),
causes AS (  -- the scheduler's state (a hit with no line) is dated at the end it records: its signal came up to kill_wait_s before
    SELECT c.id AS chain_id, f.attempt_id, f.event_id, f.kind, f.node, f.gpu, f.rank, f.device, f.ts, f.own_stamp, f.uri, f.line,
           CASE WHEN f.event_id IS NULL THEN f.ts - to_microseconds(CAST((SELECT kill_wait_s FROM params) * 1e6 AS BIGINT))
                ELSE interval_lo(f.ts, f.own_stamp, f.ts_quality) END AS ts_lo,
           interval_hi(f.ts, f.own_stamp, f.next_own_ts) AS ts_hi
    FROM chain_facts f
    JOIN causal_chains c ON c.cause_domain IS NOT NULL
     AND chain_side_matches(c.cause_domain, c.cause_subdomain, c.cause_kind, c.cause_codes, c.cause_texts,
                            f.domain, f.subdomain, f.kind, f.code, f.code_text)
    UNION ALL
    SELECT c.id, e.attempt_id, e.event_id, e.kind, e.node, e.gpu, e.rank, e.device, consensus_ts(e.ts, k.offset_s),
           own_stamp(e.ts, e.ts_quality), e.uri, e.line,
           interval_lo(consensus_ts(e.ts, k.offset_s), own_stamp(e.ts, e.ts_quality), e.ts_quality),
           interval_hi(consensus_ts(e.ts, k.offset_s), own_stamp(e.ts, e.ts_quality), k.next_own_ts)
    FROM events e
    JOIN causal_chains c ON c.cause_domain IS NULL AND c.cause_kind = e.kind  -- an equality: a hash join over a night's events
     AND chain_side_matches(NULL, NULL, c.cause_kind, c.cause_codes, c.cause_texts, NULL, NULL, e.kind, e.code, e.code_text)
    LEFT JOIN event_clock k USING (attempt_id, event_id)
    UNION ALL
    SELECT c.id, s.attempt_id, NULL, 'went_silent', s.node, NULL, NULL, NULL, consensus_ts(s.last_ts, k.offset_s),
           s.last_ts IS NOT NULL, NULL, NULL, consensus_ts(s.last_ts, k.offset_s), consensus_ts(s.last_ts, k.offset_s)
    FROM silent_first_node s
    JOIN causal_chains c ON c.cause_domain IS NULL AND c.cause_kind = 'went_silent'
    LEFT JOIN node_skew k ON k.attempt_id = s.attempt_id AND k.node = s.node
),
paired AS (  -- each effect with the causes it lies in scope and window of (both sides kept whole for the condition)
    SELECT x.attempt_id, x.rule_id, x.event_id, x.domain, x.subdomain, x.culprit_node, x.chain_id, x.relation,
           x.condition_present, x.summary AS effect_summary,
           c.kind AS cause_kind, c.node AS cause_node, c.ts AS cause_ts, c.event_id AS cause_event, x AS effect, c AS cause
    FROM effects x
    JOIN causes c ON c.attempt_id = x.attempt_id AND c.chain_id = x.chain_id AND c.event_id IS DISTINCT FROM x.event_id
    WHERE x.is_effect AND chain_reaches(x, c)
      AND (x.relation <> 'recovered'
           OR EXISTS (SELECT 1 FROM progress_window p WHERE p.attempt_id = x.attempt_id AND p.last_ts > c.ts))
),
conditioned AS (  -- a pair of a chain with a condition, and the condition's hits in scope and window of both its sides
    SELECT p.*, string_agg(DISTINCT n.summary, '; ' ORDER BY n.summary) AS condition_found
    FROM (SELECT * FROM paired WHERE condition_present IS NOT NULL) p
    LEFT JOIN effects n ON n.is_condition AND n.attempt_id = p.attempt_id AND n.chain_id = p.chain_id
          AND n.event_id IS DISTINCT FROM p.event_id AND n.event_id IS DISTINCT FROM p.cause_event
          AND chain_reaches(n, p.cause) AND chain_reaches(n, p.effect)
    GROUP BY ALL
),
linked AS (
    SELECT * EXCLUDE (condition_present, effect, cause) FROM (
        SELECT *, NULL::VARCHAR AS condition_found FROM paired WHERE condition_present IS NULL
        UNION ALL BY NAME
        SELECT * FROM conditioned WHERE condition_present = (condition_found IS NOT NULL)
    )
)
SELECT * FROM linked
QUALIFY row_number() OVER (PARTITION BY attempt_id, rule_id, event_id, domain, subdomain, culprit_node
                           ORDER BY chain_id, cause_ts NULLS LAST, cause_event) = 1;

-- A root hit a chain links to a cause is that cause's symptom (a recovered one is ignored), whatever its own strength.
UPDATE rule_hits h
SET role = CASE l.relation WHEN 'recovered' THEN 'ignored' ELSE 'symptom' END, domain = NULL, subdomain = NULL, strength = strength('none'),
    summary = h.summary || printf(' [%s %s on %s: chain %s]', CASE l.relation WHEN 'recovered' THEN 'recovered by' ELSE 'symptom of' END,
                                  coalesce(l.cause_kind, 'the scheduler state'), coalesce(l.cause_node, '?'), l.chain_id)
FROM chain_links l
WHERE h.role = 'root' AND h.attempt_id = l.attempt_id AND h.rule_id = l.rule_id AND h.event_id IS NOT DISTINCT FROM l.event_id
  AND h.domain = l.domain AND h.subdomain = l.subdomain AND h.culprit_node IS NOT DISTINCT FROM l.culprit_node;

-- A cause a `when` chain linked names what it is upstream of: the effects it explains that way and the hits the
-- condition found beside them (a PCIe fault in front of a lost GPU and a failed NIC names both).
UPDATE rule_hits h
SET summary = h.summary || printf(' (upstream of both %s and %s: chain %s)', u.effects, u.found, u.chains)
FROM (SELECT attempt_id, cause_event, string_agg(DISTINCT effect_summary, '; ' ORDER BY effect_summary) AS effects,
             string_agg(DISTINCT condition_found, '; ' ORDER BY condition_found) AS found,
             string_agg(DISTINCT chain_id, ', ' ORDER BY chain_id) AS chains
      FROM chain_links WHERE condition_found IS NOT NULL AND relation = 'symptom' GROUP BY ALL) u
WHERE h.role = 'root' AND h.attempt_id = u.attempt_id AND h.event_id = u.cause_event;

