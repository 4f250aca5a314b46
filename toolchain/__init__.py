"""The tools crdscope builds from Go modules: where they are cached, how they are built.

Below the lab and the loader, which both use them (the lab runs kube-apiserver, etcd and
Crossplane's core; the loader packages providers with Crossplane's CLI and pulls with crane),
so neither imports the other.
"""
