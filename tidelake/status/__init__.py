"""Status: where each replica stands and how far it lags, the read model of `tidelake status`."""
