"""The console's widgets: the summary bar and the jobs, workers and dead letter tables."""
