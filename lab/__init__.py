"""A local, real control plane (etcd + kube-apiserver) for demos, tests and benchmarks."""
