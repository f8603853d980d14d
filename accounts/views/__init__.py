"""The console app's pages, one module per part of it."""
