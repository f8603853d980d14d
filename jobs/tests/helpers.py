"""Reading a job (or a launch waiting for a card) back as the tests see it: fresh from the database."""


def fresh(row):
    return type(row).objects.get(pk=row.pk)
