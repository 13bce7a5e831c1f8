-- The judge's accepted verdicts (the PostgreSQL twin of the SQLite migration of the same
-- version): `cache_key` is a SHA-256 of (API, model, prompt, scale), no secret, no URL;
-- `verdict` is the rubrics::judge::Verdict as JSON (the exact score is in it).
CREATE TABLE judge_verdicts (
    run_id      TEXT COLLATE "C" NOT NULL,
    cache_key   TEXT COLLATE "C" NOT NULL,
    model       TEXT NOT NULL,
    score       DOUBLE PRECISION NOT NULL,
    verdict     TEXT NOT NULL,
    created_at  TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (run_id, cache_key)
);
