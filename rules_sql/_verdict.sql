-- Builds one verdict row per attempt (CONTRACTS §3) from outcome, chosen, ranked_causes, symptom_rows,
-- evidence_rows and reports. Nested objects are STRUCTs, lists are LISTs, timestamps inside them ISO 8601 strings.
CREATE OR REPLACE TEMP MACRO iso(t) AS strftime(t, '%Y-%m-%dT%H:%M:%S.%gZ');

-- Kernel-log sources (a node's own view of its hardware).
CREATE OR REPLACE TEMP MACRO is_kernel_source(s) AS s IN ('syslog', 'kernel', 'dmesg', 'kmsg', 'journal', 'journald');

CREATE OR REPLACE TEMP TABLE verdict_base AS
WITH winner AS (
    SELECT * FROM ranked_causes WHERE position = 1
),
chosen_lists AS (
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
    FROM ranked_causes WHERE position <= 10 GROUP BY attempt_id
),
symptom_lists AS (
    SELECT attempt_id,
           list(struct_pack(event := kind, node := node, rank := rank, ts := iso(ts), summary := summary)
                ORDER BY ts NULLS LAST, node, rank, kind) AS symptoms,
           list(DISTINCT node) FILTER (WHERE node IS NOT NULL) AS nodes
    FROM symptom_rows GROUP BY attempt_id
),
evidence_lists AS (
    SELECT attempt_id,
           list(struct_pack(role := role, source := source, uri := uri, line := line, ts := iso(ts), text := text,
                            locator := locator)
                ORDER BY CASE role WHEN 'root_cause' THEN 0 WHEN 'corroboration' THEN 1 WHEN 'confirmation' THEN 2 ELSE 3 END,
                         ts NULLS LAST, uri, line) AS evidence
    FROM (
        SELECT *, row_number() OVER (PARTITION BY attempt_id, role ORDER BY ts NULLS LAST, uri, line) AS n
        FROM evidence_rows
    ) WHERE n <= 50
    GROUP BY attempt_id
),
report_lists AS (
    SELECT attempt_id,
           list(struct_pack(connector := connector, source := source, uri := uri, status := status, rows := rows, reason := reason)
                ORDER BY connector, source, uri) AS connector_reports,
           list_sort(list(DISTINCT source) FILTER (WHERE status = 'ok' AND rows > 0)) AS present,
           list_sort(list(DISTINCT source) FILTER (WHERE status <> 'ok' OR rows = 0)) AS not_ok
    FROM reports GROUP BY attempt_id
),
assembled AS (
    SELECT a.attempt_id, a.workload_id, a.attempt, a.cluster, a.state, o.verdict, w.score AS best_score, w.sources AS best_sources,
           w.peer_unlocalised, sk.max_abs_s AS skew_s, sk.unmeasured_roots AS skew_unmeasured,
           (SELECT count(DISTINCT x.source) FROM evidence_rows x WHERE x.attempt_id = a.attempt_id AND x.source IS NOT NULL) AS evidence_sources,
           (SELECT list_sort(list(DISTINCT x.source)) FROM evidence_rows x WHERE x.attempt_id = a.attempt_id AND x.source IS NOT NULL) AS evidence_source_list,
           CASE WHEN coalesce(w.cause_node, '') = '' THEN NULL ELSE
               EXISTS (SELECT 1 FROM events_all e WHERE e.attempt_id = a.attempt_id AND e.node = w.cause_node AND is_kernel_source(e.source))
               OR EXISTS (SELECT 1 FROM reports r WHERE r.attempt_id = a.attempt_id AND is_kernel_source(r.source) AND r.status = 'ok'
                                                    AND r.rows > 0 AND contains(r.uri, w.cause_node))
           END AS culprit_kernel_log,
           w.strength AS best_strength, w.domain AS w_domain, w.subdomain AS w_subdomain, w.rule_id AS w_rule, w.kind AS w_kind,
           w.code AS w_code, w.cause_node AS w_node, w.gpu AS w_gpu, w.culprit_rank AS w_rank, w.rep_ts AS w_ts,
           w.summary AS w_summary, w.granularity AS w_granularity, w.action AS w_action,
           cl.culprit_nodes, cr.culprit_ranks, cl.domains, cl.any_domain, ca.candidates, sl.symptoms, sl.nodes AS symptom_nodes,
           ev.evidence, rp.connector_reports, coalesce(rp.present, []::VARCHAR[]) AS present,
           list_filter(coalesce(rp.not_ok, []::VARCHAR[]), lambda s: NOT list_contains(coalesce(rp.present, []::VARCHAR[]), s)) AS missing,
           a.nodes AS attempt_nodes
    FROM attempts a
    JOIN outcome o USING (attempt_id)
    LEFT JOIN winner w USING (attempt_id)
    LEFT JOIN chosen_lists cl USING (attempt_id)
    LEFT JOIN chosen_ranks cr USING (attempt_id)
    LEFT JOIN candidate_lists ca USING (attempt_id)
    LEFT JOIN symptom_lists sl USING (attempt_id)
    LEFT JOIN evidence_lists ev USING (attempt_id)
    LEFT JOIN report_lists rp USING (attempt_id)
    LEFT JOIN attempt_skew sk USING (attempt_id)
),
-- Confidence (DESIGN §4.4): points per factor, one reason per factor.
factors AS (
    SELECT *,
        CASE WHEN best_strength >= 0.9 THEN 2 WHEN best_strength >= 0.7 THEN 1 ELSE 0 END AS p_strength,
        CASE WHEN evidence_sources >= 3 THEN 2 WHEN evidence_sources = 2 THEN 1 ELSE 0 END AS p_sources,
        CASE WHEN len(missing) > 0 THEN -1 ELSE 0 END AS p_missing,
        CASE WHEN culprit_kernel_log = false THEN -1 ELSE 0 END AS p_kernel,
        CASE WHEN skew_unmeasured AND skew_s > (SELECT skew_tolerance_s FROM params) THEN -1 ELSE 0 END AS p_skew,
        CASE WHEN coalesce(peer_unlocalised, false) OR w_granularity = 'group' THEN -1 ELSE 0 END AS p_local
    FROM assembled
),
graded AS (
    SELECT *,
        CASE
            WHEN verdict = 'not_failed' THEN CASE WHEN best_score IS NULL THEN 'high' ELSE 'medium' END
            WHEN verdict = 'unattributed' THEN 'low'
            WHEN verdict = 'ambiguous' THEN 'low'
            WHEN w_rule = 'scheduler_state' THEN CASE WHEN best_strength >= 0.7 THEN 'medium' ELSE 'low' END
            WHEN best_score >= 0.8 AND p_strength + p_sources + p_missing + p_kernel + p_skew + p_local >= 3 THEN 'high'
            WHEN best_score >= 0.5 AND p_strength + p_sources + p_missing + p_kernel + p_skew + p_local >= 0 THEN 'medium'
            ELSE 'low'
        END AS confidence,
        list_filter([
            CASE verdict
                WHEN 'attributed' THEN printf('root: %s (score %.2f)', w_summary, best_score)
                WHEN 'ambiguous' THEN printf('%d causes score within the ambiguity margin of %.2f', len(candidates), best_score)
                WHEN 'unattributed' THEN 'no event that can start a failure was found in the attempt window'
                ELSE CASE WHEN best_score IS NULL THEN 'the scheduler reports success and no failure evidence was found'
                          ELSE 'the scheduler reports success; weak failure evidence was ignored' END
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
            CASE WHEN verdict = 'attributed' AND (coalesce(peer_unlocalised, false) OR w_granularity = 'group')
                 THEN 'not localised to one node: the NVLink peer may be on another tray' END,
            CASE WHEN symptoms IS NOT NULL THEN printf('%d symptom(s) explained as cascade', len(symptoms)) END
        ], lambda r: r IS NOT NULL) AS reasons
    FROM factors
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
    coalesce(evidence, []) AS evidence,
    struct_pack(confidence := confidence, reasons := reasons, sources_present := present, sources_missing := missing,
                clock_skew_s := round(coalesce(skew_s, 0.0), 1)) AS quality,
    coalesce(connector_reports, []) AS connector_reports,
    CASE WHEN verdict IN ('attributed', 'ambiguous') THEN coalesce(culprit_ranks, []::INTEGER[]) ELSE []::INTEGER[] END AS culprit_ranks,
    CASE verdict WHEN 'attributed' THEN w_granularity WHEN 'ambiguous' THEN 'group' ELSE 'job' END AS granularity,
    CASE verdict WHEN 'attributed' THEN w_action WHEN 'not_failed' THEN 'none' ELSE 'investigate' END AS action,
    (SELECT rules_version FROM params) AS rules_version,
    '1' AS schema_version,
    w_rule AS base_rule
FROM graded;


-- History-aware action (DESIGN §4.3): a function of this attempt's verdict and of `history` (earlier attempts of the
-- same cluster + workload: the warehouse's rows, plus the other attempts of this run) and `params` budgets.
CREATE OR REPLACE TEMP TABLE timeline AS
SELECT * EXCLUDE (n) FROM (
    SELECT *, row_number() OVER (PARTITION BY attempt_id ORDER BY current_run DESC) AS n FROM (
        SELECT v.attempt_id, v.workload_id, v.cluster, CAST(v.attempt AS BIGINT) AS attempt, v.verdict, v.domain, v.subdomain,
               v.culprit_nodes, concat_ws('|', v.domain, v.subdomain, array_to_string(list_sort(v.culprit_nodes), ',')) AS root_fingerprint,
               p.progress, true AS current_run
        FROM verdict_base v LEFT JOIN attempt_progress p USING (attempt_id)
        UNION ALL
        SELECT h.attempt_id, h.workload_id, h.cluster, h.attempt, h.verdict, h.domain, h.subdomain, h.culprit_nodes,
               coalesce(h.root_fingerprint, concat_ws('|', h.domain, h.subdomain, array_to_string(list_sort(h.culprit_nodes), ','))),
               h.progress, false
        FROM history h
    )
) WHERE n = 1;

-- An attempt "made progress" when its highest completed marker beats every earlier attempt's.
CREATE OR REPLACE TEMP TABLE timeline_progress AS
SELECT t.*,
       t.progress IS NOT NULL AND t.progress > coalesce(max(t.progress) OVER (
           PARTITION BY t.cluster, t.workload_id ORDER BY t.attempt ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), -1) AS made_progress
FROM timeline t;

CREATE OR REPLACE TEMP TABLE action_inputs AS
WITH cur AS (
    SELECT v.attempt_id, v.cluster, v.workload_id, CAST(v.attempt AS BIGINT) AS attempt, v.verdict, v.domain, v.subdomain,
           v.granularity, v.action AS base_action, len(v.culprit_nodes) AS n_culprits,
           concat_ws('|', v.domain, v.subdomain, array_to_string(list_sort(v.culprit_nodes), ',')) AS root_fingerprint
    FROM verdict_base v
),
marks AS (
    SELECT c.attempt_id,
           coalesce(max(t.attempt) FILTER (WHERE t.made_progress), -1) AS last_progress
    FROM cur c LEFT JOIN timeline_progress t
      ON t.cluster = c.cluster AND t.workload_id = c.workload_id AND t.attempt <= c.attempt
    GROUP BY c.attempt_id
)
SELECT c.*, m.last_progress,
       (SELECT count(*) FROM timeline t WHERE t.cluster = c.cluster AND t.workload_id = c.workload_id AND t.attempt < c.attempt
           AND t.attempt >= m.last_progress AND t.verdict <> 'not_failed') AS restarts_used,
       (SELECT count(*) FROM timeline t WHERE t.cluster = c.cluster AND t.workload_id = c.workload_id AND t.attempt < c.attempt
           AND t.attempt >= m.last_progress AND t.verdict = 'attributed' AND t.root_fingerprint = c.root_fingerprint) AS same_root_recent,
       (SELECT count(*) FROM timeline t WHERE t.cluster = c.cluster AND t.workload_id = c.workload_id AND t.attempt < c.attempt
           AND t.verdict = 'attributed' AND t.root_fingerprint = c.root_fingerprint) AS same_root_ever
FROM cur c JOIN marks m USING (attempt_id);

CREATE OR REPLACE TEMP TABLE action_rows AS
SELECT i.*,
    CASE
        WHEN i.verdict = 'not_failed' THEN 'none'
        -- an unknown or undecided cause is not restarted blindly: a person (or a diagnostic) decides
        WHEN i.verdict IN ('ambiguous', 'unattributed') THEN 'investigate'
        -- the workload itself cannot succeed as it is: restarting would fail the same way
        WHEN i.domain = 'application' AND i.subdomain IN ('exception', 'cuda_oom', 'host_oom', 'config', 'collective_mismatch', 'nan') THEN 'stop'
        WHEN i.base_action IN ('none', 'stop', 'investigate') THEN i.base_action
        -- a root that cannot be pinned on one node: confirmation retries in place, then a person
        WHEN i.granularity = 'group' THEN CASE WHEN i.same_root_recent < p.confirmation_retries THEN 'restart' ELSE 'investigate' END
        -- progress-aware budgets
        WHEN i.same_root_recent + 1 >= p.same_root_limit THEN 'stop'
        WHEN i.restarts_used >= p.max_restarts THEN 'stop'
        -- the drain of this node for this root was already asked for by an earlier attempt: just keep away from it
        WHEN i.base_action = 'drain_node' AND i.same_root_ever > 0 THEN 'restart_excluding_nodes'
        WHEN i.domain = 'hardware' AND i.n_culprits > 0 AND i.base_action = 'restart' THEN 'restart_excluding_nodes'
        ELSE i.base_action
    END AS action
FROM action_inputs i CROSS JOIN params p;

CREATE OR REPLACE TEMP TABLE verdict_rows AS
SELECT v.* EXCLUDE (base_rule) REPLACE (a.action AS action)
FROM verdict_base v JOIN action_rows a USING (attempt_id);