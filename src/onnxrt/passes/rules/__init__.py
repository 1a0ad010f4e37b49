"""The rewrite rules, one per file, each registered where it is defined
(``passes/registry.py``); the driver imports every module of this package."""
