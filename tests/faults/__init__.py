"""Reliability, safety and bad input under real faults (issue 9); see README.md."""
