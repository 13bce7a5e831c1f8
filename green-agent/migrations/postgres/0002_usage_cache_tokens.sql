-- Prompt-cache token counts (the adapter's usage artifact and the model proxy report them).
ALTER TABLE usage ADD COLUMN cache_read_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage ADD COLUMN cache_write_tokens BIGINT NOT NULL DEFAULT 0;
