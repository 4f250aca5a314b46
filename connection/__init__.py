"""The connection to a cluster: how crdscope reaches an API server and reads what it answers.

kubeconfig resolution and credentials, the one shared ``httpx.AsyncClient`` per cluster and its
one-line errors, the HTTP/2 pinger, the shared CRD list+watch and its protobuf decoding, the
shared ``/metrics`` scrape and parser, discovery documents, Prometheus, and the count of what
crdscope itself sends.  Probes, the loader and the lab build on it; it knows none of them.
Plain asyncio + httpx: no textual, no rich.
"""
