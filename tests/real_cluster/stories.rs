//! The stories told once and run on both backends, the sandbox and a real kube-apiserver + etcd
//! (`Backend`; a story marked `only real` in `all_stories` runs on the second alone), one file
//! per group. They share `crate::world` and `crate::common`; what only a real control plane can
//! check lives beside this directory, in `tests/real_cluster/`.

pub mod attribution;
pub mod bounded;
pub mod deadline;
pub mod engine;
pub mod faults;
pub mod fleet;
pub mod freezes;
pub mod hostile;
pub mod incidents;
pub mod install;
pub mod level;
pub mod process;
pub mod windows;
pub mod workloads;
