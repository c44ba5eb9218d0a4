//! Detection: which binding Secrets rotated since the last pass, and (at start-up or on
//! becoming leader) which opted-in applications have Deployments out of date anyway.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use super::{AppKey, Reconciler, SeenSecret, batch_key};
use crate::api::rotation_batch::RotatedSecret;
use crate::plan::{CapIndex, Rotated, plan_application, secret_data};
use crate::vcap::data_hash;

impl Reconciler {
    /// Compare every referenced binding Secret with its last known data hash and uid. A change
    /// of data, or a Secret deleted and re-created, is a rotation for every opted-in
    /// application that references it. Metadata-only changes and re-lists are not.
    pub(super) fn detect(&mut self, now: Timestamp) {
        let mut referencing: BTreeMap<AppKey, Vec<(AppKey, String)>> = BTreeMap::new();
        for app in self.stores.applications.state() {
            let namespace = app.namespace().unwrap_or_default();
            let key = (namespace.clone(), app.name_any());
            let generation = app.metadata.generation.unwrap_or(0);
            let opted = app.rollout_opted_in();
            match self.apps_known.insert(key.clone(), (generation, opted)) {
                // A changed spec or a new opt-in: re-check this application like at start-up.
                Some(previous) if previous != (generation, opted) && opted => {
                    self.recheck.insert(key.clone());
                }
                _ => {}
            }
            for service in &app.spec.btp.services {
                let referenced = referencing.entry((namespace.clone(), service.secret.clone())).or_default();
                if opted {
                    referenced.push((key.clone(), service.name.clone()));
                }
            }
        }
        for (secret_key, apps) in referencing {
            let Some(secret) = self.stores.binding_secrets.get(&ObjectRef::new(&secret_key.1).within(&secret_key.0))
            else {
                continue;
            };
            // sap-btp-service-operator's copy of old credentials: its changes are never a
            // rotation of what the application should run on (`capdeck credentials` says so).
            if secret.labels().contains_key(crate::api::service_binding::LABEL_STALE) {
                continue;
            }
            let current = SeenSecret {
                uid: secret.metadata.uid.clone().unwrap_or_default(),
                hash: data_hash(&secret_data(&secret)),
            };
            let previous = self.seen.insert(secret_key.clone(), current.clone());
            if !previous.is_some_and(|previous| previous != current) {
                continue;
            }
            self.metrics.rotations.inc();
            tracing::info!(namespace = %secret_key.0, secret = %secret_key.1, "binding secret rotated");
            let mut services_by_app: BTreeMap<AppKey, Vec<String>> = BTreeMap::new();
            for (app, service) in apps {
                services_by_app.entry(app).or_default().push(service);
            }
            for (app, services) in services_by_app {
                self.pending.entry(app).or_default().insert(
                    secret_key.1.clone(),
                    RotatedSecret {
                        name: secret_key.1.clone(),
                        service: services.join(","),
                        rotated_at: Time(now),
                        data_hash: current.hash.clone(),
                    },
                );
            }
        }
    }

    /// Queue every opted-in application for a re-check (start-up, new leader).
    pub(super) fn queue_recheck_all(&mut self, index: &CapIndex) {
        let apps = index
            .applications()
            .iter()
            .filter(|app| app.rollout_opted_in())
            .map(|app| (app.namespace().unwrap_or_default(), app.name_any()));
        self.recheck.extend(apps);
    }

    /// The start-up re-check of one application: open a batch only if some Deployment really
    /// differs (and no batch is open for it already).
    pub(super) fn recheck_application(&mut self, key: &AppKey, index: &CapIndex, now: Timestamp) {
        let Some(app) = self.application(&key.0, &key.1) else { return };
        if !app.rollout_opted_in()
            || self.open_batches().iter().any(|b| batch_key(b).0 == key.0 && b.spec.application == key.1)
        {
            return;
        }
        let plan = plan_application(&app, &Rotated::All, index, &self.stores);
        let services: BTreeSet<&str> = plan.restarts().flat_map(|d| d.services.iter().map(String::as_str)).collect();
        if services.is_empty() {
            return;
        }
        tracing::info!(namespace = %key.0, application = %key.1, deployments = plan.restarts().count(), "re-check found Deployments out of date");
        self.found_by_recheck.insert(key.clone());
        for service in app.spec.btp.services.iter().filter(|s| services.contains(s.name.as_str())) {
            let hash = self
                .stores
                .binding_secrets
                .get(&ObjectRef::new(&service.secret).within(&key.0))
                .map(|secret| data_hash(&secret_data(&secret)))
                .unwrap_or_default();
            self.pending.entry(key.clone()).or_default().entry(service.secret.clone()).or_insert(RotatedSecret {
                name: service.secret.clone(),
                service: service.name.clone(),
                rotated_at: Time(now),
                data_hash: hash,
            });
        }
    }
}
