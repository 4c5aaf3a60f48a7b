"""The default accuracy of optsolve ot's methods (the certificate keeps its own copy, tested equal)."""

TARGET_GAP = 1e-3  # auto, exact and tnt without --gamma or --reg: the certified relative gap they stop at
