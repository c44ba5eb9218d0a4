#!/usr/bin/env bash
# A real kube-apiserver + etcd on loopback for trying capdeck by hand (the tests start their own):
#
#   eval "$(bash tools/envtest/up.sh /tmp/capdeck-cluster)"   # prints export KUBECONFIG=...
#   capdeck crds | kubectl apply --server-side -f - ...
#   bash tools/envtest/up.sh /tmp/capdeck-cluster stop
#
# RBAC is on. The kubeconfig's user `admin` is in system:masters; the token users alice, dave and
# erin have no rights until you bind some. Binaries come from tools/envtest/build.sh (or
# $KUBEBUILDER_ASSETS). Needs openssl and curl.
#
# The workload plane comes up beside it when its binaries are there (tools/envtest/build.sh builds
# them): kube-controller-manager (deployment, replicaset, garbage-collector, job, namespace and
# node-lifecycle controllers), kube-scheduler, and kwok playing the kubelets of
# $CAPDECK_ENVTEST_NODES fake Nodes (default 2, `kwok-node-N`) with tools/envtest/kwok/stages.yaml, so
# Deployments really roll and Jobs complete. CAPDECK_ENVTEST_WORKLOADS=0 leaves it out. Pods on a
# Node named `*-crash-loop` crash-loop, on `*-never-ready` never become ready (docs/TESTING.md,
# "By hand", has the Node to add and how to pin Pods to it).
#
# `stop` leaves DIR (etcd's data included): remove it before starting afresh.
#
# For tools (tools/bench-peers): $CAPDECK_ENVTEST_ADMINS names more token users, each in
# system:masters with the token capdeck-envtest-token-<name>; $CAPDECK_ENVTEST_APISERVER_ARGS is
# appended to kube-apiserver's arguments (split on spaces; paths must not hold any).
set -euo pipefail

dir="${1:?usage: up.sh DIR [stop]}"
if [[ "${2:-}" == "stop" ]]; then
  for pid in "$dir"/*.pid; do [[ -f "$pid" ]] && kill "$(cat "$pid")" 2>/dev/null || true; done
  echo "stopped" >&2
  exit 0
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
assets="${KUBEBUILDER_ASSETS:-$(bash "$here/build.sh" | tail -1)}"
mkdir -p "$dir/certs"
cd "$dir"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
etcd_port=$(free_port); peer_port=$(free_port); port=$(free_port)

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 -subj /CN=capdeck-envtest-ca \
  -keyout certs/ca.key -out certs/ca.crt 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=kube-apiserver \
  -keyout certs/apiserver.key -out certs/apiserver.csr 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' > certs/san.ext
openssl x509 -req -in certs/apiserver.csr -CA certs/ca.crt -CAkey certs/ca.key -CAcreateserial -days 7 \
  -extfile certs/san.ext -out certs/apiserver.crt 2>/dev/null
openssl ecparam -name prime256v1 -genkey -noout -out certs/sa.key
openssl ec -in certs/sa.key -pubout -out certs/sa.pub 2>/dev/null
admin_token=$(openssl rand -hex 16)
{
  echo "$admin_token,admin,uid-admin,\"system:masters\""
  for user in alice dave erin; do echo "capdeck-envtest-token-$user,$user,uid-$user"; done
  for user in ${CAPDECK_ENVTEST_ADMINS:-} kube-controller-manager kube-scheduler kwok; do
    echo "capdeck-envtest-token-$user,$user,uid-$user,\"system:masters\""
  done
} > certs/tokens.csv

"$assets/etcd" --data-dir="$dir/etcd" --listen-client-urls="http://127.0.0.1:$etcd_port" \
  --advertise-client-urls="http://127.0.0.1:$etcd_port" --listen-peer-urls="http://127.0.0.1:$peer_port" \
  --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" --initial-cluster="default=http://127.0.0.1:$peer_port" \
  --unsafe-no-fsync=true --log-level=warn >etcd.log 2>&1 &
echo $! > etcd.pid
"$assets/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" --cert-dir="$dir/certs" \
  --tls-cert-file=certs/apiserver.crt --tls-private-key-file=certs/apiserver.key \
  --secure-port="$port" --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --endpoint-reconciler-type=none \
  --service-cluster-ip-range=10.0.0.0/24 --allow-privileged=true --disable-admission-plugins=ServiceAccount \
  --authorization-mode=RBAC --service-account-issuer="https://127.0.0.1:$port/" \
  --service-account-key-file=certs/sa.pub --service-account-signing-key-file=certs/sa.key \
  --client-ca-file=certs/ca.crt --token-auth-file=certs/tokens.csv ${CAPDECK_ENVTEST_APISERVER_ARGS:-} \
  >kube-apiserver.log 2>&1 &
echo $! > kube-apiserver.pid

ca=$(base64 -w0 < certs/ca.crt)
cat > kubeconfig <<EOF
apiVersion: v1
kind: Config
clusters:
- name: envtest
  cluster: {server: "https://127.0.0.1:$port", certificate-authority-data: $ca}
contexts:
- name: envtest
  context: {cluster: envtest, user: admin, namespace: default}
current-context: envtest
users:
- name: admin
  user: {token: $admin_token}
EOF
ready=""
for _ in $(seq 120); do
  if curl -sf --cacert certs/ca.crt -H "Authorization: Bearer $admin_token" "https://127.0.0.1:$port/readyz" >/dev/null; then
    ready=1
    break
  fi
  sleep 0.5
done
if [[ -z "$ready" ]]; then
  echo "kube-apiserver did not become ready; see $dir/kube-apiserver.log" >&2
  exit 1
fi
echo "kube-apiserver ready at https://127.0.0.1:$port (logs in $dir)" >&2

# The workload plane, each program as a token user of its own.
workloads="${CAPDECK_ENVTEST_WORKLOADS:-1}"
if [[ "$workloads" != "0" ]]; then
  for b in kube-controller-manager kube-scheduler kwok; do
    if [[ ! -x "$assets/$b" ]]; then
      echo "no $b in $assets: run tools/envtest/build.sh, or set CAPDECK_ENVTEST_WORKLOADS=0" >&2
      exit 1
    fi
    sed -e "s/user: admin/user: $b/" -e "s/name: admin/name: $b/" -e "s/token: $admin_token/token: capdeck-envtest-token-$b/" \
      kubeconfig > "kubeconfig-$b"
  done
  "$assets/kube-controller-manager" --kubeconfig=kubeconfig-kube-controller-manager --leader-elect=false \
    --controllers=deployment-controller,replicaset-controller,garbage-collector-controller,job-controller,namespace-controller,node-lifecycle-controller \
    --secure-port=0 --cert-dir="$dir/kcm-certs" --kube-api-qps=200 --kube-api-burst=400 \
    --concurrent-deployment-syncs=10 --concurrent-replicaset-syncs=10 --v=1 >kube-controller-manager.log 2>&1 &
  echo $! > kube-controller-manager.pid
  "$assets/kube-scheduler" --kubeconfig=kubeconfig-kube-scheduler --leader-elect=false --secure-port=0 \
    --kube-api-qps=200 --kube-api-burst=400 --v=1 >kube-scheduler.log 2>&1 &
  echo $! > kube-scheduler.pid
  "$assets/kwok" --kubeconfig=kubeconfig-kwok --config="$here/kwok/stages.yaml" \
    --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake --node-lease-duration-seconds=40 \
    --cidr=10.128.0.0/9 >kwok.log 2>&1 &
  echo $! > kwok.pid
  # The names first: a loop on the left of a pipe runs in a subshell, and its list would be lost.
  nodes=()
  for n in $(seq 0 $(( ${CAPDECK_ENVTEST_NODES:-2} - 1 ))); do nodes+=("kwok-node-$n"); done
  for name in "${nodes[@]}"; do
    printf '{"apiVersion":"v1","kind":"Node","metadata":{"name":"%s","annotations":{"kwok.x-k8s.io/node":"fake"},"labels":{"kubernetes.io/hostname":"%s","type":"kwok"}}}\n---\n' "$name" "$name"
  done | "$assets/kubectl" --kubeconfig=kubeconfig apply --server-side -f - >/dev/null
  for name in "${nodes[@]}"; do
    schedulable=""
    for _ in $(seq 180); do
      state=$("$assets/kubectl" --kubeconfig=kubeconfig get node "$name" \
        -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}/{.spec.taints}' 2>/dev/null || true)
      if [[ "$state" == "True/" ]]; then schedulable=1; break; fi
      sleep 0.5
    done
    if [[ -z "$schedulable" ]]; then
      echo "node $name not Ready and untainted after 90 s; see $dir/kwok.log and $dir/kube-controller-manager.log" >&2
      exit 1
    fi
  done
  echo "workload plane ready: ${#nodes[@]} kwok Nodes (logs in $dir)" >&2
fi
echo "export KUBECONFIG=$dir/kubeconfig"
