//! The CustomResourceDefinitions of every kind capdeck knows, as `capdeck crds` prints them and
//! as they are checked in under `assets/crds/` (a test fails when the two drift apart).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use super::cap::{
    CAPApplication, CAPApplicationVersion, CAPTenant, CAPTenantOperation, CAPTenantOutput, ClusterDomain, Domain,
};
use super::freeze::Freeze;
use super::rotation_batch::RotationBatch;

/// Every CRD, upstream kinds first, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        CAPApplication::crd(),
        CAPApplicationVersion::crd(),
        CAPTenant::crd(),
        CAPTenantOperation::crd(),
        CAPTenantOutput::crd(),
        Domain::crd(),
        ClusterDomain::crd(),
        RotationBatch::crd(),
        Freeze::crd(),
    ]
}

/// The file name under `assets/crds/`, as controller-gen names them: `<group>_<plural>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// One CRD as YAML.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, serde_saphyr::ser::Error> {
    serde_saphyr::to_string(crd)
}

/// capdeck's own group (RotationBatch, Freeze); every other CRD here is the CAP Operator's.
pub const CAPDECK_GROUP: &str = "capdeck.dev";

/// All CRDs as one multi-document YAML stream.
pub fn all_yaml() -> Result<String, serde_saphyr::ser::Error> {
    to_yaml_stream(&all())
}

/// `crds` as one multi-document YAML stream.
pub fn to_yaml_stream(crds: &[CustomResourceDefinition]) -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for crd in crds {
        out.push_str("---\n");
        out.push_str(&to_yaml(crd)?);
    }
    Ok(out)
}
