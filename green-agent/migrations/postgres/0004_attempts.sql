-- The attempts of each trial, across processes: how each started (fresh, or reattached to the
-- agent a dead process left running), where its agent is, and how it ended. A resumed run reads
-- the open ones (no `ended_at`) to reattach instead of starting the agent again.
CREATE TABLE attempts (
    run_id        TEXT COLLATE "C" NOT NULL,
    trial_id      TEXT COLLATE "C" NOT NULL,
    -- 1, 2, ... over the trial's whole history
    attempt       BIGINT NOT NULL,
    -- fresh | reattached
    kind          TEXT NOT NULL,
    started_at    TEXT NOT NULL,
    -- the process that ran it
    pid           BIGINT NOT NULL,
    -- the hosted agent's container id (NULL for an external agent)
    container     TEXT,
    -- the external agent's URL (NULL for a hosted one)
    agent_url     TEXT,
    -- the per-trial dummy token of the model proxy (never a provider key) and the proxy's port,
    -- so a resumed run re-registers the token the agent holds on the port it was told
    proxy_token   TEXT,
    proxy_port    BIGINT,
    -- the A2A task id, written as soon as the agent accepted the task
    a2a_task_id   TEXT,
    -- how the agent ended (JSON: outcome, exit code, flags, error, the final A2A task), written
    -- before collection: a resumed run collects from the agent's container without driving it
    driven        TEXT,
    -- what collection produced (JSON: the agent's outcome, artifacts, usage, the staged output
    -- files by digest), written before grading: a resumed run grades it without the agent
    collected     TEXT,
    ended_at      TEXT,
    -- finished | infra_error | incompatible | agent_gone (reattachment impossible: started over)
    -- | abandoned (its process died; reattached or started over by the next attempt)
    ended         TEXT,
    detail        TEXT,
    PRIMARY KEY (run_id, trial_id, attempt)
);
