{{/* Names and labels shared by every template. */}}

{{- define "apigate.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's resource name: the release name alone when it already says apigate. */}}
{{- define "apigate.fullname" -}}
{{- if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "apigate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "apigate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "apigate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{ include "apigate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "apigate.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{- define "apigate.configMapName" -}}
{{- .Values.config.existingConfigMap | default (include "apigate.fullname" .) }}
{{- end }}

{{/* Pod and container security: apigate's image runs as uid 10001 and writes only to the
     emptyDir volumes it is given. */}}
{{- define "apigate.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "apigate.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/* The Secret's keys as environment variables (DATABASE_URL, MCP_SERVER_API_KEY, …). */}}
{{- define "apigate.envFrom" -}}
- secretRef:
    name: {{ required "existingSecret: name a Secret holding DATABASE_URL" .Values.existingSecret }}
{{- end }}
