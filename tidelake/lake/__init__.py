"""The lake's contracts every stage shares: where tidelake's own Delta tables live and what their
columns are, the control tables (watermarks, DDL history, table starts) read in the order that keeps
them consistent, replica checkpoints and the replica catalog. Read and written with delta-rs only.
Owner: each module here names the stage that writes its table; lake/ imports no stage.
"""
