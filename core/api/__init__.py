"""The API's shared pieces: the error handler, parsers, pagination and the schema hook."""
