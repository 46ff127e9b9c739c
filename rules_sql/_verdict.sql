-- Builds one verdict row per attempt (the verdict object `attribute --json` prints) into the temp table verdict_base,
-- from what _rank.sql built (outcome, chosen, ranked_causes, root_hits, symptom_rows, evidence_rows), why_not, verdict_quality
-- (_confidence.sql) and reports. Its `action` is the winning rule's; _action.sql, run next, makes it history-aware.
-- Nested objects are STRUCTs, lists are LISTs, timestamps inside them ISO 8601 strings.
CREATE OR REPLACE TEMP MACRO iso(t) AS strftime(t, '%Y-%m-%dT%H:%M:%S.%gZ');

CREATE OR REPLACE TEMP TABLE verdict_base AS
WITH chosen_lists AS (
    SELECT attempt_id,
           list_sort(list(DISTINCT cause_node) FILTER (WHERE cause_node <> '')) AS culprit_nodes,
           count(DISTINCT domain) AS domains,
           min(domain) AS any_domain
    FROM chosen GROUP BY attempt_id
),
-- every rank a root hit of the chosen cause(s) names (one cause per node can hold several ranks)
chosen_ranks AS (
    SELECT h.attempt_id, list_sort(list(DISTINCT h.culprit_rank)) AS culprit_ranks
    FROM root_hits h
    JOIN chosen c ON c.attempt_id = h.attempt_id AND c.domain = h.domain AND c.subdomain = h.subdomain
                 AND c.cause_node = h.cause_node
    WHERE h.culprit_rank IS NOT NULL
    GROUP BY h.attempt_id
),
candidate_lists AS (
    SELECT attempt_id,
           list(struct_pack(domain := domain, subdomain := subdomain,
                            nodes := CASE WHEN cause_node = '' THEN []::VARCHAR[] ELSE [cause_node] END,
                            score := round(score, 3), rule := rule_id) ORDER BY position) AS candidates
    FROM ranked_causes WHERE is_candidate GROUP BY attempt_id
),
symptom_lists AS (
    SELECT attempt_id,
           list(struct_pack(event := kind, node := node, rank := rank, ts := iso(ts), summary := summary, uri := uri, line := line)
                ORDER BY ts NULLS LAST, node, rank, kind) AS symptoms,
           list(DISTINCT node) FILTER (WHERE node IS NOT NULL) AS nodes
    FROM symptom_rows GROUP BY attempt_id
),
evidence_lists AS (
    SELECT attempt_id,
           list(struct_pack(role := role, source := source, uri := uri, line := line, ts := iso(ts), text := text,
                            locator := locator, kinds := kinds)
                ORDER BY CASE role WHEN 'root_cause' THEN 0 WHEN 'corroboration' THEN 1 WHEN 'confirmation' THEN 2 ELSE 3 END,
                         ts NULLS LAST, uri, line, event_id) AS evidence
    FROM (
        SELECT *, row_number() OVER (PARTITION BY attempt_id, role ORDER BY ts NULLS LAST, uri, line, event_id) AS n
        FROM evidence_rows
    ) WHERE n <= 50
    GROUP BY attempt_id
),
report_lists AS (
    SELECT attempt_id,
           list(struct_pack(connector := connector, source := source, uri := uri, status := status, rows := rows, reason := reason)
                ORDER BY connector, source, uri, status, rows, reason) AS connector_reports
    FROM reports GROUP BY attempt_id
),
assembled AS (
    SELECT a.attempt_id, a.workload_id, a.attempt, a.cluster, a.state, o.verdict, w.domain AS w_domain,
           w.subdomain AS w_subdomain, w.rule_id AS w_rule, w.kind AS w_kind, w.code AS w_code, w.cause_node AS w_node, w.gpu AS w_gpu, w.culprit_rank AS w_rank, w.rep_ts AS w_ts,
           w.summary AS w_summary, w.granularity AS w_granularity, w.action AS w_action,
           cl.culprit_nodes, cr.culprit_ranks, cl.domains, cl.any_domain, ca.candidates, sl.symptoms, sl.nodes AS symptom_nodes,
           ev.evidence, q.quality, rp.connector_reports, a.nodes AS attempt_nodes,
           CASE WHEN y.attempt_id IS NOT NULL THEN
               struct_pack(domain := y.domain, subdomain := y.subdomain, node := nullif(y.cause_node, ''), score := round(y.score, 3),
                           position := CAST(y.position AS INTEGER), reason := y.reason, detail := y.detail) END AS why_not
    FROM attempts a
    JOIN outcome o USING (attempt_id)
    LEFT JOIN winner w USING (attempt_id)
    LEFT JOIN chosen_lists cl USING (attempt_id)
    LEFT JOIN chosen_ranks cr USING (attempt_id)
    LEFT JOIN candidate_lists ca USING (attempt_id)
    LEFT JOIN symptom_lists sl USING (attempt_id)
    LEFT JOIN evidence_lists ev USING (attempt_id)
    LEFT JOIN report_lists rp USING (attempt_id)
    LEFT JOIN why_not y USING (attempt_id)
    JOIN verdict_quality q USING (attempt_id)
)
SELECT
    attempt_id, workload_id, attempt, cluster, state, verdict,
    CASE verdict WHEN 'attributed' THEN w_domain WHEN 'ambiguous' THEN CASE WHEN domains = 1 THEN any_domain END END AS domain,
    CASE verdict WHEN 'attributed' THEN w_subdomain WHEN 'ambiguous' THEN 'ambiguous' END AS subdomain,
    CASE WHEN verdict = 'attributed' THEN
        struct_pack(rule := w_rule, event := coalesce(w_kind, 'scheduler_state'), code := w_code, node := nullif(w_node, ''),
                    gpu := w_gpu, rank := w_rank, ts := iso(w_ts), summary := w_summary)
    END AS root_cause,
    CASE WHEN verdict IN ('attributed', 'ambiguous') THEN coalesce(culprit_nodes, []::VARCHAR[]) ELSE []::VARCHAR[] END AS culprit_nodes,
    list_sort(list_distinct(list_concat(
        coalesce(list_filter(symptom_nodes, lambda n: list_contains(attempt_nodes, n)), []::VARCHAR[]),
        CASE WHEN verdict IN ('attributed', 'ambiguous') THEN coalesce(culprit_nodes, []::VARCHAR[]) ELSE []::VARCHAR[] END))) AS affected_nodes,
    coalesce(symptoms, []) AS symptoms,
    coalesce(candidates, []) AS candidates,
    why_not,
    coalesce(evidence, []) AS evidence,
    quality,
    coalesce(connector_reports, []) AS connector_reports,
    CASE WHEN verdict IN ('attributed', 'ambiguous') THEN coalesce(culprit_ranks, []::INTEGER[]) ELSE []::INTEGER[] END AS culprit_ranks,
    CASE verdict WHEN 'attributed' THEN w_granularity WHEN 'ambiguous' THEN 'group' ELSE 'job' END AS granularity,
    CASE verdict WHEN 'attributed' THEN w_action WHEN 'not_failed' THEN 'none' ELSE 'investigate' END AS action,
    (SELECT rules_version FROM params) AS rules_version,
    '1' AS schema_version
FROM assembled;

