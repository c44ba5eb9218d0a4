//! The embedded API server itself: as a real `kube::Client` sees it (in process and over HTTP),
//! the gaps to a real kube-apiserver it knows of, and the CRDs it serves.

mod crds;
mod gaps;
mod server;
