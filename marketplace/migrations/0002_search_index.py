"""The hub's full-text indexes, one per database (see marketplace/hub/search.py for why).

PostgreSQL: stored generated tsvector columns over the segmented text and the facet tokens, each with a GIN
index; they follow every write by themselves. SQLite: an FTS5 table keyed by the item id, filled by the services
(``search.sync``). Django's models do not declare these columns: only the search module reads them.
"""

from django.db import migrations

POSTGRES_FORWARD = [
    "ALTER TABLE marketplace_hubitem ADD COLUMN search_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, search_text)) STORED",
    "ALTER TABLE marketplace_hubitem ADD COLUMN facet_vector tsvector "
    "GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, facet_text)) STORED",
    "CREATE INDEX hub_item_search_gin ON marketplace_hubitem USING GIN (search_vector)",
    "CREATE INDEX hub_item_facet_gin ON marketplace_hubitem USING GIN (facet_vector)",
]
POSTGRES_BACKWARD = [
    "ALTER TABLE marketplace_hubitem DROP COLUMN search_vector",
    "ALTER TABLE marketplace_hubitem DROP COLUMN facet_vector",
]
# detail=column: no positions are stored (we never ask for phrases), which halves the index; column filters and
# prefix queries still work. prefix='2 3' keeps short prefix queries (``qw``, ``chat``) off a full term scan.
SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE marketplace_hubitem_fts USING fts5("
    "search_text, facet_text, tokenize='unicode61', prefix='2 3', detail=column)",
    "INSERT INTO marketplace_hubitem_fts(rowid, search_text, facet_text) "
    "SELECT id, search_text, facet_text FROM marketplace_hubitem",
]
SQLITE_BACKWARD = ["DROP TABLE IF EXISTS marketplace_hubitem_fts"]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for statement in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(statement)

    return run


class Migration(migrations.Migration):
    dependencies = [("marketplace", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": POSTGRES_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": POSTGRES_BACKWARD, "sqlite": SQLITE_BACKWARD}),
        ),
    ]
