"""The console's screens: job detail, forms, confirmation and help."""
