"""The peer the bench compares with: LangGraph's ``interrupt()`` and ``Command(resume=...)`` on its
PostgreSQL checkpointer (PostgresSaver), in process (graph.py) and behind FastAPI (server.py).

It runs only in its own virtualenv, bench/peer/.venv, made by ``bench/peer/setup`` from the pinned
requirements.txt; the service's own virtualenv never installs LangGraph.
"""
