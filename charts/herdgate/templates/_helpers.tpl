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
{{- /* Checked here, not in values.schema.json: a schema error repeats the value, password included. */ -}}
{{- if and .Values.redis.url (not (regexMatch `^$|^(redis|rediss)(\+cluster)?://([^\s/@]*@)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?(/[0-9]{0,5})?(\?((addr=(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?|([^\s#&=a][^\s#&=]*|a([^\s#&=d][^\s#&=]*)?|ad([^\s#&=d][^\s#&=]*)?|add([^\s#&=r][^\s#&=]*)?|addr[^\s#&=]+)=[^\s#&]*)(&(addr=(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?|([^\s#&=a][^\s#&=]*|a([^\s#&=d][^\s#&=]*)?|ad([^\s#&=d][^\s#&=]*)?|add([^\s#&=r][^\s#&=]*)?|addr[^\s#&=]+)=[^\s#&]*))*)?)?$|^(redis|rediss)\+sentinel://([^\s/@]*@)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])(,(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))*/[^\s/?#]+(\?[^\s#]*)?$` .Values.redis.url)) -}}
{{- fail "redis.url: not a Redis URL: redis://[user:password@]host[:port][/db] (rediss:// for TLS), redis+cluster://host:port?addr=host:port, or redis+sentinel://host:port[,host:port]/master (the value is not repeated here: it may hold a password)" -}}
{{- end -}}
{{- if and .Values.redis.deploy (or .Values.redis.url .Values.redis.existingSecret.name) -}}
{{- fail "redis: redis.deploy=true runs its own Redis; leave redis.url and redis.existingSecret.name empty" -}}
{{- end -}}
{{- end -}}
