-- The decision (docs/DESIGN.md §4.2): runs after _rank_causes.sql. Decides each attempt's verdict from ranked_causes
-- by what the operator would do, and builds outcome (the verdict), contenders, chosen (the causes it stands on),
-- symptom_rows and evidence_rows, which _confidence.sql, _verdict.sql and _action.sql turn into verdict rows.

-- Every cause within ambiguity_margin of the best score contends. The operator's choice a contender stands for is its
-- action and where the action applies: draining or excluding names nodes, so those contenders agree only on the same
-- node; restarting, stopping or investigating agree on one node, or on one class wherever it was seen (a shared
-- filesystem named on four nodes); a job-level cause agrees with a node's when the action is the same.
CREATE OR REPLACE TEMP TABLE contenders AS
SELECT r.*, r.action IN ('drain_node', 'restart_excluding_nodes') AS node_targeted
FROM ranked_causes r CROSS JOIN params p
WHERE r.score >= r.best_score - p.ambiguity_margin;

-- Whether all contenders send the operator to the same place with the same action; else whether one contender's
-- independent witnesses outnumber every other's by witness_ratio (at least min_witnesses): a node named by 48 peers
-- is the one that failed, not one named by 3. The decided set: the agreeing contenders, or the dominant one and the
-- contenders that agree with it.
CREATE OR REPLACE TEMP TABLE decision AS
WITH agreement AS (
    SELECT attempt_id, count(*) AS n,
           count(DISTINCT action) = 1
           AND (count(DISTINCT nullif(cause_node, '')) <= 1
                OR (count(DISTINCT (domain, subdomain)) = 1 AND NOT bool_or(node_targeted))) AS agree
    FROM contenders GROUP BY attempt_id
),
by_witness AS (
    SELECT attempt_id, arg_max(cause_node, (witnesses, -position)) AS leader, max(witnesses) AS top,
           max(witnesses) FILTER (WHERE cause_node <> (SELECT arg_max(c2.cause_node, (c2.witnesses, -c2.position))
                                                       FROM contenders c2 WHERE c2.attempt_id = c.attempt_id)) AS second
    FROM contenders c GROUP BY attempt_id
)
SELECT a.attempt_id, a.n, a.agree,
       CASE WHEN NOT a.agree AND w.top >= p.min_witnesses AND w.top >= p.witness_ratio * coalesce(w.second, 0)
            THEN w.leader END AS witness_leader,
       w.top AS top_witnesses, coalesce(w.second, 0) AS second_witnesses
FROM agreement a JOIN by_witness w USING (attempt_id) CROSS JOIN params p;

CREATE OR REPLACE TEMP TABLE decided AS
WITH kept AS (
    SELECT c.* FROM contenders c JOIN decision d USING (attempt_id)
    WHERE d.agree OR c.cause_node = d.witness_leader
),
lead AS (
    SELECT * FROM kept QUALIFY row_number() OVER (PARTITION BY attempt_id ORDER BY position) = 1
)
SELECT k.* FROM kept k JOIN decision d USING (attempt_id)
WHERE d.agree
UNION ALL
SELECT c.* FROM contenders c JOIN decision d USING (attempt_id) JOIN lead l USING (attempt_id)
WHERE NOT d.agree AND d.witness_leader IS NOT NULL AND c.action = l.action
  AND (c.cause_node = l.cause_node OR c.cause_node = '' OR (c.domain = l.domain AND c.subdomain = l.subdomain AND NOT c.node_targeted));

CREATE OR REPLACE TEMP TABLE outcome AS
SELECT a.attempt_id,
       w.attempt_id IS NOT NULL AS has_root,
       coalesce(d.n, 0) AS n_contenders,
       (SELECT count(DISTINCT c.domain) FROM contenders c WHERE c.attempt_id = a.attempt_id) AS n_domains,
       w.score AS best_score,
       CASE
           -- the scheduler says the job ended well (COMPLETED with exit code 0 or none given): no log line overrules it
           WHEN a.state = 'COMPLETED' AND coalesce(a.exit_code, '0') IN ('0', '0:0') THEN 'not_failed'
           WHEN w.attempt_id IS NULL AND (a.state = 'COMPLETED' OR (a.state IS NULL AND a.exit_code IN ('0', '0:0'))) THEN 'not_failed'
           WHEN a.state = 'COMPLETED' AND w.score < 0.8 THEN 'not_failed'
           WHEN w.attempt_id IS NULL THEN 'unattributed'
           WHEN EXISTS (SELECT 1 FROM decided x WHERE x.attempt_id = a.attempt_id) THEN 'attributed'
           ELSE 'ambiguous'
       END AS verdict
FROM attempts a
LEFT JOIN (SELECT * FROM ranked_causes WHERE position = 1) w USING (attempt_id)
LEFT JOIN decision d USING (attempt_id);

-- The cause(s) the verdict stands on: the decided causes (the first of them is the root, `lead`; the others agree
-- with it and corroborate), or every contender of an ambiguous verdict (each a lead).
CREATE OR REPLACE TEMP TABLE chosen AS
SELECT * EXCLUDE (node_targeted, contending), contending OR position = min(position) OVER (PARTITION BY attempt_id) AS lead FROM (
    SELECT x.*, false AS contending FROM decided x JOIN outcome o USING (attempt_id) WHERE o.verdict = 'attributed'
    UNION ALL
    SELECT c.*, true FROM contenders c JOIN outcome o USING (attempt_id) WHERE o.verdict = 'ambiguous'
);

-- The verdict's root: the lead of the chosen causes of an attributed verdict, else the best-ranked cause.
CREATE OR REPLACE TEMP TABLE winner AS
SELECT r.* FROM ranked_causes r JOIN outcome o USING (attempt_id)
WHERE CASE WHEN o.verdict = 'attributed'
           THEN EXISTS (SELECT 1 FROM chosen c WHERE c.attempt_id = r.attempt_id AND c.lead AND c.position = r.position)
           ELSE r.position = 1 END;

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
           CASE WHEN h.event_id = c.event_id AND c.lead THEN 'root_cause' ELSE 'corroboration' END AS role
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
