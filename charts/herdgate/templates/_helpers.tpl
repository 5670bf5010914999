{{/* The release's base name, at most 55 characters: Service names are at most 63, and the longest
suffix the chart adds to a Service name is "-metrics". */}}
{{- define "herdgate.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 55 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 55 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 55 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "herdgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "herdgate.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "herdgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "herdgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "herdgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end -}}

{{- define "herdgate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* The Secret and key that hold the default Redis URL. */}}
{{- define "herdgate.redisSecretName" -}}
{{- if .Values.redis.existingSecret.name -}}
{{- .Values.redis.existingSecret.name -}}
{{- else -}}
{{- printf "%s-redis-url" (include "herdgate.fullname" .) -}}
{{- end -}}
{{- end -}}

{{- define "herdgate.redisSecretKey" -}}
{{- if .Values.redis.existingSecret.name -}}{{ .Values.redis.existingSecret.key }}{{- else -}}url{{- end -}}
{{- end -}}

{{- define "herdgate.validate" -}}
{{- if not (or .Values.redis.url .Values.redis.existingSecret.name .Values.redis.deploy) -}}
{{- fail "redis: set redis.url, or redis.existingSecret.name, or redis.deploy=true (evaluation only)" -}}
{{- end -}}
{{- if and .Values.redis.url .Values.redis.existingSecret.name -}}
{{- fail "redis: set only one of redis.url and redis.existingSecret.name" -}}
{{- end -}}
{{- if and .Values.redis.deploy (or .Values.redis.url .Values.redis.existingSecret.name) -}}
{{- fail "redis: redis.deploy=true runs its own Redis; leave redis.url and redis.existingSecret.name empty" -}}
{{- end -}}
{{- end -}}
