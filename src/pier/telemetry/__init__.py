"""What an operator sees of pier: Prometheus metrics (metrics.py), OpenTelemetry
traces (tracing.py). Below every other layer, so that any may report."""
