"""Applications built on the mtlinv library: the `mtlinv` command (cli), its invariance audit (`mtlinv check`),
the first-run report (`mtlinv doctor`) and the speculative-decoding demo. The library (`import mtlinv`) never
imports this package; these modules import the library and `mtlinv.model` like any other user."""
