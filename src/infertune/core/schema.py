"""The version of the JSON shapes infertune prints (`--format json`), returns (Python API) and serves (MCP):
one version for all of them. Every output model carries it; the published JSON Schemas are generated from
those models by `python -m infertune.cli.schema` (at the top of the house: it imports every output model).
"""

SCHEMA_VERSION = "1"  # bump when a field changes meaning or disappears; adding fields keeps it
