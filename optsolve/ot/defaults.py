"""The default accuracy of optsolve ot: the one copy that the methods and the certificate take it from."""

TARGET_GAP = 1e-3  # auto, exact and tnt without --gamma or --reg: the certified relative gap they stop at
