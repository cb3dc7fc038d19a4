"""MedCoG (Zhao et al., arXiv 2602.07905): the strategy (:mod:`.strategy`), its metacognitive monitor and
routing (:mod:`.monitor`), structured chain of thought (:mod:`.scot`), the case bank of past trajectories
(:mod:`.casebank`) and the threshold calibration (:mod:`.calibrate`)."""
