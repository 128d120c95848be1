"""Cost model: predicted time, bottleneck attribution, speed-of-light bounds, calibration
and ranking metrics. It ranks and explains; it never rejects a schedule."""
