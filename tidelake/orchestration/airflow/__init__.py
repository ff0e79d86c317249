"""The only modules of the package that import Airflow: operators, timetables, the plugin's app.

Everything they decide lives in the Airflow-free modules one folder up, tested without Airflow.
"""
