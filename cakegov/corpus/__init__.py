"""Corpus loading: workloads, labelled schedules."""
