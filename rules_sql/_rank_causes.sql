-- The cause model (docs/DESIGN.md §4.2): runs after _rank.sql settled the chains. Groups the remaining root hits into
-- causes (class, node) and gives each its time interval, its admissibility, its independent witnesses and its score.
-- Reads rule_hits, events, node_skew, progress_window, attempts, advisory_severities and params; builds root_hits,
-- attempt_skew, attempt_tolerance, causes and ranked_causes, which _rank_decide.sql decides on.

-- A job-level hit (no culprit node) joins a node-level cause of the same domain/subdomain when there is one.
-- Times are on the consensus clock before any ordering; raw_ts keeps what the line says (shown as root_cause.ts). A
-- root its rule could not localise to one node has granularity `group` (e.g. an NVLink peer on another tray,
-- xid_root.sql): _confidence.sql and _action.sql honour it.
-- Each hit's time is an interval [ts_lo, ts_hi] (null: unbounded): a stamp of the line's own is a point; an inherited
-- stamp lies between the stamp it copies and the next own stamp of its file; an unstamped or unanchored monotonic line
-- is unknown; a hit without a line (the scheduler's state) is dated when the scheduler gave up: an upper bound only.
CREATE OR REPLACE TEMP TABLE root_hits AS
WITH roots AS (
    SELECT h.* REPLACE (consensus_ts(h.ts, k.offset_s) AS ts),
           h.ts AS raw_ts, e.source, e.kind, e.code, e.node AS event_node, e.ts_quality, e.uri, e.line, e.severity,
           k.next_own_ts
    FROM rule_hits h
    LEFT JOIN events e USING (attempt_id, event_id)
    LEFT JOIN event_clock k USING (attempt_id, event_id)
    WHERE h.role = 'root'
),
stamped AS (
    SELECT r.*, r.event_id IS NOT NULL AND own_stamp(r.raw_ts, r.ts_quality) AS own
    FROM roots r
)
SELECT s.* EXCLUDE (next_own_ts),
       coalesce(s.culprit_node, min(s.culprit_node) OVER (PARTITION BY s.attempt_id, s.domain, s.subdomain), '') AS cause_node,
       interval_lo(s.ts, s.own, s.ts_quality) AS ts_lo,
       CASE WHEN s.event_id IS NULL THEN s.ts ELSE interval_hi(s.ts, s.own, s.next_own_ts) END AS ts_hi,
       list_contains((SELECT list(severity) FROM advisory_severities), s.severity) AS advisory
FROM stamped s;

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

-- Independent witnesses of a node: the distinct other nodes whose lines name it as their peer, and the distinct nodes
-- its own lines name (many naming X, or X naming everyone, both point at X); repeats from one reporter count once.
CREATE OR REPLACE TEMP TABLE node_witnesses AS
WITH edges AS (
    SELECT DISTINCT attempt_id, node AS reporter, peer_node AS named
    FROM events
    WHERE node IS NOT NULL AND peer_node IS NOT NULL AND peer_node <> node
)
SELECT attempt_id, node, count(DISTINCT other) AS witnesses
FROM (SELECT attempt_id, named AS node, reporter AS other FROM edges
      UNION ALL SELECT attempt_id, reporter, named FROM edges)
GROUP BY ALL;

-- One cause per (attempt, domain, subdomain, node): its interval is [earliest lower bound, earliest upper bound] of its
-- hits. A cause is late (a possible consequence, score x late_penalty) only when its interval starts after another
-- cause's ends, beyond the tie tolerance: overlapping intervals are not ordered (the chains decided those). A cause
-- with no time at all is late only when a cause that could explain it has a time: hardware and the scheduler can
-- explain everything, the network software and application failures, software application failures. Within one file
-- the order of the lines is the order of events: a cause without a stamp of its own that a file shows printed after
-- another cause's line is late. A cause after which training progressed (survived_s beyond its upper bound) did not
-- end the job, and one its own record calls non-fatal (advisory_severities) is a root only when a consequence was
-- witnessed (peers name its node, a symptom on its node, or one a chain ties to it, such as its peers' stalls): either
-- is inadmissible (score x inadmissible_penalty).
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
           min(ts) AS ts, min(ts_lo) AS ts_lo, min(ts_hi) AS ts_hi,
           bool_and(coalesce(advisory, false)) AS advisory,
           bool_or(own) AS own_stamped,
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
    SELECT g.*, NOT g.own_stamped AND a.attempt_id IS NOT NULL AS late_in_file,
           coalesce(w.witnesses, 0) AS witnesses,
           EXISTS (SELECT 1 FROM progress_window p CROSS JOIN params pr
                   WHERE p.attempt_id = g.attempt_id AND p.minute IS NOT NULL AND coalesce(p.iterations, 0) > 0
                     AND p.last_ts > g.ts_hi + to_microseconds(CAST(pr.survived_s * 1e6 AS BIGINT))) AS survived,
           coalesce(w.witnesses, 0) > 0 OR EXISTS (SELECT 1 FROM rule_hits s JOIN events e USING (attempt_id, event_id)
                                                  WHERE s.attempt_id = g.attempt_id AND s.role = 'symptom' AND e.node = g.cause_node)
           OR EXISTS (SELECT 1 FROM chain_links l  -- a consequence on another node the chains tie to it (peers' stalls)
                      WHERE l.attempt_id = g.attempt_id AND l.cause_node = g.cause_node AND l.relation = 'symptom') AS witnessed
    FROM grouped g
    LEFT JOIN after_in_file a USING (attempt_id, domain, subdomain, cause_node)
    LEFT JOIN node_witnesses w ON w.attempt_id = g.attempt_id AND w.node = g.cause_node
),
admitted AS (
    SELECT *, survived OR (advisory AND NOT witnessed) AS inadmissible FROM ordered
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
first_cause AS (  -- the earliest moment by which some cause had certainly started, and whether its stamp has whole seconds only
    SELECT attempt_id, min(ts_hi) AS t0_hi, arg_min(whole_seconds, (ts_hi, whole_seconds)) AS t0_whole_seconds
    FROM admitted WHERE NOT late_in_file AND NOT inadmissible AND ts_hi IS NOT NULL
    GROUP BY attempt_id
),
timed AS (
    SELECT g.*,
           (SELECT min(o.ts_hi) FROM ordered o
             WHERE o.attempt_id = g.attempt_id AND o.explain_rank <= g.explain_rank AND NOT o.late_in_file
               AND o.ts_lo IS NOT NULL) AS t0_explainer,  -- the scheduler's word makes no log evidence late
           f.t0_hi,
           -- two stamps compared: a whole-second one may be up to 1 s early, so the tie tolerance widens by that
           CASE WHEN coalesce(g.whole_seconds, false) OR coalesce(f.t0_whole_seconds, false) THEN 1.0 ELSE 0.0 END AS resolution_s
    FROM admitted g
    LEFT JOIN first_cause f USING (attempt_id)
),
judged AS (
    SELECT t.*,
           CASE
               WHEN t.late_in_file THEN true
               WHEN t.ts_lo IS NULL AND t.ts_hi IS NULL THEN t.t0_explainer IS NOT NULL  -- untimed: late beside a timed explainer
               WHEN t.ts_lo IS NULL THEN false                                          -- an upper bound only: never late
               ELSE t.ts_lo > t.t0_hi + to_microseconds(CAST((tol.tolerance_s + t.resolution_s) * 1e6 AS BIGINT))
           END AS late
    FROM timed t
    JOIN attempt_tolerance tol USING (attempt_id)
)
SELECT j.*, r.rule_id, r.event_id, r.culprit_rank, r.gpu, r.granularity, r.summary, r.action, r.kind, r.code, r.rep_ts,
       least(1.0, j.strength + p.corroboration_bonus * (j.sources - 1 + j.rules - 1))
         * CASE WHEN j.late THEN p.late_penalty ELSE 1.0 END
         * CASE WHEN j.inadmissible THEN p.inadmissible_penalty ELSE 1.0 END AS score
FROM judged j
JOIN representative r USING (attempt_id, domain, subdomain, cause_node)
CROSS JOIN params p;

-- The ten best causes of an attempt are its candidates (listed in the verdict). Equal scores: the earlier onset first
-- (the interval's start, else its end), then the class and node names.
CREATE OR REPLACE TEMP TABLE ranked_causes AS
SELECT *, position <= 10 AS is_candidate FROM (
    SELECT c.*,
           row_number() OVER (PARTITION BY attempt_id ORDER BY score DESC, coalesce(ts_lo, ts_hi) ASC NULLS LAST, domain, subdomain, cause_node) AS position,
           max(score) OVER (PARTITION BY attempt_id) AS best_score
    FROM causes c
);
