{{- define "posture.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "posture.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The ServiceAccount the manager runs as: the chart's, or one the user manages. */}}
{{- define "posture.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ .Values.serviceAccount.name | default (include "posture.fullname" .) }}
{{- else -}}
{{ required "serviceAccount.name is required when serviceAccount.create=false" .Values.serviceAccount.name }}
{{- end -}}
{{- end -}}

{{/* The PVC holding the SQLite file. */}}
{{- define "posture.sqliteClaim" -}}
{{ .Values.persistence.existingClaim | default (printf "%s-data" (include "posture.fullname" .)) }}
{{- end -}}

{{- define "posture.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{/* An image reference from {registry, repository, tag, digest}; a digest pins it. */}}
{{- define "posture.imageRef" -}}
{{- $img := .image -}}
{{- with $img.registry }}{{ . | trimSuffix "/" }}/{{ end -}}
{{- $img.repository -}}
{{- if $img.digest }}@{{ $img.digest }}{{ else }}:{{ $img.tag | default .root.Chart.AppVersion }}{{ end -}}
{{- end -}}

{{- define "posture.image" -}}
{{ include "posture.imageRef" (dict "image" .Values.image "root" .) }}
{{- end -}}

{{- define "posture.mcpImage" -}}
{{ include "posture.imageRef" (dict "image" .Values.mcpServerImage "root" .) }}
{{- end -}}

{{/* The settings of one kind of pod the manager creates (a section of pods.yaml). */}}
{{- define "posture.podSettings" -}}
{{- $v := .values -}}
{{- $root := .root -}}
{{- $out := dict "image" .image "imagePullPolicy" .pullPolicy -}}
{{- with $root.Values.imagePullSecrets }}{{ $_ := set $out "imagePullSecrets" . }}{{ end -}}
{{- with ($v.nodeSelector | default $root.Values.nodeSelector) }}{{ $_ := set $out "nodeSelector" . }}{{ end -}}
{{- with ($v.tolerations | default $root.Values.tolerations) }}{{ $_ := set $out "tolerations" . }}{{ end -}}
{{- with ($v.priorityClassName | default $root.Values.priorityClassName) }}{{ $_ := set $out "priorityClassName" . }}{{ end -}}
{{- range $k := list "affinity" "topologySpreadConstraints" "resources" "podLabels" "podAnnotations" -}}
{{- with (get $v $k) }}{{ $_ := set $out $k . }}{{ end -}}
{{- end -}}
{{- if .worker -}}
{{- /* A CA bundle or proxy the manager needs to reach the database, workers need too. */ -}}
{{- range $k := list "extraEnv" "extraVolumes" "extraVolumeMounts" -}}
{{- with ((get $v $k) | default (get $root.Values $k)) }}{{ $_ := set $out $k . }}{{ end -}}
{{- end -}}
{{- end -}}
{{ toYaml $out }}
{{- end -}}

{{/* The ClusterRole the manager binds in tenant namespaces, never cluster-wide. */}}
{{- define "posture.tenantAccessRole" -}}
{{ include "posture.fullname" . }}-tenant-access
{{- end -}}

{{/* The generated RBAC (files/role.yaml is copied from config/rbac by make manifests).
     The one ClusterRole the manager may bind is renamed to this release's. */}}
{{- define "posture.generatedRules" -}}
{{- $kind := .kind -}}
{{- $root := .root -}}
{{- range ($root.Files.Get "files/role.yaml" | splitList "\n---\n") -}}
{{- $doc := fromYaml . -}}
{{- if and $doc (eq (get $doc "kind") $kind) -}}
{{- $rules := list -}}
{{- range (get $doc "rules") -}}
{{- if has "clusterroles" .resources -}}
{{- $_ := set . "resourceNames" (list (include "posture.tenantAccessRole" $root)) -}}
{{- end -}}
{{- /* The one Secret the manager may update: the aggregated API's serving certificate. */ -}}
{{- if and (has "secrets" .resources) .resourceNames -}}
{{- $_ := set . "resourceNames" (list (include "posture.aggregatedAPISecret" $root)) -}}
{{- end -}}
{{- $rules = append $rules . -}}
{{- end -}}
{{ toYaml $rules }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The aggregated API's Service, and the Secret (kubernetes.io/tls, with ca.crt) it serves from. */}}
{{- define "posture.aggregatedAPIService" -}}
{{ printf "%s-aggregated-api" (include "posture.fullname" .) }}
{{- end -}}
{{- define "posture.aggregatedAPISecret" -}}
{{ printf "%s-aggregated-api-tls" (include "posture.fullname" .) }}
{{- end -}}

{{/* The Secret (type kubernetes.io/tls) the API serves its certificate from. */}}
{{- define "posture.apiTLSSecret" -}}
{{ .Values.api.tls.secretName | default (printf "%s-api-tls" (include "posture.fullname" .)) }}
{{- end -}}

{{/* http or https: how the API is reached. */}}
{{- define "posture.apiScheme" -}}
{{ if .Values.api.tls.enabled }}https{{ else }}http{{ end }}
{{- end -}}

{{/* How Prometheus scrapes the manager: HTTPS with its own ServiceAccount token, which the
     manager has the API server authenticate and authorize (get on /metrics). */}}
{{- define "posture.scrapeEndpoint" -}}
path: /metrics
scheme: https
interval: {{ .Values.metrics.serviceMonitor.interval }}
scrapeTimeout: {{ .Values.metrics.serviceMonitor.scrapeTimeout }}
bearerTokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
{{- with .Values.metrics.serviceMonitor.tlsConfig }}
tlsConfig: {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
