"""Fill msgstr entries of locale/zh_Hans from a Python dict file (msgid -> translation).

Usage: .venv/bin/python scripts/fill_translations.py TRANSLATIONS.py
Only empty or fuzzy entries are filled; existing translations are kept. Prints the msgids still missing.
"""

import runpy
import sys

import polib

po_path = "locale/zh_Hans/LC_MESSAGES/django.po"
table = runpy.run_path(sys.argv[1])["T"]
po = polib.pofile(po_path)
for entry in po:
    if entry.msgid in table and (not entry.msgstr or entry.fuzzy):
        entry.msgstr = table[entry.msgid]
        if entry.fuzzy:
            entry.flags.remove("fuzzy")
po.save()
missing = [e.msgid for e in po if not e.msgstr and not e.msgid_plural]
print(f"{len(missing)} untranslated")
for msgid in missing:
    print(repr(msgid))
