-- Builds the `quality` object of every attempt's verdict (docs/DESIGN.md §4.4) into the temp table verdict_quality:
-- the confidence, one reason per factor, the sources present and missing, and the clock skew. Runs after _rank.sql and
-- reads what it built (outcome, ranked_causes, evidence_rows, symptom_rows, attempt_skew), plus reports, events_all
-- and params. _verdict.sql puts it in the verdict rows.

-- Kernel-log sources (a node's own view of its hardware).
CREATE OR REPLACE TEMP MACRO is_kernel_source(s) AS s IN ('syslog', 'kernel', 'dmesg', 'kmsg', 'journal', 'journald');

CREATE OR REPLACE TEMP TABLE verdict_quality AS
WITH report_sources AS (
    SELECT attempt_id,
           list_sort(list(DISTINCT source) FILTER (WHERE status = 'ok' AND rows > 0)) AS present,
           list_sort(list(DISTINCT source) FILTER (WHERE status <> 'ok' OR rows = 0)) AS not_ok
    FROM reports GROUP BY attempt_id
),
assembled AS (
    SELECT a.attempt_id, o.verdict, w.score AS best_score, sk.max_abs_s AS skew_s, sk.unmeasured_roots AS skew_unmeasured,
           (SELECT count(DISTINCT x.source) FROM evidence_rows x WHERE x.attempt_id = a.attempt_id AND x.source IS NOT NULL) AS evidence_sources,
           (SELECT list_sort(list(DISTINCT x.source)) FROM evidence_rows x WHERE x.attempt_id = a.attempt_id AND x.source IS NOT NULL) AS evidence_source_list,
           CASE WHEN coalesce(w.cause_node, '') = '' THEN NULL ELSE
               EXISTS (SELECT 1 FROM events_all e WHERE e.attempt_id = a.attempt_id AND e.node = w.cause_node AND is_kernel_source(e.source))
               OR EXISTS (SELECT 1 FROM reports r WHERE r.attempt_id = a.attempt_id AND is_kernel_source(r.source) AND r.status = 'ok'
                                                    AND r.rows > 0
                                                    -- the node's own name, not one it begins (node1 in node12's path)
                                                    AND regexp_matches(r.uri, '(^|[^A-Za-z0-9])' || regexp_escape(w.cause_node) || '([^A-Za-z0-9]|$)'))
           END AS culprit_kernel_log,
           w.strength AS best_strength, w.rule_id AS w_rule, w.cause_node AS w_node, w.summary AS w_summary,
           w.granularity AS w_granularity,
           -- a cause left out on another node that more peers name than the root's node: the root may be a bystander
           EXISTS (SELECT 1 FROM ranked_causes r
                   WHERE r.attempt_id = a.attempt_id AND r.cause_node NOT IN ('', w.cause_node) AND r.witnesses > w.witnesses
                     AND NOT EXISTS (SELECT 1 FROM chosen c WHERE c.attempt_id = r.attempt_id AND c.position = r.position)) AS rival_witnessed,
           (SELECT count(*) FROM ranked_causes c WHERE c.attempt_id = a.attempt_id AND c.is_candidate) AS candidates,
           (SELECT count(*) FROM symptom_rows s WHERE s.attempt_id = a.attempt_id) AS symptoms,
           coalesce(rs.present, []::VARCHAR[]) AS present,
           list_filter(coalesce(rs.not_ok, []::VARCHAR[]), lambda s: NOT list_contains(coalesce(rs.present, []::VARCHAR[]), s)) AS missing
    FROM attempts a
    JOIN outcome o USING (attempt_id)
    LEFT JOIN winner w USING (attempt_id)
    LEFT JOIN report_sources rs USING (attempt_id)
    LEFT JOIN attempt_skew sk USING (attempt_id)
),
-- points per factor, one reason per factor
factors AS (
    SELECT *,
        CASE WHEN best_strength >= 0.9 THEN 2 WHEN best_strength >= 0.7 THEN 1 ELSE 0 END AS p_strength,
        CASE WHEN evidence_sources >= 3 THEN 2 WHEN evidence_sources = 2 THEN 1 ELSE 0 END AS p_sources,
        CASE WHEN len(missing) > 0 THEN -1 ELSE 0 END AS p_missing,
        CASE WHEN culprit_kernel_log = false THEN -1 ELSE 0 END AS p_kernel,
        CASE WHEN skew_unmeasured AND skew_s > (SELECT skew_tolerance_s FROM params) THEN -1 ELSE 0 END AS p_skew,
        CASE WHEN w_granularity = 'group' THEN -1 ELSE 0 END AS p_local,
        CASE WHEN verdict = 'attributed' AND rival_witnessed THEN -1 ELSE 0 END AS p_rival
    FROM assembled
),
graded AS (
    SELECT *,
        CASE
            WHEN verdict = 'not_failed' THEN CASE WHEN best_score IS NULL THEN 'high' ELSE 'medium' END
            WHEN verdict = 'unattributed' THEN 'low'
            WHEN verdict = 'ambiguous' THEN 'low'
            WHEN w_rule = 'scheduler_state' THEN CASE WHEN best_strength >= 0.7 THEN 'medium' ELSE 'low' END
            WHEN best_score >= 0.8 AND p_strength + p_sources + p_missing + p_kernel + p_skew + p_local + p_rival >= 3 THEN 'high'
            WHEN best_score >= 0.5 AND p_strength + p_sources + p_missing + p_kernel + p_skew + p_local + p_rival >= 0 THEN 'medium'
            ELSE 'low'
        END AS confidence,
        list_filter([
            CASE verdict
                WHEN 'attributed' THEN printf('root: %s (score %.2f)', w_summary, best_score)
                WHEN 'ambiguous' THEN printf('%d contenders score within %.2f of the best score %.2f and would send the operator to different nodes or actions: %s',
                                             (SELECT count(*) FROM chosen c WHERE c.attempt_id = f.attempt_id), (SELECT ambiguity_margin FROM params), best_score,
                                             (SELECT string_agg(printf('%s/%s on %s (%s, score %.2f)', c.domain, c.subdomain, coalesce(nullif(c.cause_node, ''), 'the job'),
                                                                       c.action, c.score), ' vs ' ORDER BY c.position)
                                              FROM chosen c WHERE c.attempt_id = f.attempt_id))
                WHEN 'unattributed' THEN 'no event that can start a failure was found in the attempt window'
                ELSE CASE WHEN best_score IS NULL THEN 'the scheduler reports success and no failure evidence was found'
                          ELSE printf('the scheduler reports success; the failure evidence found (best score %.2f) did not end the job', best_score) END
            END,
            CASE WHEN verdict = 'attributed' THEN
                CASE WHEN best_strength >= 0.9 THEN 'strong root class: the root is a fatal hardware record'
                     WHEN best_strength >= 0.7 THEN printf('medium root class (strength %.2f)', best_strength)
                     ELSE printf('weak root class (strength %.2f)', best_strength) END END,
            CASE WHEN verdict = 'attributed' AND w_rule = 'scheduler_state' THEN 'scheduler-only root: only the scheduler state names the cause' END,
            CASE WHEN verdict = 'attributed' AND w_rule <> 'scheduler_state' THEN
                CASE WHEN evidence_sources >= 2 THEN printf('%d sources corroborate (%s)', evidence_sources, array_to_string(evidence_source_list, ', '))
                     ELSE 'a single source: nothing corroborates the root' END END,
            CASE WHEN len(missing) > 0 THEN 'sources missing or unusable: ' || array_to_string(missing, ', ') END,
            CASE WHEN verdict = 'attributed' AND culprit_kernel_log = false THEN printf('no kernel log from culprit node %s', w_node) END,
            CASE WHEN skew_s > 0 AND skew_unmeasured AND skew_s > (SELECT skew_tolerance_s FROM params)
                     THEN printf('clock skew up to %.1fs and a root node without a clock estimate: order less certain', skew_s)
                 WHEN skew_s > 0 THEN printf('clock skew up to %.1fs measured and corrected before ordering', skew_s) END,
            CASE WHEN verdict = 'attributed' AND rival_witnessed
                 THEN 'another node is named by more peers than the root''s node: the root may be a bystander' END,
            CASE WHEN verdict = 'attributed' AND w_granularity = 'group'
                 THEN 'not localised to one node: the NVLink peer may be on another tray' END,
            CASE WHEN symptoms > 0 THEN printf('%d symptom(s) explained as cascade', symptoms) END
        ], lambda r: r IS NOT NULL) AS reasons
    FROM factors f
)
SELECT attempt_id,
       struct_pack(confidence := confidence, reasons := reasons, sources_present := present, sources_missing := missing,
                   clock_skew_s := round(coalesce(skew_s, 0.0), 1)) AS quality
FROM graded;
