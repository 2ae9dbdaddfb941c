-- 0007: tenants become first-class: quotas and limits move from config into the metadata database.
CREATE TABLE tenants (
    name         TEXT PRIMARY KEY,
    created_at   INTEGER NOT NULL,
    quota_bytes  INTEGER NOT NULL DEFAULT 10737418240,  -- 10 GiB; E4012 when exceeded
    max_queues   INTEGER NOT NULL DEFAULT 100,          -- E4013 when reached
    rps          REAL    NOT NULL DEFAULT 100,
    burst        REAL    NOT NULL DEFAULT 200
);

ALTER TABLE queues ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default' REFERENCES tenants(name);
CREATE INDEX queues_by_tenant ON queues (tenant);

INSERT INTO tenants (name, created_at) VALUES ('default', strftime('%s', 'now'));
