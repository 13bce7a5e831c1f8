//! # white-agent-adapter
//!
//! Runs one coding agent (a *white agent*) inside a trial container and serves it over A2A 1.0
//! (JSON-RPC, `a2a-protocol`): the agent card at `/.well-known/agent-card.json`, `SendMessage`
//! (with `returnImmediately`), `GetTask`, `CancelTask`, `ListTasks` on `POST /`.
//!
//! ## What a task does
//! 1. [`instruction::read_message`]: text parts are the instruction; a data part
//!    `{task_id, expected_outputs, constraints}` adds a short section; raw file parts are written
//!    into the workspace; `url` file parts (http/https, with `filename`) are downloaded into it
//!    before the run (at most `max_url_file_bytes` each; an external agent's inputs over the
//!    green agent's inline threshold come this way; a sandboxed adapter gets none).
//! 2. [`workspace::snapshot`] records the workspace; [`drivers::plan`] builds the command line,
//!    environment and generated configs; [`runner::run`] launches it through
//!    `sandbox::child::SupervisedChild` (own process group, stdin `/dev/null`) in the workspace.
//! 3. stdout goes line by line into the driver's [`parse::StreamParser`]; `GetTask` answers
//!    `WORKING` with "working for Ns; last tool call: ...; tokens so far: I in, O out; turns: T".
//! 4. At the end [`workspace::collect`] (off the async threads) finds created/changed files and
//!    the task becomes `COMPLETED`, `FAILED` (status message = reason: the CLI's terminal error,
//!    the exit code/signal with the stderr tail, or a stream without a final event) or
//!    `CANCELED` (`CancelTask` SIGKILLs the whole process tree).
//! 5. Artifacts (also on failure): one per returned file (raw part, `filename` = path relative to
//!    the workspace, `mediaType`; artifact metadata `{"kind":"file","change":"created"|"modified"}`),
//!    `answer` (text), `trajectory` (data, ATIF-v1.4 shape, [`trajectory`]) and `usage` (data,
//!    [`contract::UsageReport`]: `input_tokens`, `output_tokens`, `cache_read_tokens`,
//!    `cache_write_tokens`, `requests`, `cost_usd`, `duration_ms`). Task metadata `adapter` holds the exit code, signal, stderr tail,
//!    duration and the workspace report (`changed_files`, `returned_files`, `returned_bytes`,
//!    `served_files`, `served_bytes`, `skipped_count`, `skipped: [{path, size, reason}]`
//!    (first 200), `deleted`, `limits`).
//!    Files over the inline caps (default 10 MiB per file, 100 MiB total) are returned as a
//!    `url` part instead (`filename`, `mediaType`, metadata `size`; at most 1000 of them, each at
//!    most 2 GiB): `GET <origin>/files/<token>/<path>` on the adapter's own server streams the file
//!    from the workspace. The token is random per task; only listed files are served, anything
//!    else is 404. The origin is the `--public-url`'s, else the `Host` the client last used.
//!    Files over the count cap (1000 inline) or the URL cap are listed as skipped; the green
//!    agent copies a hosted agent's whole workspace out of its container anyway.
//!
//! One task runs at a time; a second `SendMessage` while one runs is refused
//! (`UnsupportedOperation`). Finished tasks stay readable.
//!
//! ## How the green agent launches it
//! Container: the task image, user uid 1000, working dir `/workspace` (the task workspace,
//! writable by uid 1000), on the trial's internal network (reaching only the model proxy).
//! Mounts (all read-only):
//! - the adapter binary at `/opt/platform/bin/white-agent-adapter`;
//! - for `claude-code` / `codex`: the staged CLI directory from [`staging::stage`] at
//!   `/opt/platform/agents/<driver>/` (`claude-code/claude`, `codex/codex` + its helper);
//!   for `aider` / `mini-swe-agent`: their staged Python package trees there (run with the
//!   container's `python3`, `PYTHONPATH` = the mount);
//!   for `opencode`: a directory holding `opencode` at `/opt/platform/agents/opencode/`;
//! - for `oracle` only: the task's reference solution at `/oracle/solution` (`solve.sh`).
//!
//! Main process: `/opt/platform/bin/white-agent-adapter --driver <driver> [flags] [-- command...]`
//! (flags also read from the environment; parsed and written by [`contract::LaunchArgs`], the
//! paths, port and driver names are in [`contract`]):
//!
//! | flag | env | default |
//! |---|---|---|
//! | `--port` | `A2A_PORT` | `8700` |
//! | `--host` | `A2A_HOST` | `0.0.0.0` |
//! | `--public-url` (URL written in the card) | `A2A_PUBLIC_URL` | `http://127.0.0.1:<port>/` |
//! | `--driver` | `ADAPTER_DRIVER` | required |
//! | `--workspace` | `ADAPTER_WORKSPACE` | `/workspace` |
//! | `--model` | `ADAPTER_MODEL` | CLI default (`opencode`: required) |
//! | `--max-turns` (claude-code) | `ADAPTER_MAX_TURNS` | none |
//! | `--agent-bin` | `ADAPTER_AGENT_BIN` | `/opt/platform/agents/<driver>/<binary>` |
//! | `--agents-dir` | `ADAPTER_AGENTS_DIR` | `/opt/platform/agents` |
//! | `--oracle-dir` | `ADAPTER_ORACLE_DIR` | `/oracle/solution` |
//! | `--state-dir` (agent HOME, configs; outside the workspace) | `ADAPTER_STATE_DIR` | `$HOME/.white-agent-adapter`, else `/tmp/white-agent-adapter` |
//! | `--max-file-bytes` / `--max-total-bytes` / `--max-files` | `ADAPTER_MAX_*` | 10 MiB / 100 MiB / 1000 |
//!
//! Environment per driver (the token is the proxy's per-trial dummy token, never a real key):
//! - `claude-code`: `ANTHROPIC_BASE_URL=http://<proxy>` (no `/v1`) and `ANTHROPIC_API_KEY`
//!   (or `ANTHROPIC_AUTH_TOKEN`) = trial token. Runs `claude -p --output-format stream-json
//!   --verbose --dangerously-skip-permissions [--model M] [--max-turns N] -- <instruction>` with
//!   `IS_SANDBOX=1`, `DISABLE_AUTOUPDATER=1`, `DISABLE_TELEMETRY=1`, `DISABLE_ERROR_REPORTING=1`,
//!   `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`, `HOME=<state>/home`.
//! - `codex`: `OPENAI_BASE_URL=http://<proxy>/v1`, `OPENAI_API_KEY` = trial token. Writes
//!   `<state>/codex-home/config.toml` (provider `platform`, `wire_api = "responses"`,
//!   `base_url` = the proxy, `env_key = "OPENAI_API_KEY"`, approvals never) and runs
//!   `codex exec --json --dangerously-bypass-approvals-and-sandbox --skip-git-repo-check
//!   --color never -C <workspace> [-m M] -- <instruction>` with `CODEX_HOME` set.
//! - `opencode`: `OPENAI_BASE_URL=http://<proxy>/v1`, `OPENAI_API_KEY`, `--model` required.
//!   Writes `<state>/opencode/opencode.json` (provider `platform` via
//!   `@ai-sdk/openai-compatible`, all permissions allowed, `autoupdate: false`, sharing off) and
//!   runs `opencode run --format json --dangerously-skip-permissions -m platform/<M> --
//!   <instruction>` with `OPENCODE_CONFIG`, `OPENCODE_DISABLE_AUTOUPDATE=1`,
//!   `OPENCODE_DISABLE_MODELS_FETCH=1`, `OPENCODE_DISABLE_LSP_DOWNLOAD=1`.
//!   (Not run end to end here: its binary is only on npm.)
//! - `aider`: `OPENAI_BASE_URL`, `OPENAI_API_KEY`, `--model` required. Runs `python3 -m aider
//!   --model openai/<M> --yes-always --no-git --no-pretty --no-stream ... --message
//!   <instruction>` (chat history in the state folder, `OPENAI_API_BASE` = the proxy); its text
//!   output gives the steps and usage, the exit code the verdict.
//! - `mini-swe-agent`: the same variables; runs `python3 -m minisweagent.run.mini -m
//!   openai/<M> -y --exit-immediately -l 0 -o <state>/mini-swe-agent/trajectory.json -t
//!   <instruction>`; the trajectory file (read after exit, at most 64 MiB) gives the steps,
//!   usage and verdict (`Submitted` completes).
//! - `command`: `-- <argv...>`; the instruction is in `$AGENT_INSTRUCTION` and the file
//!   `$AGENT_INSTRUCTION_FILE`; `$AGENT_WORKSPACE` names the workspace. Plain stdout: its tail
//!   is the answer; exit code 0 completes.
//! - `oracle`: runs `bash <oracle-dir>/solve.sh` in the workspace (`$ORACLE_DIR` set).
//! - `nop`: completes at once with no outputs.
//!
//! The adapter refuses to start (exit code 1, message on stderr) when the driver cannot run
//! (missing binary, token, URL, model or command, or no workspace). It prints
//! `listening on <addr>` on stdout once bound and logs (`RUST_LOG`) to stderr.

pub mod contract;
pub mod drivers;
pub mod fetch;
pub mod instruction;
pub mod parse;
pub mod runner;
pub mod server;
pub mod staging;
pub mod start;
pub mod trajectory;
pub mod workspace;
