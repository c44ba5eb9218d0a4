// Pins sap-btp-service-operator so the tests can take its ServiceBinding CRD
// (config/crd/bases/services.cloud.sap.com_servicebindings.yaml) from the module itself.
// Nothing is built from it; crd.sh only downloads the module into GOMODCACHE.
module capdeck.local/tools/servicebinding-crd

go 1.26.0

require github.com/SAP/sap-btp-service-operator v0.9.0
