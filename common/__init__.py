"""The ground every app stands on: request bodies, domain errors, problem details, hand-written rows,
throttles. Imports Django, DRF and the standard library, never an app."""
