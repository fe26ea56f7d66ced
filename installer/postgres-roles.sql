-- The plant's results database on PostgreSQL: three roles, least rights each (docs/pages/plant-it/install.md, Databases).
--   inspector_owner   owns the tables; only `inspector db upgrade` logs in as it (a deploy step)
--   inspector_writer  the line boxes (kiosks): read and write results, reviews, dead letters; prune; no DDL
--   inspector_reader  dashboards, Grafana, reports: SELECT only
-- Run once as a superuser on the database, e.g.
--   sudo -u postgres psql -d inspection -v ON_ERROR_STOP=1 -f postgres-roles.sql
-- then give each role a password (\password inspector_writer) and each box its URL in kiosk.env.
-- Tables made later by `db upgrade` get the same grants (ALTER DEFAULT PRIVILEGES). The roles are the
-- cluster's: for a second database on the same server, run only the lines from GRANT on.
CREATE ROLE inspector_owner LOGIN;
CREATE ROLE inspector_writer LOGIN;
CREATE ROLE inspector_reader LOGIN;
DO $$ BEGIN
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO inspector_owner, inspector_writer, inspector_reader',
                   current_database());
END $$;
GRANT USAGE, CREATE ON SCHEMA public TO inspector_owner;
GRANT USAGE ON SCHEMA public TO inspector_writer, inspector_reader;
ALTER DEFAULT PRIVILEGES FOR ROLE inspector_owner IN SCHEMA public
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO inspector_writer;
ALTER DEFAULT PRIVILEGES FOR ROLE inspector_owner IN SCHEMA public
    GRANT USAGE, SELECT ON SEQUENCES TO inspector_writer;
ALTER DEFAULT PRIVILEGES FOR ROLE inspector_owner IN SCHEMA public
    GRANT SELECT ON TABLES TO inspector_reader;
-- The audit trail (audit_events) is append-only for inspector_writer: `inspector db upgrade` (revision 0007)
-- takes UPDATE, DELETE and TRUNCATE on it from that role; only the owner could edit it, and `inspector audit
-- verify` would show where.
