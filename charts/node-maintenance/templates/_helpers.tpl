{{/* Chart name, truncated to the 63 characters a label value allows. */}}
{{- define "node-maintenance.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified name of the release's objects. Kept to 52 characters so that the longest
derived name ("<fullname>-selfsigned", "<fullname>-controller") stays a valid label value.
*/}}
{{- define "node-maintenance.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "node-maintenance.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select the server pods; stable across upgrades. */}}
{{- define "node-maintenance.selectorLabels" -}}
app.kubernetes.io/name: {{ include "node-maintenance.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{/*
Recommended labels for every object. Call with (dict "ctx" $ "component" "server").
*/}}
{{- define "node-maintenance.labels" -}}
{{- $ctx := .ctx -}}
helm.sh/chart: {{ include "node-maintenance.chart" $ctx }}
app.kubernetes.io/name: {{ include "node-maintenance.name" $ctx }}
app.kubernetes.io/instance: {{ $ctx.Release.Name }}
app.kubernetes.io/version: {{ $ctx.Chart.AppVersion | quote }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: node-maintenance
app.kubernetes.io/managed-by: {{ $ctx.Release.Service }}
{{- with $ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "node-maintenance.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "node-maintenance.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "node-maintenance.leaseName" -}}
{{- default (printf "%s-controller" (include "node-maintenance.fullname" .)) .Values.controller.leaseName }}
{{- end }}

{{/* Name of the Secret holding tls.crt and tls.key. */}}
{{- define "node-maintenance.tlsSecretName" -}}
{{- if .Values.tls.certManager.enabled }}
{{- printf "%s-tls" (include "node-maintenance.fullname" .) }}
{{- else if .Values.tls.existingSecret }}
{{- .Values.tls.existingSecret }}
{{- else }}
{{- fail "tls: set tls.existingSecret (and tls.caBundle) when tls.certManager.enabled is false" }}
{{- end }}
{{- end }}

{{/* Name of the cert-manager Certificate that serves the webhooks. */}}
{{- define "node-maintenance.servingCertificate" -}}
{{- printf "%s-serving" (include "node-maintenance.fullname" .) }}
{{- end }}

{{/* Annotations of both webhook configurations. */}}
{{- define "node-maintenance.webhookAnnotations" -}}
{{- if .Values.tls.certManager.enabled }}
cert-manager.io/inject-ca-from: {{ printf "%s/%s" .Release.Namespace (include "node-maintenance.servingCertificate" .) }}
{{- end }}
{{- end }}

{{/* clientConfig of a webhook. Call with (dict "ctx" $ "path" "/mutate"). */}}
{{- define "node-maintenance.clientConfig" -}}
{{- $ctx := .ctx -}}
service:
  name: {{ include "node-maintenance.fullname" $ctx }}
  namespace: {{ $ctx.Release.Namespace }}
  path: {{ .path }}
  port: {{ $ctx.Values.service.port }}
{{- if not $ctx.Values.tls.certManager.enabled }}
{{- if not $ctx.Values.tls.caBundle }}
{{- fail "tls: set tls.caBundle (base64 PEM of the CA that signed tls.existingSecret) when tls.certManager.enabled is false" }}
{{- end }}
caBundle: {{ $ctx.Values.tls.caBundle }}
{{- end }}
{{- end }}

{{/* Name of the leader-election Role and RoleBinding (at most 63 characters). */}}
{{- define "node-maintenance.leaderElectionName" -}}
{{- printf "%s-leader-election" (include "node-maintenance.fullname" . | trunc 47 | trimSuffix "-") }}
{{- end }}

{{/*
Labels and annotations of one alert of templates/prometheusrule.yaml. Call with (dict
"root" $ "pr" .Values.metrics.prometheusRule "name" "AlertName" "alert" <its values>
"summary" "..." "description" "..."). The description is Prometheus template text.
*/}}
{{- define "node-maintenance.alertMeta" -}}
labels:
  severity: {{ .alert.severity }}
  {{- with .pr.additionalAlertLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
annotations:
  summary: {{ .summary | quote }}
  description: {{ .description | quote }}
  runbook_url: {{ printf "%s%s.md" (.pr.runbookBaseUrl | default "docs/runbooks/") .name | quote }}
{{- end }}
