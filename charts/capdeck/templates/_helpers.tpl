{{/* The chart's name, cut to the 63 characters a label value allows. */}}
{{- define "capdeck.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Names of the release's objects: the release name, with "capdeck" in it once. */}}
{{- define "capdeck.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "capdeck.selectorLabels" -}}
app.kubernetes.io/name: {{ include "capdeck.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "capdeck.labels" -}}
{{ include "capdeck.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "capdeck.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "capdeck.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository:tag, or repository@digest when a digest is given. */}}
{{- define "capdeck.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/* The daemon's arguments: every engine flag from values (docs: the chart's README). */}}
{{- define "capdeck.args" -}}
- --daemon
- --health-addr=0.0.0.0:{{ .Values.metrics.port }}
{{- if .Values.engine.namespace }}
- {{ printf "--namespace=%v" .Values.engine.namespace | quote }}
{{- else }}
- --all-namespaces
{{- end }}
- {{ printf "--rollout-delay=%v" .Values.engine.rolloutDelay | quote }}
- {{ printf "--approval=%v" .Values.engine.approval | quote }}
- {{ printf "--max-parallel-rollouts=%d" (int (required "engine.maxParallelRollouts is required (at least 1)" .Values.engine.maxParallelRollouts)) | quote }}
- {{ printf "--min-rollout-interval=%v" .Values.engine.minRolloutInterval | quote }}
{{- /* A float from a values file prints as 1e+06 with %v: the rate as a decimal, the burst as an integer. */}}
{{- if kindIs "invalid" .Values.engine.writeQps }}
{{- fail "engine.writeQps is required: writes per second, or 0 for no limit" }}
{{- end }}
- {{ printf "--write-qps=%s" (.Values.engine.writeQps | toString) | quote }}
- {{ printf "--write-burst=%d" (int (required "engine.writeBurst is required (at least 1)" .Values.engine.writeBurst)) | quote }}
- {{ printf "--expected-rollout=%v" .Values.engine.expectedRollout | quote }}
- {{ printf "--halt-on-failure=%v" .Values.engine.haltOnFailure | quote }}
- {{ printf "--readiness-timeout=%v" .Values.engine.readinessTimeout | quote }}
- {{ printf "--engine=%v" .Values.engine.mode | quote }}
- {{ printf "--lease-name=%v" (default (printf "%s-engine" (include "capdeck.fullname" .)) .Values.engine.leaseName) | quote }}
- {{ printf "--on-deadline=%v" .Values.engine.onDeadline | quote }}
{{- if .Values.engine.changeWindows }}
{{- /* Days, times and the shape as the binary reads them (zones only by their shape; the binary checks
       them): a typo fails the install, not the Pod. Never stricter than `capdeck windows`. */}}
{{- $day := "(?i:mon(day)?|tue(sday)?|wed(nesday)?|thu(rsday)?|fri(day)?|sat(urday)?|sun(day)?)" }}
{{- $days := printf "%s(-%s)?(,%s(-%s)?)*" $day $day $day $day }}
{{- $start := "([01][0-9]|2[0-3]):[0-5][0-9]" }}
{{- $end := printf "(%s|24:00)" $start }}
{{- /* Whitespace as Rust's split_whitespace sees it (Go's \s is ASCII only): a no-break space
       pasted from a wiki must not fail the chart where the binary accepts it. */}}
{{- $ws := "[\\s\\v\\x{85}\\p{Z}]" }}
{{- $range := printf "%s*%s%s+%s-%s%s+[A-Za-z][A-Za-z0-9_+/-]*%s*" $ws $days $ws $start $end $ws $ws }}
{{- $segment := printf "(%s*|%s)" $ws $range }}
{{- if not (regexMatch (printf "^%s(;%s)*$" $segment $segment) (toString .Values.engine.changeWindows)) }}
{{- fail (printf "engine.changeWindows %q is not 'DAYS HH:MM-HH:MM ZONE' ranges separated by ';' (e.g. 'Mon-Fri 22:00-05:00 Europe/Berlin'): check it with capdeck windows '...' (docs/WINDOWS.md)" (toString .Values.engine.changeWindows)) }}
{{- end }}
- {{ printf "--change-windows=%v" .Values.engine.changeWindows | quote }}
{{- end }}
{{- if .Values.clusterName }}
- {{ printf "--cluster-name=%v" .Values.clusterName | quote }}
{{- end }}
{{- $receivers := dict }}
{{- range .Values.notify }}
{{- if and (has .type (list "pagerduty" "opsgenie")) (or (not $.Values.clusterName) (eq (toString $.Values.clusterName) "in-cluster")) }}
{{- fail (printf "notify %s/%s is a %s receiver: set clusterName, to another name than in-cluster (its incident keys carry the cluster's name, and every cluster without one is called in-cluster)" (default $.Release.Namespace .namespace) .name .type) }}
{{- end }}
{{- /* The daemon refuses two receivers of one name (a name given twice, or one Secret's key twice): fail here, not in a crash-looping Pod. */}}
{{- $called := .receiver | default (printf "%s/%s:%s" (default $.Release.Namespace .namespace) .name .key) }}
{{- if hasKey $receivers $called }}
{{- fail (printf "notify has two receivers called %s: give each its own receiver name, and list each Secret key once" $called) }}
{{- end }}
{{- $_ := set $receivers $called true }}
{{- $prefix := printf "%s%s" (ternary (printf "%s@" .receiver) "" (not (empty .receiver))) (ternary (printf "%s=" .type) "" (not (empty .type))) }}
- {{ printf "--notify-secret=%s%s/%s:%s" $prefix (default $.Release.Namespace .namespace) .name .key | quote }}
{{- end }}
{{- with .Values.notifySigning }}
{{- if .name }}
- {{ printf "--notify-signing-secret=%s/%s:%s" (default $.Release.Namespace .namespace) .name .key | quote }}
{{- end }}
{{- end }}
{{- end -}}
