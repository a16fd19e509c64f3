def test_head_revision_read_from_files_matches_alembic():
    from alembic.script import ScriptDirectory

    from pier.db.engine import alembic_config, head_revision

    assert head_revision() == ScriptDirectory.from_config(alembic_config()).get_current_head()
