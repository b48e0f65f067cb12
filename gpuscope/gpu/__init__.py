"""The GPU side of a run: who ran when on each GPU (:mod:`.sharing`) and whether MPS is on (:mod:`.mps`)."""
