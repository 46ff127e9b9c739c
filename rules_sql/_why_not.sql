-- Why not the runner-up (docs/DESIGN.md §4.2): runs after _rank_decide.sql. For every attributed verdict, the best
-- ranked cause the verdict does not stand on (the first that would send the operator elsewhere; when there is none, a
-- root class a causal chain settled as a consequence (`symptom`: not ranked, so no score or position); else the best
-- cause that agrees with the root: `agrees`, it corroborates) and why it lost, first reason that applies: it did not end the job
-- (survived), its record calls it non-fatal and nothing witnessed a consequence (advisory_unwitnessed), it started
-- after another cause had certainly begun (late), it contended but the root's node has the independent witnesses
-- (fewer_witnesses), else a lower score (weaker). Builds the temp table why_not, one row per such attempt; an
-- ambiguous verdict has none: its reason already lists what separates the contenders.
CREATE OR REPLACE TEMP TABLE why_not AS
WITH alternatives AS (
    SELECT r.*, EXISTS (SELECT 1 FROM chosen c WHERE c.attempt_id = r.attempt_id AND c.position = r.position) AS agrees
    FROM ranked_causes r JOIN outcome o USING (attempt_id) JOIN winner w USING (attempt_id)
    WHERE o.verdict = 'attributed' AND r.position <> w.position
),
settled AS (  -- a root class a chain made a symptom and no other hit keeps ranked: the first by class, node and chain
    SELECT l.attempt_id, l.domain, l.subdomain, coalesce(l.culprit_node, '') AS cause_node, l.chain_id, l.cause_kind,
           l.cause_node AS explained_by
    FROM chain_links l JOIN outcome o USING (attempt_id)
    WHERE o.verdict = 'attributed' AND l.relation <> 'recovered'
      AND NOT EXISTS (SELECT 1 FROM ranked_causes r WHERE r.attempt_id = l.attempt_id AND r.domain = l.domain
                                                      AND r.subdomain = l.subdomain AND r.cause_node = coalesce(l.culprit_node, ''))
    QUALIFY row_number() OVER (PARTITION BY l.attempt_id ORDER BY l.domain, l.subdomain, cause_node, l.chain_id, l.cause_kind, l.cause_node) = 1
),
runner_up AS (
    SELECT * EXCLUDE (preference) FROM (
        SELECT a.*, CASE WHEN a.agrees THEN 2 ELSE 0 END AS preference, NULL AS chain_detail FROM alternatives a
        UNION ALL BY NAME
        SELECT s.attempt_id, s.domain, s.subdomain, s.cause_node, 1 AS preference,
               printf('chain %s explains it as a consequence of %s on %s', s.chain_id, coalesce(s.cause_kind, 'the scheduler state'),
                      coalesce(s.explained_by, '?')) AS chain_detail
        FROM settled s
    ) c
    QUALIFY row_number() OVER (PARTITION BY attempt_id ORDER BY preference, position NULLS LAST) = 1
),
judged AS (
    SELECT u.*, w.domain AS w_domain, w.subdomain AS w_subdomain, w.score AS w_score, w.strength AS w_strength,
           w.witnesses AS w_witnesses, w.sources AS w_sources, w.rules AS w_rules,
           (SELECT max(p.last_ts) FROM progress_window p
             WHERE p.attempt_id = u.attempt_id AND p.minute IS NOT NULL AND coalesce(p.iterations, 0) > 0) AS progressed_until,
           CASE WHEN u.chain_detail IS NOT NULL THEN 'symptom'
                WHEN u.agrees THEN 'agrees'
                WHEN u.survived THEN 'survived'
                WHEN u.advisory AND NOT u.witnessed THEN 'advisory_unwitnessed'
                WHEN u.late THEN 'late'
                WHEN u.score >= u.best_score - p.ambiguity_margin THEN 'fewer_witnesses'
                ELSE 'weaker' END AS reason
    FROM runner_up u
    JOIN winner w USING (attempt_id)
    CROSS JOIN params p
)
SELECT attempt_id, domain, subdomain, cause_node, score, position, reason,
       CASE reason
           WHEN 'symptom' THEN chain_detail
           WHEN 'agrees' THEN printf('it sends the operator to the same place with the same action (%s): it corroborates the root', action)
           WHEN 'survived' THEN printf('training progressed %.0f s after it, so it did not end the job',
                                       (epoch_us(progressed_until) - epoch_us(ts_hi)) / 1e6)
           WHEN 'advisory_unwitnessed' THEN 'its own record calls it non-fatal and no consequence of it was witnessed'
           WHEN 'late' THEN CASE WHEN ts_lo IS NOT NULL AND t0_hi IS NOT NULL
                                 THEN printf('it started %.0f s after the earliest cause had certainly begun: a possible consequence',
                                             (epoch_us(ts_lo) - epoch_us(t0_hi)) / 1e6)
                                 ELSE printf('it has no time of its own and %s/%s, which can explain it, has one', w_domain, w_subdomain) END
           WHEN 'fewer_witnesses' THEN printf('%d independent witness(es) name its node, %d name the root''s', witnesses, w_witnesses)
           ELSE printf('score %.2f vs %.2f (class strength %.2f vs %.2f; extra sources and rules %d vs %d)', score, w_score,
                       strength, w_strength, sources + rules - 2, w_sources + w_rules - 2)
       END AS detail
FROM judged;
