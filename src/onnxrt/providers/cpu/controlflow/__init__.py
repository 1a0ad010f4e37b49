"""Control flow on the CPU: If, Loop, Scan, SequenceMap (subgraphs run via SubgraphRunner)."""
