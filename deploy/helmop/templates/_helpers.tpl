{{- define "helmop.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}{{ .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else -}}{{ printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{- define "helmop.labels" -}}
app.kubernetes.io/name: helmop
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "helmop.selector" -}}
app.kubernetes.io/name: helmop
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "helmop.serviceAccount" -}}
{{- default (include "helmop.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}
