-- The judge's accepted verdicts (never failures), so that `resume` and re-grading never ask a
-- judge the same question twice. `cache_key` is a SHA-256 of (API, model, prompt, scale): no
-- secret, no URL. `verdict` is the rubrics::judge::Verdict as JSON.
CREATE TABLE judge_verdicts (
    run_id      TEXT NOT NULL,
    cache_key   TEXT NOT NULL,
    model       TEXT NOT NULL,
    score       REAL NOT NULL,
    verdict     TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    PRIMARY KEY (run_id, cache_key)
);
