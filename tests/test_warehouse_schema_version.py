"""The warehouse schema is applied only to a new file or one whose schema version differs (warehouse/store.py): a
load does no DDL on every connection."""
from firstfault.warehouse import store


def test_schema_applied_once_then_only_when_the_version_differs(tmp_path, monkeypatch):
    path = str(tmp_path / "w.duckdb")
    store.connect_writer(path).close()

    def no_ddl() -> str:
        raise AssertionError("schema DDL run on a warehouse already at this version")

    real_schema_sql = store.schema_sql
    version = store.schema_version()
    monkeypatch.setattr(store, "schema_sql", no_ddl)
    monkeypatch.setattr(store, "schema_version", lambda: version)
    con = store.connect_writer(path)
    assert con.execute("SELECT count(*) FROM xid_catalog").fetchall()[0][0] > 0
    con.execute("COMMENT ON TABLE runs IS 'firstfault schema older'")
    con.close()

    monkeypatch.setattr(store, "schema_sql", real_schema_sql)
    store.connect_writer(path).close()
    con = store.connect_reader(path)
    try:
        assert store._marked_version(con) == version
    finally:
        con.close()
